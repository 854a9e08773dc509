"""The strategies that share out or wrap sending from this process
(:class:`~biasaudit.engine.sending.InProcess`), each a
:class:`~biasaudit.engine.types.FanOut`:

- :class:`WorkerProcesses`: one share sent from here, the others from child
  processes (:mod:`biasaudit.engine.worker_pool`), past what one core can build;
- :class:`Batched`: through the provider's batch API (:mod:`biasaudit.engine.batch`);
- :class:`Leased`: under leases in a cache other processes share, around either of
  the first two, so that no two processes send one request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from biasaudit.engine import worker_pool
from biasaudit.engine.batch import BatchRunner
from biasaudit.engine.sending import LOST, Fence, InProcess, SendContext, _Lost
from biasaudit.engine.types import FanOut, Pairs, RequestResult
from biasaudit.errors import (
    BiasauditError,
    FatalProviderError,
    ProviderError,
    RunAbortedError,
    StorageFailedError,
    StorageUnusableError,
)
from biasaudit.processes import new_holder, running
from biasaudit.providers import ModelRequest, ModelResponse
from biasaudit.store.runs import BatchRecord

__all__ = ["Batched", "Leased", "WorkerProcesses"]

logger = logging.getLogger(__name__)

# How often a run waiting on another process's requests looks at the cache again.
_LEASE_POLL_S = 0.25
_LEASE_POLL_MAX_S = 5.0


@dataclass
class WorkerProcesses:
    """Send one share of the requests from here and the others from ``workers - 1``
    child processes, each with its share of the concurrency and the pace.

    The children (:mod:`biasaudit.engine.worker_pool`) may have been started before
    the run, so that their imports overlapped the parent's start-up. A child that dies
    (killed, out of memory) costs nothing but time: this process sends what it had
    not answered.
    """

    context: SendContext
    workers: int
    fence: Fence | None = None

    async def send(self, todo: Pairs) -> AsyncIterator[RequestResult]:
        context, workers = self.context, self.workers
        shards = [todo[i::workers] for i in range(workers)]
        share = context.settings.for_worker(workers)
        assert context.provider.spec is not None
        children = worker_pool.take(
            worker_pool.worker_provider_spec(context.provider.spec, share.concurrency),
            workers - 1,
        )
        header = {
            "settings": asdict(share),
            "cache": str(context.cache.path) if context.cache is not None else None,
        }
        lines: asyncio.Queue[tuple[int, Any] | BaseException] = asyncio.Queue()
        feeders = [
            asyncio.create_task(child.talk(slot, header, _request_lines(shards[slot]), lines))
            for slot, child in enumerate(children, start=1)
        ]
        context.limit_elsewhere = sum(min(share.concurrency, len(s)) for s in shards[1:])
        here = [asyncio.create_task(self._pump(shards[0], share, lines))]
        latest: list[dict[str, int]] = [{} for _ in shards]
        answered: list[set[int]] = [set() for _ in shards]
        try:
            results = 0
            while results < len(todo):
                item = await lines.get()
                if isinstance(item, BaseException):
                    raise item
                slot, line = item
                if isinstance(line, worker_pool.ChildExited):
                    rest = [p for i, p in enumerate(shards[slot]) if i not in answered[slot]]
                    logger.warning(
                        "%s; sending its %d unanswered requests from here", line, len(rest)
                    )
                    self._merge_stats(latest, slot, {**latest[slot], "in_flight": 0, "limit": 0})
                    here.append(asyncio.create_task(self._pump(rest, share, lines)))
                    continue
                results += 1
                if isinstance(line, RequestResult):
                    yield line  # sent from this process: already recorded and cached
                    continue
                if "fatal" in line:
                    error = _rebuild_error(line["fatal"])
                    raise RunAbortedError(error) if isinstance(error, ProviderError) else error
                answered[slot].add(line["i"])
                self._merge_stats(latest, slot, line["stats"])
                request, key = shards[slot][line["i"]]
                result = _decode_result(request, key, line["result"])
                if result.response is not None:
                    context.record(result.response)
                yield result
            # Every answer is in: let the workers close their connections and exit.
            await asyncio.wait_for(asyncio.gather(*feeders, return_exceptions=True), timeout=10)
        finally:
            for task in here:
                task.cancel()
            await asyncio.gather(*here, return_exceptions=True)
            await asyncio.gather(*(child.stop() for child in children), return_exceptions=True)
            for feeder in feeders:
                feeder.cancel()
            await asyncio.gather(*feeders, return_exceptions=True)
            context.limit_elsewhere, context.limit_here = 0, None

    async def _pump(
        self, todo: Pairs, share: Any, lines: asyncio.Queue[tuple[int, Any] | BaseException]
    ) -> None:
        """Send ``todo`` from this process (slot 0), passing the results, or what stopped
        them, to ``lines``."""
        try:
            async for result in InProcess(self.context, share, self.fence).send(todo):
                lines.put_nowait((0, result))
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            lines.put_nowait(error)

    def _merge_stats(
        self, latest: list[dict[str, int]], slot: int, snapshot: dict[str, int]
    ) -> None:
        """Add what a child's latest counters add to the last ones it reported."""
        context, before = self.context, latest[slot]
        stats = context.stats
        latest[slot] = snapshot
        for name in ("sent", "retries", "rate_limited", "in_flight"):
            change = snapshot.get(name, 0) - before.get(name, 0)
            setattr(stats, name, getattr(stats, name) + change)
        context.limit_elsewhere = sum(s.get("limit", 0) for s in latest[1:])
        if context.limit_here is not None:
            context.show_limit(context.limit_here)


