"""The async engine: fan requests out to one provider, with cache, limits and retries.

It takes :class:`~biasaudit.providers.ModelRequest` objects and yields
:class:`RequestResult` objects as they complete. It knows nothing of tasks,
probes or metrics.

- **Cache first.** Every request's key is looked up before anything is sent; a
  hit costs no request. Each answer is committed to the cache the moment it
  arrives, so an interrupted run loses nothing it paid for. Identical requests
  are sent once.
- **A strategy sends the rest** (:class:`~biasaudit.engine.types.FanOut`; the engine
  picks one in :meth:`Engine.fan_out`, as httpx picks a transport): from this process
  (:class:`~biasaudit.engine.sending.InProcess`: the adaptive concurrency limit,
  ``rpm`` and ``tpm``, tenacity's retries), shared with worker processes
  (:class:`~biasaudit.engine.strategies.WorkerProcesses`), through the provider's
  batch API (:class:`~biasaudit.engine.strategies.Batched`; entries the batch does
  not answer come back through the others), and under leases where other processes
  may send for the same cache (:class:`~biasaudit.engine.strategies.Leased`).
- **Fatal errors** (bad key, exhausted quota, no logprobs, nothing reachable)
  stop the run: nothing new is sent, the answers in flight are kept, and
  :class:`RunAbortedError` is raised after every result that did arrive has been
  yielded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace

from biasaudit.engine.batch import require_batch_api
from biasaudit.engine.sending import Fence, InProcess, SendContext
from biasaudit.engine.strategies import Batched, Leased, WorkerProcesses
from biasaudit.engine.types import EngineSettings, EngineStats, FanOut, Pairs, RequestResult
from biasaudit.errors import ReplayMissError, UsageError
from biasaudit.providers import ModelRequest, Provider, Usage
from biasaudit.store.cache import ResponseCache
from biasaudit.store.runs import BatchRecord
from biasaudit.textfiles import env_number

__all__ = ["Engine", "EngineSettings", "EngineStats", "RequestResult"]

logger = logging.getLogger(__name__)

# Starting a worker costs about half a second of imports; below this many
# requests per worker, one process finishes sooner.
MIN_REQUESTS_PER_WORKER = 200
# Leases on requests in flight (see strategies.Leased): how long one lasts unrenewed
# (what a holder on another host that died blocks others for).
LEASE_ENV = "BIASAUDIT_LEASE_SECONDS"
_LEASE_S = 120.0


class Engine:
    """Runs requests against one provider; see the module docstring.

    Parameters
    ----------
    provider:
        Where requests go.
    cache:
        Where answers are looked up and stored; ``None`` disables caching.
    settings:
        Limits, retries and cache behaviour.
    sleep:
        The coroutine used to wait between attempts (tests pass a fast one).
    """

    def __init__(
        self,
        provider: Provider,
        cache: ResponseCache | None,
        settings: EngineSettings | None = None,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.provider, self.cache = provider, cache
        self.settings = settings or EngineSettings()
        # What every strategy sends with and adds to (the counters among it).
        self.context = SendContext(provider, cache, self.settings, sleep)
        # How long a lease lasts unrenewed (read, and refused if malformed, up front).
        self._lease_s = env_number(LEASE_ENV, _LEASE_S, above=0.0)
        # Called with the records of the run's provider batches whenever one changes.
        self.on_batch_update: Callable[[list[BatchRecord]], None] | None = None

    @property
    def stats(self) -> EngineStats:
        """What the run counted so far."""
        return self.context.stats

    def key(self, request: ModelRequest) -> str:
        p = self.provider
        return request.cache_key(provider=p.name, model=p.model, base_url=p.cache_scope)

    def check_replay(self, requests: Sequence[ModelRequest]) -> None:
        """Before a replay starts: every answer it needs is in the cache.

        Raises
        ------
        ReplayMissError
            Some are not (how many, which, and the cache's path).
        """
        keyed = [(unit, self.key(unit)) for unit in self.calls(requests)]
        self._check_cached(keyed, self._cached_keys([key for _, key in keyed]))

    def check_rate(self, requests: Sequence[ModelRequest]) -> None:
        """Before a run starts: at ``--rpm``, what is not cached can be sent within a day.

        Raises
        ------
        UsageError
            A rate so low that the run would take more than :data:`MOST_MINUTES`.
        """
        rpm = self.settings.rpm
        if not rpm or not requests:
            return
        keys = [self.key(unit) for unit in self.calls(requests)]
        to_send = len(set(keys) - self._cached_keys(keys))  # identical ones are sent once
        minutes = to_send / rpm
        if minutes > MOST_MINUTES:
            raise UsageError(
                f"--rpm {rpm:g}: the {to_send:,} requests to send would take "
                f"{_long_duration(minutes)}, more than a day: give the provider's real limit "
                "(requests per minute), or send fewer requests"
            )

    async def run(self, requests: Sequence[ModelRequest]) -> AsyncIterator[RequestResult]:
        """Yield one :class:`RequestResult` per request, cached ones first.

        Raises
        ------
        ReplayMissError
            In replay mode, before yielding anything, if any answer is not cached.
        RunAbortedError
            After the results that arrived, when a fatal provider error stopped the run.
        """
        self.context.stats = EngineStats(total=len(requests))
        for request in requests:
            self.provider.check(request)
        if self.settings.batch and not self.settings.replay:
            require_batch_api(self.provider)  # a usage error before anything is sent
        units = self.calls(requests)
        keyed = [(unit, self.key(unit)) for unit in units]
        in_cache = self._cached_keys([key for _, key in keyed])
        if self.settings.replay:
            self._check_cached(keyed, in_cache)
        merger = _SampleMerger(requests, self.key)
        hits = [(unit, key) for unit, key in keyed if key in in_cache]
        for result in self.context.served(hits):
            for merged in merger.add(result):
                self._finish(merged)
                yield merged
        if self.cache is not None:
            self.cache.flush_hits()
        todo = [(unit, key) for unit, key in keyed if key not in in_cache]
        async for result in self._send_once(todo):
            # Committed before anyone reads it: a run never records an answer the cache lacks.
            self._commit()
            for merged in merger.add(result):
                self._finish(merged)
                yield merged

    def fan_out(self, count: int, *, fence: Fence | None = None, batch: bool = True) -> FanOut:
        """The strategy that sends ``count`` requests: the provider's batch API where the
        settings ask for it (and ``batch``), else worker processes where the settings
        ask for them and each has at least :data:`MIN_REQUESTS_PER_WORKER`, else this
        process. ``fence`` is asked before each request is sent (under leases)."""
        if self.settings.batch and batch:
            return Batched(self.context, self._directly, self.on_batch_update)
        workers = min(self.settings.workers, count // MIN_REQUESTS_PER_WORKER)
        if workers > 1 and self.provider.spec is not None:
            return WorkerProcesses(self.context, workers, fence)
        return InProcess(self.context, self.settings, fence)

    def _fenced_fan_out(self, count: int, fence: Fence) -> FanOut:
        return self.fan_out(count, fence=fence)

    def _directly(self, todo: Pairs) -> AsyncIterator[RequestResult]:
        """``todo`` sent without the batch API (what a batch did not answer)."""
        return self.fan_out(len(todo), batch=False).send(todo)

    def _commit(self) -> None:
        if self.cache is not None and self.cache.uncommitted:
            self.cache.commit()  # StorageFailedError stops the run here

    async def _send_once(self, todo: Pairs) -> AsyncIterator[RequestResult]:
        """Send each distinct request of ``todo`` once; identical ones share its answer.

        Two inputs with the same content (the same cache key) are one question:
        the second is answered with the first's result, as if from the cache.
        """
        first: dict[str, ModelRequest] = {}
        repeats: dict[str, list[ModelRequest]] = {}
        for unit, key in todo:
            if key in first:
                repeats.setdefault(key, []).append(unit)
            else:
                first[key] = unit
        unique = [(unit, key) for key, unit in first.items()]
        strategy: FanOut
        if self._leasing:  # other processes may send for this cache: claim first
            strategy = Leased(self.context, self._fenced_fan_out, self._lease_s)
        else:
            strategy = self.fan_out(len(unique))
        async for result in strategy.send(unique):
            yield result
            for unit in repeats.get(result.key, ()):
                if result.response is not None:  # an answer, counted as a cached one is
                    self.stats.count_response(result.response)
                yield replace(result, request=unit, cached=result.response is not None, attempts=0)

    @property
    def _leasing(self) -> bool:
        """Whether other processes may be sending for this cache now: claim before sending."""
        settings, cache = self.settings, self.cache
        return (
            cache is not None
            and not cache.readonly
            and settings.read_cache
            and not settings.replay
            and not settings.batch
        )

    def calls(self, requests: Sequence[ModelRequest]) -> list[ModelRequest]:
        """The calls the engine makes for ``requests`` (each is one cache entry).

        Endpoints without ``n`` get one call per choice, each cached on its own;
        cost estimates count these, not the requests.
        """
        if self.provider.capabilities.n:
            return list(requests)
        units: list[ModelRequest] = []
        for request in requests:
            n = request.params.n or 1
            if n == 1:
                units.append(request)
                continue
            single = request.params.model_copy(update={"n": None})
            units.extend(
                request.model_copy(update={"params": single, "sample": i}) for i in range(n)
            )
        return units

    def _check_cached(self, keyed: Pairs, in_cache: set[str]) -> None:
        """Raise :class:`ReplayMissError` where an answer of ``keyed`` is not in the cache.
        The calls are compared, not the keys: identical calls share one key."""
        missing = [unit.id for unit, key in keyed if key not in in_cache]
        if missing:
            path = str(self.cache.path) if self.cache is not None else "(no cache)"
            raise ReplayMissError(len(missing), len(keyed), path, missing)

    def _cached_keys(self, keys: list[str]) -> set[str]:
        if self.cache is None or not self.settings.read_cache:
            return set()
        return self.cache.keys_present(keys)

    def _finish(self, result: RequestResult) -> None:
        stats = self.stats
        stats.done += 1
        if result.cached:
            stats.cache_hits += 1
        elif result.error is not None:
            stats.failures += 1
        if result.response is not None and result.response.refusal is not None:
            stats.refusals += 1


class _SampleMerger:
    """Re-assembles requests that the engine split into one call per choice."""

    def __init__(
        self, requests: Sequence[ModelRequest], key: Callable[[ModelRequest], str]
    ) -> None:
        self._parents = {(r.id, r.replicate): r for r in requests}
        self._key = key
        self._parts: dict[tuple[str, int], list[RequestResult]] = {}

    def add(self, result: RequestResult) -> list[RequestResult]:
        request = result.request
        if request.sample is None:
            return [result]
        parent_id = (request.id, request.replicate)
        parts = self._parts.setdefault(parent_id, [])
        parts.append(result)
        parent = self._parents[parent_id]
        if len(parts) < (parent.params.n or 1):
            return []
        del self._parts[parent_id]
        parts.sort(key=lambda part: part.request.sample or 0)
        return [_merge(parent, self._key(parent), parts)]


def _merge(parent: ModelRequest, key: str, parts: list[RequestResult]) -> RequestResult:
    merged = RequestResult(parent, key, cached=all(p.cached for p in parts))
    merged.attempts = sum(p.attempts for p in parts)
    errors = [p for p in parts if p.error is not None]
    if errors:
        merged.error = f"{len(errors)} of {len(parts)} samples failed: {errors[0].error}"
        merged.error_type = errors[0].error_type
        return merged
    responses = [p.response for p in parts if p.response is not None]
    first = responses[0]
    refusals = [r.refusal for r in responses if r.refusal]
    merged.response = first.model_copy(
        update={
            "texts": tuple(t for r in responses for t in r.texts),
            "finish_reasons": tuple(f for r in responses for f in r.finish_reasons),
            "usage": Usage(
                input_tokens=sum(r.usage.input_tokens for r in responses),
                output_tokens=sum(r.usage.output_tokens for r in responses),
            ),
            "refusal": refusals[0] if refusals else None,
        }
    )
    latencies = [p.latency_s for p in parts if p.latency_s is not None]
    merged.latency_s = max(latencies) if latencies else None
    waits = [p.waited_s for p in parts if p.waited_s is not None]
    merged.waited_s = max(waits) if waits else None
    return merged


# The longest a run may be planned to take at --rpm: beyond a day, the rate is a typo.
MOST_MINUTES = 24 * 60


def _long_duration(minutes: float) -> str:
    """``3.5 days``, ``1.2e+06 years``: a long time, in the larger unit that reads."""
    days = minutes / MOST_MINUTES
    return f"{days:.3g} days" if days < 365 else f"{days / 365:.3g} years"
