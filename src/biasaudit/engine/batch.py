"""``--batch``: send a run's uncached requests through the provider's batch API.

OpenAI's Batch API and Anthropic's Message Batches answer many requests at
once within 24 hours, at half the price. The engine hands this module the
requests the cache could not answer; it

1. **records** each batch it is about to create in the response cache's SQLite
   file (tables ``batches`` and ``batch_items``: batch, endpoint, and every
   entry's cache key, which is also its ``custom_id``, with the request itself)
   *before* it is submitted: an intent, committed in one transaction;
2. **submits** it, split at the provider's limits (requests and bytes per
   batch), and records the provider's batch id the moment it is known, in
   ``batches.json`` of the run too;
3. **polls** every pending batch with capped exponential backoff, showing its
   status and counts through the progress line;
4. **collects** an ended batch's results, which arrive in any order, by
   ``custom_id``: answers go into the response cache exactly as answers of
   the normal path do (same body sent, same parser), so replay, compare and
   reports see no difference; entries that errored, expired or were
   cancelled are sent again through the normal path, where they are answered
   or reported as failures like any failed request. Nothing but an answer is
   ever cached.

**Resume.** Nothing here lives only in memory. A rerun of the same command
finds its requests' keys in a pending batch and polls that batch instead of
submitting them again, whatever stopped the first process (Ctrl-C, SIGTERM,
``kill -9``). The one window a crash can hit between two durable writes is
between the provider creating the batch and its id being recorded; the intent
row, written before, tells the rerun to look for it first: OpenAI batches
carry the intent's id in their ``metadata``, found by listing the batches
created since; Anthropic's keep no labels, so the one unrecorded batch of the
same size created since is taken (a wrong guess costs no answer: entries
matching no recorded key are ignored and requests left without an answer are
sent through the normal path). Only when no such batch exists is the intent
submitted, then, for the first time.

**Two processes at once.** Finding the open batches and recording new intents
happen in one write transaction, so a second process started at the same
moment sees the first one's intents rather than making its own. An intent is
submitted only by the process holding its lease (its owner, renewed before
each attempt); another process waits for the batch id to appear, and takes
the intent over only once the owner is gone (a dead process on this host) or
its lease has run out.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import secrets
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from biasaudit.errors import ProviderError, TransientProviderError, UsageError
from biasaudit.processes import holder_alive, new_holder, running
from biasaudit.providers import ModelRequest, ModelResponse, Provider
from biasaudit.providers._batch_api import BatchAPI, BatchEntry, BatchLimits, BatchState
from biasaudit.store.runs import BatchRecord, BatchRunState

if TYPE_CHECKING:
    from biasaudit.engine.types import EngineSettings, EngineStats, Pairs, RequestResult
    from biasaudit.store.cache import ResponseCache

__all__ = ["BatchRunner", "BatchStore", "require_batch_api"]

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    local_id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model_id TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    batch_id TEXT,
    state TEXT NOT NULL,
    status TEXT NOT NULL,
    counts TEXT NOT NULL DEFAULT '{}',
    requests INTEGER NOT NULL,
    failed INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    lease REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS batch_items (
    local_id TEXT NOT NULL,
    key TEXT NOT NULL,
    request TEXT NOT NULL,
    PRIMARY KEY (local_id, key)
);
CREATE INDEX IF NOT EXISTS batch_items_key ON batch_items (key);
"""
_CHUNK = 500  # keys per SELECT ... IN (...)
_OPEN_STATES = ("submitting", "submitted", "ended")
# How long before an intent was recorded its batch may look created, by the
# provider's clock: the two clocks may disagree.
_CLOCK_SLACK_S = 600.0
# Creating, listing and downloading batches move far more bytes than one request.
_MIN_CONTROL_TIMEOUT_S = 300.0
_LOST = "not found at the provider"
# How long the process that recorded an intent keeps the sole right to submit it
# (renewed before every attempt); a dead owner on this host loses it at once.
_LEASE_S = 900.0


