"""The response cache: one SQLite file, every response written durably as it arrives.

The file runs in WAL mode with ``synchronous=NORMAL``. A response stored from
inside an event loop is committed at the end of the loop turn in which it
arrived, in one transaction with the others that arrived in that turn (one
commit per answer cost a fifth of a fan-out's CPU); outside a loop each is
committed before :meth:`ResponseCache.put` returns. The engine commits before
it hands an answer on, so a run directory never records an answer the cache
lacks. A committed response survives the process being killed at any moment
(``kill -9`` included); only a power cut can lose the last few. A restarted
run therefore re-sends only what never came back (or was still in flight).

**Several processes may share one cache file**, and nothing in it is paid for
twice: before sending, a run :meth:`claims <ResponseCache.claim>` its requests
in one write transaction, which also finds the answers another process stored
since the run planned. A request another live process has claimed is waited
for, not sent again; a claim (a lease, table ``leases``) lapses when its
holder's process is gone (:mod:`biasaudit.processes`) or, for a holder on
another host, when the lease runs out unrenewed.

**Storage that fails is named, never a traceback.** A file that is not an
SQLite database, or is damaged, and a file or folder that cannot be written
raise :class:`~biasaudit.errors.StorageUnusableError` (what to do included)
when the cache is opened or read; a write that fails mid-run (a full disk)
raises :class:`~biasaudit.errors.StorageFailedError` from then on, so the run
stops sending. The answers that could not be written are kept in memory and
committed by the next commit that succeeds.

Only answers are stored, a refusal included (the model's answer to that prompt,
paid for and replayed as it came). Errors never are, and neither is anything
secret: the key is a hash of the request content (see
:meth:`biasaudit.providers.ModelRequest.cache_key`) and the value is the
normalised response.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from biasaudit.errors import BiasauditError, StorageFailedError, StorageUnusableError
from biasaudit.processes import holder_alive, stopped_holders
from biasaudit.providers import ModelResponse

__all__ = ["CACHE_SCHEMA_VERSION", "CacheStats", "Claim", "ResponseCache", "cache_error"]

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model_id TEXT NOT NULL,
    created REAL NOT NULL,
    body TEXT NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS responses_model ON responses (model_id);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('schema_version', '1');
CREATE TABLE IF NOT EXISTS leases (
    key TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires REAL NOT NULL
) WITHOUT ROWID;
"""
# The cache layout this biasaudit writes and reads. A cache whose meta table says more
# was written by a newer biasaudit: refused by name, never read or written.
CACHE_SCHEMA_VERSION = 1
_INSERT = "INSERT OR REPLACE INTO responses (key, model_id, created, body) VALUES (?, ?, ?, ?)"
_CHUNK = 500  # keys per SELECT ... IN (...): under SQLite's variable limit
_BUSY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class CacheStats:
    """Entries, stored bytes and hits of one model in the cache."""

    model_id: str
    entries: int
    body_bytes: int
    hits: int
    first: float
    last: float


@dataclass
class Claim:
    """What :meth:`ResponseCache.claim` found for a run's uncached keys.

    Attributes
    ----------
    answered:
        Stored since the run planned (by another process): serve from the cache.
    held:
        Claimed by another live process: wait for its answer.
    taken:
        Claimed by this holder now: send these.
    """

    answered: set[str] = field(default_factory=set)
    held: set[str] = field(default_factory=set)
    taken: list[str] = field(default_factory=list)


