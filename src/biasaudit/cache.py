"""The response cache: one SQLite file, every response written durably as it arrives.

The file runs in WAL mode with ``synchronous=NORMAL``. A response stored from
inside an event loop is committed at the end of the loop turn in which it
arrived, in one transaction with the others that arrived in that turn (one
commit per answer cost a fifth of a fan-out's CPU); outside a loop each is
committed before :meth:`ResponseCache.put` returns. A committed response
survives the process being killed at any moment (``kill -9`` included); only a
power cut can lose the last few. A restarted run therefore re-sends only what
never came back (or was still in flight), and nothing in the cache is paid for
twice. Several processes may share one cache file.

Only answers are stored, a refusal included (the model's answer to that prompt,
paid for and replayed as it came). Errors never are, and neither is anything
secret: the key is a hash of the request content (see
:meth:`biasaudit.providers.ModelRequest.cache_key`) and the value is the
normalised response.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .providers import ModelResponse

__all__ = ["CacheStats", "ResponseCache"]

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
"""
_INSERT = "INSERT OR REPLACE INTO responses (key, model_id, created, body) VALUES (?, ?, ?, ?)"
_CHUNK = 500  # keys per SELECT ... IN (...): under SQLite's variable limit


@dataclass(frozen=True)
class CacheStats:
    """Entries, stored bytes and hits of one model in the cache."""

    model_id: str
    entries: int
    body_bytes: int
    hits: int
    first: float
    last: float


class ResponseCache:
    """A persistent map from cache key to :class:`ModelResponse`.

    Parameters
    ----------
    path:
        The SQLite file; created with its folder if absent (unless ``readonly``).
    readonly:
        Open without the right to write (replays, ``cache stats``).
    """

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        if readonly:
            if not self.path.exists():
                raise FileNotFoundError(f"no cache at {self.path}")
            self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30.0)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        self.readonly = readonly
        self._pending_hits: list[str] = []
        self._pending_rows: list[tuple[str, str, float, str]] = []
        self._commit_scheduled = False

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, key: str) -> ModelResponse | None:
        self.commit()
        row = self._db.execute("SELECT body FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        self._pending_hits.append(key)
        return ModelResponse.model_validate_json(row[0])

    def keys_present(self, keys: Iterable[str]) -> set[str]:
        """Which of ``keys`` the cache holds (reads no response bodies)."""
        self.commit()
        present: set[str] = set()
        for chunk in _chunks(list(dict.fromkeys(keys))):
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(f"SELECT key FROM responses WHERE key IN ({marks})", chunk)
            present.update(key for (key,) in rows)
        return present

    def get_many(self, keys: Iterable[str]) -> dict[str, ModelResponse]:
        """Every cached response among ``keys`` (missing keys are left out)."""
        self.commit()
        found: dict[str, ModelResponse] = {}
        for chunk in _chunks(list(dict.fromkeys(keys))):
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT key, body FROM responses WHERE key IN ({marks})", chunk
            )
            for key, body in rows:
                found[key] = ModelResponse.model_validate_json(body)
        self._pending_hits.extend(found)
        return found

    def put(self, key: str, response: ModelResponse, *, model_id: str) -> None:
        """Store one response: committed at the end of this loop turn, or now outside a loop."""
        if self.readonly:
            raise PermissionError(f"cache {self.path} is open read-only")
        row = (key, model_id, time.time(), response.model_dump_json(exclude_defaults=True))
        self._pending_rows.append(row)
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
        """Commit the responses stored since the last commit, in one transaction."""
        self._commit_scheduled = False
        rows, self._pending_rows = self._pending_rows, []
        if not rows:
            return
        try:
            if len(rows) == 1:
                self._db.execute(_INSERT, rows[0])  # autocommit
                return
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany(_INSERT, rows)
        except BaseException:
            self._pending_rows[:0] = rows  # kept for the next commit, which raises again
            raise

    def _commit_at_end_of_turn(self) -> None:
        try:
            self.commit()
        except sqlite3.Error as error:  # the next commit (at the latest, close) raises it
            logger.warning("could not commit to the response cache %s yet: %s", self.path, error)

    def flush_hits(self) -> None:
        """Commit pending responses; add the hits served since the last flush to the counters."""
        self.commit()
        if self.readonly or not self._pending_hits:
            self._pending_hits.clear()
            return
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                "UPDATE responses SET hits = hits + 1 WHERE key = ?",
                ((key,) for key in self._pending_hits),
            )
        self._pending_hits.clear()

    def __len__(self) -> int:
        self.commit()
        return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def stats(self) -> list[CacheStats]:
        """Per-model entry counts, sizes, hits and the time span of their entries."""
        self.commit()
        rows = self._db.execute(
            "SELECT model_id, COUNT(*), SUM(LENGTH(body)), SUM(hits), MIN(created), MAX(created) "
            "FROM responses GROUP BY model_id ORDER BY model_id"
        ).fetchall()
        return [CacheStats(*row) for row in rows]

    def close(self) -> None:
        try:
            self.flush_hits()
        finally:
            self._db.close()


def _chunks(keys: list[str]) -> Iterable[list[str]]:
    for start in range(0, len(keys), _CHUNK):
        yield keys[start : start + _CHUNK]