class _TakenOver(Exception):
    """Another process took over an intent whose lease ran out while we retried."""


def require_batch_api(provider: Provider) -> BatchAPI:
    """The provider's batch API, or a usage error naming the providers that have one.

    Raises
    ------
    UsageError
        ``provider`` has no batch API (sim, local, self-hosted servers, other hosts).
    """
    api = provider.batch_api()
    if api is None:
        raise UsageError(
            f"--batch: {provider.model_id} has no batch API; batches are for openai/ "
            "(the Batch API) and anthropic/ (Message Batches) models. Run without --batch."
        )
    return api


@dataclass
class _Batch:
    """One batch as the runner tracks it (its row in ``batches``)."""

    local_id: str
    endpoint: str
    requests: int
    state: BatchRunState
    created: float
    batch_id: str | None = None
    status: str = "submitting"
    counts: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    resumed: bool = False
    lines: list[dict[str, Any]] | None = None  # kept from planning until submitted


class BatchStore:
    """The ``batches`` and ``batch_items`` tables, in the response cache's SQLite file.

    Every method commits before it returns, so what it wrote survives ``kill -9``.
    """

    def __init__(self, path: str | Path) -> None:
        self._db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(batches)")}
            for column, kind in (
                ("owner", "TEXT NOT NULL DEFAULT ''"),
                ("lease", "REAL NOT NULL DEFAULT 0"),
            ):
                if column not in columns:  # a cache written before leases existed
                    self._db.execute(f"ALTER TABLE batches ADD COLUMN {column} {kind}")
        except BaseException:
            self._db.close()
            raise

    def close(self) -> None:
        self._db.close()

    @contextlib.contextmanager
    def planning(self) -> Iterator[None]:
        """One write transaction: no other process plans between our read and our intents."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def claim(self, local_id: str, owner: str) -> bool:
        """Take or renew the right to submit an intent; False while another process holds it."""
        row = self._db.execute(
            "SELECT owner, lease, state FROM batches WHERE local_id = ?", (local_id,)
        ).fetchone()
        holder, lease, state = row
        now = time.time()
        if state != "submitting":
            return False
        if holder not in ("", owner) and lease > now and holder_alive(holder):
            return False
        changed = self._db.execute(
            "UPDATE batches SET owner = ?, lease = ? WHERE local_id = ? AND owner = ?",
            (owner, now + _LEASE_S, local_id, holder),
        ).rowcount
        return changed == 1

    def reload(self, batch: _Batch) -> None:
        """Read back what another process recorded of ``batch`` (id, state, status, counts)."""
        fresh = self._load(batch.local_id)
        batch.batch_id, batch.state, batch.status = fresh.batch_id, fresh.state, fresh.status
        batch.counts, batch.failed = fresh.counts, fresh.failed

    def add_intent(
        self,
        batch: _Batch,
        provider: str,
        model_id: str,
        items: Iterable[tuple[str, str]],
        *,
        owner: str,
    ) -> None:
        """Record a batch about to be submitted, with its (key, request JSON) items, at once.

        Inside :meth:`planning` it joins that transaction; otherwise it is its own.
        """
        own_transaction = not self._db.in_transaction
        if own_transaction:
            self._db.execute("BEGIN")
        try:
            self._db.execute(
                "INSERT INTO batches (local_id, provider, model_id, endpoint, state, status, "
                "requests, created, updated, owner, lease) VALUES (?, ?, ?, ?, 'submitting', "
                "'submitting', ?, ?, ?, ?, ?)",
                (batch.local_id, provider, model_id, batch.endpoint, batch.requests,
                 batch.created, batch.created, owner, batch.created + _LEASE_S),
            )  # fmt: skip
            self._db.executemany(
                "INSERT INTO batch_items (local_id, key, request) VALUES (?, ?, ?)",
                ((batch.local_id, key, request) for key, request in items),
            )
        except BaseException:
            if own_transaction:
                self._db.execute("ROLLBACK")
            raise
        if own_transaction:
            self._db.execute("COMMIT")

    def save(self, batch: _Batch) -> None:
        """Write the batch's provider id, state, status and counts."""
        self._db.execute(
            "UPDATE batches SET batch_id = ?, state = ?, status = ?, counts = ?, failed = ?, "
            "updated = ? WHERE local_id = ?",
            (batch.batch_id, batch.state, batch.status, json.dumps(batch.counts), batch.failed,
             time.time(), batch.local_id),
        )  # fmt: skip

    def open_batches_of(self, keys: Iterable[str]) -> list[_Batch]:
        """The batches not yet collected that hold any of ``keys``."""
        ids: set[str] = set()
        key_list = list(dict.fromkeys(keys))
        for start in range(0, len(key_list), _CHUNK):
            chunk = key_list[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT DISTINCT b.local_id FROM batch_items i JOIN batches b "
                f"ON b.local_id = i.local_id WHERE i.key IN ({marks}) "
                f"AND b.state IN ('submitting', 'submitted', 'ended')",
                chunk,
            )
            ids.update(local_id for (local_id,) in rows)
        return [self._load(local_id) for local_id in sorted(ids)]

    def _load(self, local_id: str) -> _Batch:
        row = self._db.execute(
            "SELECT endpoint, requests, state, created, batch_id, status, counts, failed "
            "FROM batches WHERE local_id = ?",
            (local_id,),
        ).fetchone()
        endpoint, requests, state, created, batch_id, status, counts, failed = row
        return _Batch(
            local_id, endpoint, requests, state, created, batch_id, status,
            json.loads(counts), failed, resumed=True,
        )  # fmt: skip

    def items(self, local_id: str) -> dict[str, str]:
        """Cache key -> request JSON of every entry of a batch."""
        rows = self._db.execute(
            "SELECT key, request FROM batch_items WHERE local_id = ?", (local_id,)
        )
        return dict(rows.fetchall())

    def batch_ids(self, provider: str) -> set[str]:
        """Every provider batch id recorded for ``provider``."""
        rows = self._db.execute(
            "SELECT batch_id FROM batches WHERE provider = ? AND batch_id IS NOT NULL", (provider,)
        )
        return {batch_id for (batch_id,) in rows}