class ResponseCache:
    """A persistent map from cache key to :class:`ModelResponse`.

    Parameters
    ----------
    path:
        The SQLite file; created with its folder if absent (unless ``readonly``).
    readonly:
        Open without the right to write (replays, ``cache stats``).

    Raises
    ------
    StorageUnusableError
        The file is not an SQLite database or is damaged, or (unless
        ``readonly``) it or its folder cannot be written.
    """

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self.broken: BiasauditError | None = None
        try:
            self._db = self._open_readonly() if readonly else self._open_writable()
        except sqlite3.Error as error:
            raise cache_error(self.path, error, writing=not readonly) from None
        except OSError as error:  # its folder cannot be created
            blocker = next((p for p in self.path.parents if p.is_file()), None)
            why = f"{blocker} is a file, not a folder" if blocker else error.strerror
            raise StorageUnusableError(
                f"cannot create the response cache {self.path}: {why}; "
                "give --runs-dir a folder, or --cache a file in a writable folder"
            ) from None
        if readonly:
            try:
                _check_version(self._db, self.path)
            except BaseException:
                self._db.close()
                raise
        self._pending_hits: list[str] = []
        self._pending_rows: list[tuple[str, str, float, str]] = []
        self._commit_scheduled = False

    @classmethod
    def for_reading(cls, path: str | Path) -> ResponseCache:
        """Open to read, counting hits where the file may be written, read-only where not."""
        try:
            return cls(path)
        except StorageUnusableError:
            return cls(path, readonly=True)

    def _open_writable(self) -> sqlite3.Connection:
        """Open for writing, in WAL mode, with the schema in place.

        Two processes opening a new cache at once can find it locked *without*
        SQLite's busy handler waiting: switching a file to WAL needs it to
        themselves, so one of them gets "database is locked" at once, or its
        switch silently leaves the file in rollback mode (where readers and
        writers then block each other). Both are retried until the file is in
        WAL mode, for as long as the busy timeout allows.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        deadline = time.monotonic() + _BUSY_TIMEOUT_S
        try:
            while True:
                try:
                    (mode,) = db.execute("PRAGMA journal_mode=WAL").fetchone()
                    if str(mode).lower() == "wal":
                        db.execute("PRAGMA synchronous=NORMAL")
                        _check_version(db, self.path)  # before a newer layout is touched
                        db.executescript(_SCHEMA)
                        return db
                except sqlite3.OperationalError as error:
                    if "locked" not in str(error) and "busy" not in str(error):
                        raise
                    if time.monotonic() > deadline:
                        raise
                if time.monotonic() > deadline:
                    raise sqlite3.OperationalError("database is locked (could not switch to WAL)")
                time.sleep(0.02)
        except BaseException:
            db.close()
            raise

    def _open_readonly(self) -> sqlite3.Connection:
        if not self.path.exists():
            raise StorageUnusableError(f"no cache at {self.path}")
        uri = self.path.resolve().as_uri()
        try:
            return _opened(f"{uri}?mode=ro", timeout=_BUSY_TIMEOUT_S)
        except sqlite3.OperationalError:
            # A WAL database in a folder nobody may write: SQLite cannot make the
            # shared-memory file it reads through. Read the file as it stands.
            return _opened(f"{uri}?immutable=1", timeout=5.0)

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reading ------------------------------------------------------------------------

    def get(self, key: str) -> ModelResponse | None:
        self.commit()
        row = self._read("SELECT body FROM responses WHERE key = ?", (key,))
        if not row:
            return None
        self._pending_hits.append(key)
        return ModelResponse.model_validate_json(row[0][0])

    def keys_present(self, keys: Iterable[str]) -> set[str]:
        """Which of ``keys`` the cache holds (reads no response bodies)."""
        self.commit()
        present: set[str] = set()
        for chunk in _chunks(list(dict.fromkeys(keys))):
            marks = ",".join("?" * len(chunk))
            rows = self._read(f"SELECT key FROM responses WHERE key IN ({marks})", chunk)
            present.update(key for (key,) in rows)
        return present

    def get_many(self, keys: Iterable[str]) -> dict[str, ModelResponse]:
        """Every cached response among ``keys`` (missing keys are left out)."""
        self.commit()
        found: dict[str, ModelResponse] = {}
        for chunk in _chunks(list(dict.fromkeys(keys))):
            marks = ",".join("?" * len(chunk))
            rows = self._read(f"SELECT key, body FROM responses WHERE key IN ({marks})", chunk)
            for key, body in rows:
                found[key] = ModelResponse.model_validate_json(body)
        self._pending_hits.extend(found)
        return found

    def _read(self, sql: str, args: Iterable[object]) -> list[tuple[str, ...]]:
        try:
            return self._db.execute(sql, tuple(args)).fetchall()
        except sqlite3.Error as error:
            raise cache_error(self.path, error, writing=False) from None

    # --- writing ------------------------------------------------------------------------

    def put(self, key: str, response: ModelResponse, *, model_id: str) -> None:
        """Store one response: committed at the end of this loop turn, or now outside a loop.

        Raises
        ------
        StorageFailedError
            An earlier commit failed (the disk is full): nothing more can be stored.
            The response is kept for the next commit that succeeds.
        """
        if self.readonly:
            raise PermissionError(f"cache {self.path} is open read-only")
        row = (key, model_id, time.time(), response.model_dump_json(exclude_defaults=True))
        self._pending_rows.append(row)
        if self.broken is not None:
            raise self.broken
        if self._commit_scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.commit()
            return
        self._commit_scheduled = True
        loop.call_soon(self._commit_at_end_of_turn)

    def commit(self) -> None:
        """Commit the responses stored since the last commit, in one transaction.

        Raises
        ------
        StorageFailedError
            The write failed; the rows are kept for the next commit.
        """
        self._commit_scheduled = False
        rows, self._pending_rows = self._pending_rows, []
        if not rows:
            return

        def write() -> None:
            if len(rows) == 1:
                self._db.execute(_INSERT, rows[0])  # autocommit
            else:
                with self._db:
                    self._db.execute("BEGIN")
                    self._db.executemany(_INSERT, rows)

        try:
            _while_busy(self._db, write)
        except sqlite3.Error as error:
            self._pending_rows[:0] = rows  # kept for the next commit
            self.broken = cache_error(self.path, error, writing=True)
            raise self.broken from None
        self.broken = None

    @property
    def uncommitted(self) -> int:
        """Answers stored but not yet committed (after a failed commit: those it kept)."""
        return len(self._pending_rows)

    def _commit_at_end_of_turn(self) -> None:
        try:
            self.commit()
        except BiasauditError as error:  # the engine raises it before it hands an answer on
            logger.debug("could not commit to the response cache %s: %s", self.path, error)

    def flush_hits(self) -> None:
        """Commit pending responses; add the hits served since the last flush to the counters."""
        self.commit()
        if self.readonly or not self._pending_hits:
            self._pending_hits.clear()
            return
        try:
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany(
                    "UPDATE responses SET hits = hits + 1 WHERE key = ?",
                    ((key,) for key in self._pending_hits),
                )
        except sqlite3.Error as error:  # the counters are a nicety; the answers are safe
            logger.warning("could not count cache hits in %s: %s", self.path, error)
        self._pending_hits.clear()

    # --- leases on requests in flight -----------------------------------------------------

    def claim(self, keys: Iterable[str], holder: str, *, lease_s: float) -> Claim:
        """Claim ``keys`` for ``holder`` in one write transaction; see :class:`Claim`.

        A key stored since it was planned is ``answered``; one leased to another
        live holder whose lease has not run out is ``held``; every other key is
        leased to ``holder`` for ``lease_s`` seconds and ``taken``.
        """
        wanted = list(dict.fromkeys(keys))
        claim = Claim()
        now = time.time()
        try:
            self.commit()
            _while_busy(self._db, lambda: self._db.execute("BEGIN IMMEDIATE"))
            try:
                for chunk in _chunks(wanted):
                    marks = ",".join("?" * len(chunk))
                    rows = self._db.execute(
                        f"SELECT key FROM responses WHERE key IN ({marks})", chunk
                    )
                    claim.answered.update(key for (key,) in rows)
                    rows = self._db.execute(
                        f"SELECT key, holder, expires FROM leases WHERE key IN ({marks})", chunk
                    )
                    claim.held.update(
                        key
                        for key, other, expires in rows
                        if other != holder and expires > now and holder_alive(other)
                    )
                claim.held -= claim.answered
                claim.taken = [k for k in wanted if k not in claim.answered and k not in claim.held]
                self._db.executemany(
                    "INSERT OR REPLACE INTO leases (key, holder, expires) VALUES (?, ?, ?)",
                    ((key, holder, now + lease_s) for key in claim.taken),
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        except sqlite3.Error as error:
            raise cache_error(self.path, error, writing=True) from None
        return claim

    def renew(self, holder: str, *, lease_s: float) -> None:
        """Extend every lease of ``holder`` by ``lease_s`` seconds from now."""
        expires = time.time() + lease_s
        self._write("UPDATE leases SET expires = ? WHERE holder = ?", (expires, holder))

    def release(self, holder: str) -> None:
        """Drop every lease of ``holder`` (its run is over), and leases long run out."""
        self._write(
            "DELETE FROM leases WHERE holder = ? OR expires < ?", (holder, time.time() - 86_400)
        )

    def _write(self, sql: str, args: tuple[object, ...]) -> None:
        try:
            _while_busy(self._db, lambda: self._db.execute(sql, args))
        except sqlite3.Error as error:
            raise cache_error(self.path, error, writing=True) from None

    # --- the rest -------------------------------------------------------------------------

    def __len__(self) -> int:
        self.commit()
        return int(self._read("SELECT COUNT(*) FROM responses", ())[0][0])

    def stats(self) -> list[CacheStats]:
        """Per-model entry counts, sizes, hits and the time span of their entries."""
        self.commit()
        rows = self._read(
            "SELECT model_id, COUNT(*), SUM(LENGTH(body)), SUM(hits), MIN(created), MAX(created) "
            "FROM responses GROUP BY model_id ORDER BY model_id",
            (),
        )
        return [CacheStats(*row) for row in rows]  # type: ignore[arg-type]

    def close(self) -> None:
        """Commit what is pending and close; a commit that fails here is logged, not raised."""
        try:
            self.flush_hits()
        except BiasauditError as error:
            logger.warning("%s; %d answers could not be kept", error, len(self._pending_rows))
        finally:
            self._db.close()


def _stopped_hint(path: Path) -> str:
    """Where a process sending for this cache is stopped (Ctrl-Z, SIGSTOP) and may hold its
    lock: which, and how to resume it."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)) as db:
            holders = [row[0] for row in db.execute("SELECT DISTINCT holder FROM leases")]
    except sqlite3.Error:
        return ""
    stopped = stopped_holders(holders)
    if not stopped:
        return ""
    pids = ", ".join(map(str, stopped))
    return (
        f"; process {pids}, which sends for this cache, is stopped (Ctrl-Z or SIGSTOP) and "
        f"may hold it: resume it (fg in its terminal, or kill -CONT {pids})"
    )