@dataclass
class Batched:
    """Send through the provider's batch API (see :mod:`biasaudit.engine.batch`); what a
    batch does not answer goes through ``directly`` (the engine's strategy without
    batches)."""

    context: SendContext
    directly: Callable[[Pairs], AsyncIterator[RequestResult]]
    on_update: Callable[[list[BatchRecord]], None] | None = None

    async def send(self, todo: Pairs) -> AsyncIterator[RequestResult]:
        if not todo:
            return
        context = self.context
        runner = BatchRunner(
            context.provider,
            context.cache,
            context.settings,
            context.stats,
            send_directly=self.directly,
            record=context.record,
            sleep=context.sleep,
            on_update=self.on_update,
        )
        try:
            async for result in runner.run(todo):
                yield result
        except RunAbortedError:
            raise
        except ProviderError as error:
            raise RunAbortedError(error) from error


@dataclass
class _Lease:
    """This run's leases while it sends under them: its holder, how long a lease lasts
    unrenewed, until when they are surely its own (renewed in time), and the requests
    another process took over."""

    holder: str
    seconds: float
    until: float
    lost: list[str] = field(default_factory=list)


@dataclass
class Leased:
    """Send under leases in the cache, so no other process sends the same request.

    One write transaction claims every request (:meth:`ResponseCache.claim`): what
    another process answered since this run planned is served from the cache; what
    another live process has in flight is waited for, polling the cache, and sent
    from here only if that process dies or gives it up unanswered; the rest is sent
    through ``inner(count, fence)`` (the engine's strategy for that many requests).
    The leases are renewed while the run lasts and released when it ends.

    A process frozen past its leases (Ctrl-Z, SIGSTOP, a laptop lid) claims each
    request again before sending it (:meth:`fenced`).
    """

    context: SendContext
    inner: Callable[[int, Fence], FanOut]
    seconds: float
    _lease: _Lease | None = field(default=None, init=False)

    async def send(self, todo: Pairs) -> AsyncIterator[RequestResult]:
        cache = self.context.cache
        assert cache is not None
        units = {key: unit for unit, key in todo}
        holder = new_holder()
        with running(holder):
            seconds = self.seconds
            lease = self._lease = _Lease(holder, seconds, time.time() + seconds)
            renewing = asyncio.create_task(self._renew(lease))
            try:
                waiting = list(units)  # in the run's order, as every list below
                delay = _LEASE_POLL_S
                while waiting:
                    claim = cache.claim(waiting, holder, lease_s=seconds)
                    lease.until = time.time() + seconds
                    answered = [(units[k], k) for k in waiting if k in claim.answered]
                    for result in self.context.served(answered):
                        yield result
                    taken = [(units[k], k) for k in claim.taken]
                    async for result in self.inner(len(taken), self.fenced).send(taken):
                        yield result
                    lost = set(lease.lost)
                    lease.lost.clear()
                    waiting = [k for k in waiting if k in claim.held or k in lost]
                    self.context.stats.waiting = len(waiting)
                    if waiting:
                        await asyncio.sleep(delay)
                        delay = min(delay * 2, _LEASE_POLL_MAX_S)
            finally:
                self._lease = None
                self.context.stats.waiting = 0
                renewing.cancel()
                await asyncio.gather(renewing, return_exceptions=True)
                try:
                    cache.release(holder)
                except BiasauditError as error:  # they lapse with this process anyway
                    logger.warning("could not release this run's leases: %s", error)

    async def _renew(self, lease: _Lease) -> None:
        assert self.context.cache is not None
        while True:
            await asyncio.sleep(lease.seconds / 4)
            started = time.time()
            try:
                self.context.cache.renew(lease.holder, lease_s=lease.seconds)
                if started < lease.until:
                    # renewed in time: no other process could have taken a lease meanwhile
                    lease.until = started + lease.seconds
            except BiasauditError as error:
                logger.warning("could not renew this run's leases: %s", error)

    def fenced(self, request: ModelRequest, key: str) -> RequestResult | _Lost | None:
        """Before sending under a lease that may have run out (the process was frozen
        past the lease): claim the request again. Another process that took it over
        answered it (served from the cache) or still holds it (given back, waited for);
        None: it is this run's to send."""
        lease = self._lease
        if lease is None or time.time() < lease.until - lease.seconds / 4:
            return None  # renewed in time: nobody else can hold it
        assert self.context.cache is not None
        claim = self.context.cache.claim([key], lease.holder, lease_s=lease.seconds)
        if key in claim.answered:
            return next(self.context.served([(request, key)]))
        if key in claim.held:
            lease.lost.append(key)
            return LOST
        return None


def _request_lines(shard: Pairs) -> list[bytes]:
    return [(r.model_dump_json(exclude_defaults=True) + "\n").encode() for r, _ in shard]


def _decode_result(request: ModelRequest, key: str, data: dict[str, Any]) -> RequestResult:
    response = data.get("response")
    return RequestResult(
        request,
        key,
        response=ModelResponse.model_validate(response) if response is not None else None,
        error=data.get("error"),
        error_type=data.get("error_type"),
        attempts=data.get("attempts", 0),
        latency_s=data.get("latency_s"),
        waited_s=data.get("waited_s"),
    )


def _rebuild_error(fatal: dict[str, str]) -> BiasauditError:
    """The worker's fatal error, as the same :mod:`biasaudit.errors` class.

    A provider error (it stops the run) or a storage failure; anything else is
    rebuilt as a fatal provider error.
    """
    from biasaudit import errors

    cls = getattr(errors, fatal.get("type", ""), None)
    message = fatal.get("message", "a fan-out worker stopped")
    if isinstance(cls, type) and issubclass(cls, StorageFailedError | StorageUnusableError):
        return cls(message)
    if not (isinstance(cls, type) and issubclass(cls, ProviderError)):
        cls = FatalProviderError
    return cls(message)