_Planned = tuple[str, ModelRequest, dict[str, Any]]  # key, request, batch line
T = TypeVar("T")


class BatchRunner:
    """Runs one engine's uncached requests through the provider's batch API.

    Parameters
    ----------
    provider, cache, settings, stats:
        The engine's.
    send_directly:
        The engine's normal path, for entries the batch did not answer.
    record:
        Counts an answer in the engine's stats (model versions, tokens).
    sleep:
        Waits between polls and submission attempts (tests pass a fast one).
    on_update:
        Called with every batch's record whenever one changes (the run writes
        ``batches.json``).
    """

    def __init__(
        self,
        provider: Provider,
        cache: ResponseCache | None,
        settings: EngineSettings,
        stats: EngineStats,
        *,
        send_directly: Callable[[Pairs], AsyncIterator[RequestResult]],
        record: Callable[[ModelResponse], None],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_update: Callable[[list[BatchRecord]], None] | None = None,
    ) -> None:
        if cache is None:
            raise UsageError("--batch needs the response cache: pending batches are kept there")
        self.api = require_batch_api(provider)
        self.provider, self.cache, self.settings, self.stats = provider, cache, settings, stats
        self._send_directly, self._record, self._sleep = send_directly, record, sleep
        self._on_update = on_update
        self._timeout = max(settings.timeout, _MIN_CONTROL_TIMEOUT_S)
        self.batches: list[_Batch] = []
        # Who holds the right to submit this runner's intents (see the module docstring).
        self.owner = new_holder()

    @property
    def limits(self) -> BatchLimits:
        own = self.api.limits
        return BatchLimits(
            min(own.max_requests, self.settings.batch_max_requests or own.max_requests),
            min(own.max_bytes, self.settings.batch_max_bytes or own.max_bytes),
        )

    async def run(self, todo: Pairs) -> AsyncIterator[RequestResult]:
        """Yield a result for every pair of ``todo``, through batches (see the module docstring)."""
        units: dict[str, list[ModelRequest]] = {}
        for request, key in todo:
            units.setdefault(key, []).append(request)
        store = BatchStore(self.cache.path)
        try:
            with running(self.owner):
                with store.planning():
                    self.batches = store.open_batches_of(units)
                    covered = {key for b in self.batches for key in store.items(b.local_id)}
                    fresh = {key: reqs[0] for key, reqs in units.items() if key not in covered}
                    self.batches += self._plan(store, fresh)
                self._update()
                for batch in self.batches:
                    if batch.state == "submitting":
                        await self._submit(store, batch)
                async for result in self._wait_and_collect(store, units):
                    yield result
        finally:
            store.close()

    # ------------------------------------------------------------------ submitting
    def _plan(self, store: BatchStore, fresh: dict[str, ModelRequest]) -> list[_Batch]:
        """Split the fresh requests into batches at the limits and record each as an intent."""
        by_endpoint: dict[str, list[tuple[str, ModelRequest]]] = {}
        for key, request in fresh.items():
            by_endpoint.setdefault(self.api.endpoint(request), []).append((key, request))
        limits, planned = self.limits, []
        for endpoint, entries in by_endpoint.items():
            chunk: list[_Planned] = []
            size = 0
            for key, request in entries:
                line = self.api.line(key, request)
                length = len(json.dumps(line, ensure_ascii=False).encode()) + 1
                full = len(chunk) >= limits.max_requests or size + length > limits.max_bytes
                if chunk and full:
                    planned.append(self._intent(store, endpoint, chunk))
                    chunk, size = [], 0
                chunk.append((key, request, line))
                size += length
            if chunk:
                planned.append(self._intent(store, endpoint, chunk))
        return planned

    def _intent(self, store: BatchStore, endpoint: str, chunk: list[_Planned]) -> _Batch:
        batch = _Batch(
            local_id=f"ba_{secrets.token_hex(8)}",
            endpoint=endpoint,
            requests=len(chunk),
            state="submitting",
            created=time.time(),
            lines=[line for _, _, line in chunk],
        )
        items = ((key, request.model_dump_json(exclude_defaults=True)) for key, request, _ in chunk)
        store.add_intent(batch, self.api.name, self.provider.model_id, items, owner=self.owner)
        return batch

    async def _submit(self, store: BatchStore, batch: _Batch) -> None:
        """Create the batch at the provider, unless an earlier attempt already did."""
        attempts = itertools.count()

        async def find_or_create() -> BatchState:
            # A process that recorded the intent, or an attempt that failed on the
            # way back, may have created the batch already.
            if not store.claim(batch.local_id, self.owner):  # renew the lease
                raise _TakenOver
            state = None
            if batch.resumed or next(attempts) > 0:
                state = await self._find(store, batch)
            if state is None:
                lines = batch.lines or self._lines_of(store, batch)
                state = await self.api.submit(
                    lines, endpoint=batch.endpoint, tag=batch.local_id, timeout=self._timeout
                )
            return state

        while True:
            if not await self._hold_or_wait(store, batch):
                return  # another process submitted it: its id is recorded
            try:
                state = await self._retrying(find_or_create, f"submitting batch {batch.local_id}")
            except _TakenOver:  # our lease ran out during retries: wait for the new holder
                continue
            break
        batch.lines = None
        batch.state = "submitted"
        self._apply(batch, state)
        store.save(batch)
        self._update()

    async def _hold_or_wait(self, store: BatchStore, batch: _Batch) -> bool:
        """True once this runner may submit ``batch``; False when another process did."""
        delay = self.settings.batch_poll
        while not store.claim(batch.local_id, self.owner):
            store.reload(batch)
            if batch.state != "submitting":
                logger.info("batch %s was submitted by another process", batch.local_id)
                self._update()
                return False
            logger.info("batch %s is being submitted by another process; waiting", batch.local_id)
            await self._sleep(delay)
            delay = min(delay * 2, max(self.settings.batch_poll_max, self.settings.batch_poll))
        return True

    async def _find(self, store: BatchStore, batch: _Batch) -> BatchState | None:
        known = store.batch_ids(self.api.name)
        found = await self.api.find(
            batch.local_id, size=batch.requests, since=batch.created - _CLOCK_SLACK_S,
            known=known, timeout=self._timeout,
        )  # fmt: skip
        if found is not None:
            logger.info("batch %s was created before the crash: %s", batch.local_id, found.batch_id)
        return found

    def _lines_of(self, store: BatchStore, batch: _Batch) -> list[dict[str, Any]]:
        items = store.items(batch.local_id)
        return [
            self.api.line(key, ModelRequest.model_validate_json(request))
            for key, request in items.items()
        ]

    # ------------------------------------------------------------------ polling
    async def _wait_and_collect(
        self, store: BatchStore, units: dict[str, list[ModelRequest]]
    ) -> AsyncIterator[RequestResult]:
        open_batches = [batch for batch in self.batches if batch.state != "collected"]
        delay = self.settings.batch_poll
        while open_batches:
            for batch in list(open_batches):
                if batch.state == "submitted":
                    await self._poll(store, batch)
                if batch.state != "ended":
                    continue
                retry: Pairs = []
                async for result in self._collect(store, batch, units, retry):
                    yield result
                open_batches.remove(batch)
                async for result in self._send_directly(retry):
                    yield result
            if open_batches:
                await self._sleep(delay)
                delay = min(delay * 2, max(self.settings.batch_poll_max, self.settings.batch_poll))

    async def _poll(self, store: BatchStore, batch: _Batch) -> None:
        assert batch.batch_id is not None
        try:
            state = await self.api.poll(batch.batch_id, timeout=self._timeout)
        except Exception as raw:
            error = self.provider.classify(raw)
            if _gone(error):
                state = self._lost(batch, error)
            elif isinstance(error, TransientProviderError):
                logger.info("polling batch %s failed (%s); polling later", batch.batch_id, error)
                return
            else:
                raise error from raw
        self._apply(batch, state)
        if state.ended:
            batch.state = "ended"
        store.save(batch)
        self._update()

    # ------------------------------------------------------------------ collecting
    async def _collect(
        self,
        store: BatchStore,
        batch: _Batch,
        units: dict[str, list[ModelRequest]],
        retry: Pairs,
    ) -> AsyncIterator[RequestResult]:
        """Cache and yield the batch's answers; put this run's unanswered requests in ``retry``."""
        from biasaudit.engine.types import RequestResult

        items = store.items(batch.local_id)
        assert batch.batch_id is not None
        state = BatchState(batch.batch_id, batch.status, ended=True, counts=batch.counts)
        answered: set[str] = set()
        failures: dict[str, str] = {}
        for entry in await self._entries(state):
            key = entry.custom_id
            if key not in items or key in answered:
                continue  # not one of ours (see the module docstring), or a repeat
            answered.add(key)
            failures.pop(key, None)
            response, why = self._read(entry, items[key])
            if response is None:
                failures[key] = why
                continue
            self.stats.batched += len(units.get(key, ()))
            for request in units.get(key, ()):
                self._record(response)
                yield RequestResult(request, key, response, attempts=1)
        for key in items.keys() - answered:
            failures[key] = "missing from the batch's results"
        for key, why in failures.items():
            logger.info("batch %s: %s: %s; sending it directly", batch.batch_id, key[:12], why)
            retry.extend((request, key) for request in units.get(key, ()))
        # The answers are durable before the batch is marked collected: a crash
        # between the two must leave the batch to be collected again, not lost.
        self.cache.commit()
        batch.state, batch.failed = "collected", len(failures)
        store.save(batch)
        self._update()

    async def _entries(self, state: BatchState) -> list[BatchEntry]:
        async def download() -> list[BatchEntry]:
            return [entry async for entry in self.api.results(state, timeout=self._timeout)]

        if state.status == _LOST:
            return []
        try:
            return await self._retrying(download, f"fetching the results of {state.batch_id}")
        except ProviderError as error:
            if not _gone(error):
                raise
            logger.warning("the results of batch %s are gone (%s)", state.batch_id, error)
            return []

    def _lost(self, batch: _Batch, error: ProviderError) -> BatchState:
        """A batch the provider no longer knows: its requests go the normal way."""
        logger.warning(
            "batch %s is gone (%s); sending its requests directly", batch.batch_id, error
        )
        assert batch.batch_id is not None
        return BatchState(batch.batch_id, _LOST, ended=True, counts=batch.counts)

    async def _retrying(self, call: Callable[[], Awaitable[T]], what: str) -> T:
        """``call()``, again after transient failures (capped exponential backoff)."""
        for attempt in itertools.count(1):
            try:
                return await call()
            except _TakenOver:
                raise
            except Exception as raw:
                error = self.provider.classify(raw)
                if not isinstance(error, TransientProviderError):
                    raise error from raw
                if attempt > self.settings.max_retries:
                    raise error from raw
                wait = min(self.settings.backoff_max, self.settings.backoff_initial * 2**attempt)
                logger.info("%s failed (%s); again in %.1fs", what, error, wait)
                await self._sleep(wait)
        raise AssertionError("unreachable")

    def _read(self, entry: BatchEntry, request_json: str) -> tuple[ModelResponse | None, str]:
        """The entry's answer (a refusal included), stored in the cache, or why there is none."""
        if entry.failure is not None:
            return None, f"{entry.failure}: {entry.error}"
        request = ModelRequest.model_validate_json(request_json)
        try:
            response = self.api.parse(entry, request)
        except (ProviderError, KeyError, TypeError, ValueError) as error:
            return None, f"unreadable answer: {error}"
        if self.api.on_answer is not None:
            self.api.on_answer(request, response)
        self.cache.put(entry.custom_id, response, model_id=self.provider.model_id)
        return response, ""

    # ------------------------------------------------------------------ reporting
    def _apply(self, batch: _Batch, state: BatchState) -> None:
        batch.batch_id, batch.status, batch.counts = state.batch_id, state.status, state.counts

    def _update(self) -> None:
        self.stats.batch_status = describe_batches(self.batches)
        if self._on_update is not None:
            self._on_update(self.records())

    def records(self) -> list[BatchRecord]:
        """Every batch of this run, as ``batches.json`` lists it."""
        return [
            BatchRecord(
                local_id=batch.local_id,
                provider=self.api.name,
                model=self.provider.model_id,
                endpoint=batch.endpoint,
                batch_id=batch.batch_id,
                state=batch.state,
                status=batch.status,
                requests=batch.requests,
                counts=batch.counts,
                failed_entries=batch.failed,
                resumed=batch.resumed,
                created_at=datetime.fromtimestamp(batch.created, UTC),
            )
            for batch in self.batches
        ]


def _gone(error: ProviderError) -> bool:
    """The provider answered 404: the batch, or its results file, no longer exists."""
    return error.status == 404


def describe_batches(batches: list[_Batch]) -> str:
    """One line for the progress display: each open batch's status and counts."""
    if not batches:
        return ""
    collected = sum(batch.state == "collected" for batch in batches)
    parts = []
    for batch in batches:
        if batch.state == "collected":
            continue
        counts = batch.counts
        finished = counts.get("total", 0) - counts.get("processing", 0)
        done = f" {finished}/{batch.requests}" if counts else ""
        parts.append(f"{batch.batch_id or batch.local_id} {batch.status}{done}")
    shown = ", ".join(parts[:3]) + (f", +{len(parts) - 3} more" if len(parts) > 3 else "")
    return f"batches {collected}/{len(batches)} collected" + (f": {shown}" if shown else "")