def cache_error(path: Path, error: sqlite3.Error, *, writing: bool) -> BiasauditError:
    """What an SQLite error on the cache file means to the user, and what to do about it."""
    name = getattr(error, "sqlite_errorname", "") or ""
    text = str(error)
    damaged = "malformed" in text or "not a database" in text
    if name in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or damaged:
        return StorageUnusableError(
            f"the response cache {path} is damaged ({text}). Move it aside "
            f"(mv '{path}' '{path}.damaged') and run again to start a new cache (its answers "
            "will be asked again), or give --cache another file"
        )
    read_only = name.startswith("SQLITE_READONLY") or "readonly" in text
    if (
        writing
        and path.exists()
        and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))
    ):
        read_only = True  # SQLite says "unable to open" when it cannot make its WAL files
    if read_only:
        return StorageUnusableError(
            f"the response cache {path} is read-only ({text}); a run that sends requests "
            "stores every answer there: give --cache a writable file, or answer from this "
            "one with --replay"
        )
    if name.startswith("SQLITE_CANTOPEN") or "unable to open" in text:
        return StorageUnusableError(
            f"cannot open the response cache {path} ({text}); check that its folder exists "
            "and may be written, or give --cache another file"
        )
    if name == "SQLITE_BUSY" or "locked" in text:
        return StorageFailedError(
            f"the response cache {path} stayed locked by another process for "
            f"{_BUSY_TIMEOUT_S:.0f} s ({text}){_stopped_hint(path)}; run again when it is free"
        )
    what = "store answers in" if writing else "read"
    return StorageFailedError(
        f"cannot {what} the response cache {path} ({text}); the run stopped sending. Free "
        "some space (or mend the disk) and run the same command again: every answer the "
        "run recorded is in the cache"
    )


def _while_busy(db: sqlite3.Connection, operation: Callable[[], object]) -> None:
    """Run ``operation``, again while SQLite answers "locked" or "busy" *at once*.

    SQLite's busy handler waits out an ordinary lock (``_BUSY_TIMEOUT_S``), but
    some contention between two processes is reported at once, without it: a
    WAL snapshot gone stale under a writer, a file switching journal mode.
    Those are retried here until the connection's busy timeout has passed
    since the first try; a lock that lasts longer is an error.
    """
    start = time.monotonic()
    timeout_s: float | None = None
    while True:
        try:
            operation()
            return
        except sqlite3.OperationalError as error:
            text = str(error)
            if "locked" not in text and "busy" not in text:
                raise
            if timeout_s is None:
                timeout_s = float(db.execute("PRAGMA busy_timeout").fetchone()[0]) / 1000
            if time.monotonic() - start >= timeout_s:
                raise
        time.sleep(0.02)


def _check_version(db: sqlite3.Connection, path: Path) -> None:
    """Refuse a cache a newer biasaudit wrote: its layout may mean something else.

    Raises
    ------
    StorageUnusableError
        The cache's ``schema_version`` is above :data:`CACHE_SCHEMA_VERSION`.
    """
    try:
        rows = db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchall()
    except sqlite3.OperationalError:
        return  # no meta table yet (a new file): the schema is written next
    found = rows[0][0] if rows else None
    try:
        version = int(found) if found is not None else CACHE_SCHEMA_VERSION
    except (TypeError, ValueError):
        version = CACHE_SCHEMA_VERSION + 1  # not a number: nothing this one wrote
    if version > CACHE_SCHEMA_VERSION:
        raise StorageUnusableError(
            f"the response cache {path} was written by a newer biasaudit (cache "
            f"schema_version {found}; this one reads up to {CACHE_SCHEMA_VERSION}): "
            "upgrade biasaudit, or give --cache another file"
        )


def _opened(uri: str, *, timeout: float) -> sqlite3.Connection:
    """A read-only connection to ``uri`` that has read the schema; closed if it cannot."""
    db = sqlite3.connect(uri, uri=True, timeout=timeout)
    try:
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except BaseException:
        db.close()
        raise
    return db


def _chunks(keys: list[str]) -> Iterable[list[str]]:
    for start in range(0, len(keys), _CHUNK):
        yield keys[start : start + _CHUNK]
