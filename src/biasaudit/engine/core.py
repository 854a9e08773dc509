"""The async engine: fan requests out to one provider, with cache, limits and retries.

It takes :class:`~biasaudit.providers.ModelRequest` objects and yields
:class:`RequestResult` objects as they complete. It knows nothing of tasks,
probes or metrics.

- **Cache first.** Every request's key is looked up before anything is sent; a
  hit costs no request. Each answer is committed to the cache the moment it
  arrives, so an interrupted run loses nothing it paid for.
- **Concurrency** is a per-endpoint ceiling that adapts: each rate-limit answer
  halves the number of requests in flight (at most once per second, since one
  burst of 429s is one signal), and each run of successes as long as the
  current limit adds one back, up to the ceiling.
- **Request rate** (``rpm``) is capped with :mod:`asyncio_throttle`, and **tokens per
  minute** (``tpm``, estimated before sending) by a token bucket (:class:`_TokenRate`).
- **Retries** belong to the engine alone (SDK clients are built with
  ``max_retries=0``): tenacity retries transient failures with capped
  exponential backoff and full jitter, waits as long as ``Retry-After`` /
  ``retry-after-ms`` asks, and never retries a request the endpoint rejected.
- **Batches** (``batch=True``): the uncached requests go through the
  provider's batch API instead (:mod:`biasaudit.engine.batch`); entries the batch
  does not answer come back through the path above.
- **Fatal errors** (bad key, exhausted quota, no logprobs, nothing reachable)
  stop the run: in-flight requests are cancelled and :class:`RunAbortedError`
  is raised after every result that did arrive has been yielded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from asyncio_throttle import Throttler  # type: ignore[attr-defined]
from tenacity import AsyncRetrying, RetryCallState, stop_after_attempt, wait_random_exponential

from biasaudit.engine import worker_pool
from biasaudit.engine.batch import BatchRunner, require_batch_api
from biasaudit.engine.types import EngineSettings, EngineStats, RequestResult
from biasaudit.errors import (
    BiasauditError,
    EndpointUnreachableError,
    FatalProviderError,
    MalformedResponseError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitedError,
    ReplayMissError,
    RequestRejectedError,
    RunAbortedError,
    StorageFailedError,
    StorageUnusableError,
    TransientProviderError,
    UsageError,
    WaitTooLongError,
)
from biasaudit.processes import new_holder, running
from biasaudit.providers import ModelRequest, ModelResponse, Provider, Usage
from biasaudit.providers._types import estimate_tokens
from biasaudit.secrets import redact
from biasaudit.store.cache import ResponseCache
from biasaudit.store.runs import BatchRecord
from biasaudit.textfiles import env_number

__all__ = ["Engine", "EngineSettings", "EngineStats", "RequestResult"]

logger = logging.getLogger(__name__)

# Starting a worker costs about half a second of imports; below this many
# requests per worker, one process finishes sooner.
MIN_REQUESTS_PER_WORKER = 200
_CACHE_CHUNK = 2_000
# Before any request has succeeded, a refused connection means a wrong URL or a
# server that is down: stop after this many attempts rather than back off for minutes.
_UNREACHABLE_ATTEMPTS = 2
# Leases on requests in flight (see Engine._fan_out_leased): how long one lasts
# unrenewed (what a holder on another host that died blocks others for), and how
# often a run waiting on another process's requests looks at the cache again.
LEASE_ENV = "BIASAUDIT_LEASE_SECONDS"
_LEASE_S = 120.0
_LEASE_POLL_S = 0.25
_LEASE_POLL_MAX_S = 5.0


@dataclass
class _Lease:
    """This run's leases while it sends under them: its holder, how long a lease lasts
    unrenewed, until when they are surely its own (renewed in time), and the requests
    another process took over."""

    holder: str
    seconds: float
    until: float
    lost: list[str] = field(default_factory=list)


class _Lost:
    """A request another process took over while this one was frozen."""


_LOST = _Lost()


class _AdaptiveLimit:
    """A concurrency ceiling that halves on rate limits and creeps back up.

    Workers are numbered; worker *i* runs only while *i* < ``limit``, so the
    limit costs nothing on the hot path.
    """

    def __init__(self, ceiling: int) -> None:
        self.ceiling = self.limit = ceiling
        self._streak = 0
        self._last_cut = float("-inf")
        self._changed = asyncio.Condition()

    async def wait_turn(self, worker: int) -> None:
        if worker < self.limit:
            return
        async with self._changed:
            await self._changed.wait_for(lambda: worker < self.limit)

    def rate_limited(self) -> None:
        now = time.monotonic()
        self._streak = 0
        if now - self._last_cut >= 1.0 and self.limit > 1:
            self.limit = max(1, self.limit // 2)
            self._last_cut = now

    def succeeded(self) -> None:
        if self.limit >= self.ceiling:
            return
        self._streak += 1
        if self._streak >= self.limit:
            self._streak = 0
            self.limit += 1
            asyncio.get_running_loop().create_task(self._wake())

    async def _wake(self) -> None:
        async with self._changed:
            self._changed.notify_all()


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
        self.stats = EngineStats()
        self._sleep = sleep
        self._successes = 0
        # With worker processes: the children's concurrency limits, and this process's.
        self._limit_elsewhere = 0
        self._limit_here: _AdaptiveLimit | None = None
        # This run's leases while it sends under them (see _fan_out_leased and _fenced),
        # and how long one lasts unrenewed (read, and refused if malformed, up front).
        self._lease: _Lease | None = None
        self._lease_s = env_number(LEASE_ENV, _LEASE_S, above=0.0)
        # Called with the records of the run's provider batches whenever one changes.
        self.on_batch_update: Callable[[list[BatchRecord]], None] | None = None

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
        in_cache = self._cached_keys([key for _, key in keyed])
        if len(in_cache) < len(keyed):
            missing = [unit.id for unit, key in keyed if key not in in_cache]
            path = str(self.cache.path) if self.cache is not None else "(no cache)"
            raise ReplayMissError(len(missing), len(keyed), path, missing)

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
        to_send = len(keys) - len(self._cached_keys(keys))
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
        self.stats = EngineStats(total=len(requests))
        for request in requests:
            self.provider.check(request)
        if self.settings.batch and not self.settings.replay:
            require_batch_api(self.provider)  # a usage error before anything is sent
        units = self.calls(requests)
        keyed = [(unit, self.key(unit)) for unit in units]
        in_cache = self._cached_keys([key for _, key in keyed])
        if self.settings.replay and len(in_cache) < len(keyed):
            missing = [unit.id for unit, key in keyed if key not in in_cache]
            path = str(self.cache.path) if self.cache is not None else "(no cache)"
            raise ReplayMissError(len(missing), len(keyed), path, missing)
        merger = _SampleMerger(requests, self.key)
        hits = [(unit, key) for unit, key in keyed if key in in_cache]
        for result in self._served(hits):
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

    def _served(self, pairs: list[tuple[ModelRequest, str]]) -> Iterator[RequestResult]:
        """The cached answers of ``pairs``, read a chunk at a time.

        A 100,000-response replay never holds every response in memory at once.
        """
        for start in range(0, len(pairs), _CACHE_CHUNK):
            chunk = pairs[start : start + _CACHE_CHUNK]
            assert self.cache is not None
            found = self.cache.get_many(key for _, key in chunk)
            for unit, key in chunk:
                self.stats.count_response(found[key])
                yield RequestResult(unit, key, found[key], cached=True)

    def _commit(self) -> None:
        if self.cache is not None and self.cache.uncommitted:
            self.cache.commit()  # StorageFailedError stops the run here

    async def _send_once(
        self, todo: list[tuple[ModelRequest, str]]
    ) -> AsyncIterator[RequestResult]:
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
        sent = self._fan_out_leased(unique) if self._leasing else self._fan_out(unique)
        async for result in sent:
            yield result
            for unit in repeats.get(result.key, ()):
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

    async def _fan_out_leased(
        self, todo: list[tuple[ModelRequest, str]]
    ) -> AsyncIterator[RequestResult]:
        """Send ``todo`` under leases in the cache, so no other process sends it too.

        One write transaction claims every request (:meth:`ResponseCache.claim`):
        what another process answered since this run planned is served from the
        cache; what another live process has in flight is waited for, polling
        the cache, and sent from here only if that process dies or gives it up
        unanswered; the rest is sent. The leases are renewed while the run lasts
        and released when it ends.
        """
        cache = self.cache
        assert cache is not None
        units = {key: unit for unit, key in todo}
        holder = new_holder()
        with running(holder):
            seconds = self._lease_s
            self._lease = _Lease(holder, seconds, time.time() + seconds)
            renewing = asyncio.create_task(self._renew_leases(holder, seconds))
            try:
                waiting = list(units)  # in the run's order, as every list below
                delay = _LEASE_POLL_S
                while waiting:
                    claim = cache.claim(waiting, holder, lease_s=seconds)
                    self._lease.until = time.time() + seconds
                    answered = [(units[k], k) for k in waiting if k in claim.answered]
                    for result in self._served(answered):
                        yield result
                    async for result in self._fan_out([(units[k], k) for k in claim.taken]):
                        yield result
                    lost = set(self._lease.lost)
                    self._lease.lost.clear()
                    waiting = [k for k in waiting if k in claim.held or k in lost]
                    self.stats.waiting = len(waiting)
                    if waiting:
                        await asyncio.sleep(delay)
                        delay = min(delay * 2, _LEASE_POLL_MAX_S)
            finally:
                self._lease = None
                self.stats.waiting = 0
                renewing.cancel()
                await asyncio.gather(renewing, return_exceptions=True)
                try:
                    cache.release(holder)
                except BiasauditError as error:  # they lapse with this process anyway
                    logger.warning("could not release this run's leases: %s", error)

    async def _renew_leases(self, holder: str, seconds: float) -> None:
        assert self.cache is not None
        while True:
            await asyncio.sleep(seconds / 4)
            started = time.time()
            try:
                self.cache.renew(holder, lease_s=seconds)
                if self._lease is not None and started < self._lease.until:
                    # renewed in time: no other process could have taken a lease meanwhile
                    self._lease.until = started + seconds
            except BiasauditError as error:
                logger.warning("could not renew this run's leases: %s", error)

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

    async def _fan_out(
        self, todo: list[tuple[ModelRequest, str]], *, direct: bool = False
    ) -> AsyncIterator[RequestResult]:
        if not todo:
            return
        if self.settings.batch and not direct:
            async for result in self._fan_out_batch(todo):
                yield result
            return
        workers = min(self.settings.workers, len(todo) // MIN_REQUESTS_PER_WORKER)
        if workers > 1 and self.provider.spec is not None:
            async for result in self._fan_out_to_processes(todo, workers):
                yield result
            return
        async for result in self._fan_out_here(todo, self.settings):
            yield result

    async def _fan_out_here(
        self, todo: list[tuple[ModelRequest, str]], settings: EngineSettings
    ) -> AsyncIterator[RequestResult]:
        """Send ``todo`` from this process, within ``settings``' concurrency and rate."""
        queue: asyncio.Queue[tuple[ModelRequest, str]] = asyncio.Queue()
        for pair in todo:
            queue.put_nowait(pair)
        results: asyncio.Queue[RequestResult | _Lost | BaseException] = asyncio.Queue()
        most = self.provider.answers_at_once or settings.concurrency
        limit = self._limit_here = _AdaptiveLimit(min(settings.concurrency, most, len(todo)))
        total = limit.limit + self._limit_elsewhere
        self.stats.concurrency_limit = self.stats.lowest_concurrency_limit = total
        throttler = _Pace.of(settings, self._sleep)
        tasks = [
            asyncio.create_task(self._worker(i, queue, results, limit, throttler))
            for i in range(limit.ceiling)
        ]
        fatal: BaseException | None = None
        try:
            for _ in range(len(todo)):
                outcome = await results.get()
                if isinstance(outcome, BaseException):
                    fatal = outcome
                    break
                if isinstance(outcome, _Lost):
                    continue  # another process holds it: waited for by the caller
                yield outcome
            if isinstance(fatal, ProviderError):
                # A stop the endpoint or the budget called: nothing new is sent, but the
                # answers already in flight are paid for, so they are awaited and kept.
                _drain(queue)
                async for outcome in _in_flight(tasks, results, lambda: self.stats.in_flight):
                    if isinstance(outcome, RequestResult):
                        yield outcome
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.cache is not None:
                self.cache.flush_hits()
        if isinstance(fatal, ProviderError):
            raise RunAbortedError(fatal)
        if fatal is not None:
            raise fatal

    async def _fan_out_batch(
        self, todo: list[tuple[ModelRequest, str]]
    ) -> AsyncIterator[RequestResult]:
        """Send ``todo`` through the provider's batch API (see :mod:`biasaudit.engine.batch`)."""
        runner = BatchRunner(
            self.provider,
            self.cache,
            self.settings,
            self.stats,
            send_directly=lambda pairs: self._fan_out(pairs, direct=True),
            record=self._record,
            sleep=self._sleep,
            on_update=self.on_batch_update,
        )
        try:
            async for result in runner.run(todo):
                yield result
        except RunAbortedError:
            raise
        except ProviderError as error:
            raise RunAbortedError(error) from error

    async def _fan_out_to_processes(
        self, todo: list[tuple[ModelRequest, str]], workers: int
    ) -> AsyncIterator[RequestResult]:
        """Send one share of ``todo`` from here and the others from child processes.

        The children (:mod:`biasaudit.engine.worker_pool`) may have been started
        before the run, so that their imports overlapped the parent's start-up.
        A child that dies (killed, out of memory) costs nothing but time: this
        process sends what it had not answered.
        """
        shards = [todo[i::workers] for i in range(workers)]
        share = self.settings.for_worker(workers)
        assert self.provider.spec is not None
        children = worker_pool.take(
            worker_pool.worker_provider_spec(self.provider.spec, share.concurrency), workers - 1
        )
        header = {
            "settings": asdict(share),
            "cache": str(self.cache.path) if self.cache is not None else None,
        }
        lines: asyncio.Queue[tuple[int, Any] | BaseException] = asyncio.Queue()
        feeders = [
            asyncio.create_task(child.talk(slot, header, _request_lines(shards[slot]), lines))
            for slot, child in enumerate(children, start=1)
        ]
        self._limit_elsewhere = sum(min(share.concurrency, len(s)) for s in shards[1:])
        here = [asyncio.create_task(self._pump(self._fan_out_here(shards[0], share), lines))]
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
                    self._merge_worker_stats(
                        latest, slot, {**latest[slot], "in_flight": 0, "limit": 0}
                    )
                    here.append(
                        asyncio.create_task(self._pump(self._fan_out_here(rest, share), lines))
                    )
                    continue
                results += 1
                if isinstance(line, RequestResult):
                    yield line  # sent from this process: already recorded and cached
                    continue
                if "fatal" in line:
                    error = _rebuild_error(line["fatal"])
                    raise RunAbortedError(error) if isinstance(error, ProviderError) else error
                answered[slot].add(line["i"])
                self._merge_worker_stats(latest, slot, line["stats"])
                request, key = shards[slot][line["i"]]
                result = _decode_result(request, key, line["result"])
                if result.response is not None:
                    self._record(result.response)
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
            self._limit_elsewhere, self._limit_here = 0, None

    @staticmethod
    async def _pump(
        results: AsyncIterator[RequestResult], lines: asyncio.Queue[tuple[int, Any] | BaseException]
    ) -> None:
        """Pass this process's own results (slot 0), or what stopped them, to ``lines``."""
        try:
            async for result in results:
                lines.put_nowait((0, result))
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            lines.put_nowait(error)

    def _merge_worker_stats(
        self, latest: list[dict[str, int]], slot: int, snapshot: dict[str, int]
    ) -> None:
        """Add what a child's latest counters add to the last ones it reported."""
        stats, before = self.stats, latest[slot]
        latest[slot] = snapshot
        for name in ("sent", "retries", "rate_limited", "in_flight"):
            change = snapshot.get(name, 0) - before.get(name, 0)
            setattr(stats, name, getattr(stats, name) + change)
        self._limit_elsewhere = sum(s.get("limit", 0) for s in latest[1:])
        if self._limit_here is not None:
            self._show_limit(self._limit_here)

    def _show_limit(self, limit: _AdaptiveLimit) -> None:
        """Report the concurrency limit of every process sending for this run."""
        total = limit.limit + self._limit_elsewhere
        self.stats.concurrency_limit = total
        self.stats.lowest_concurrency_limit = min(self.stats.lowest_concurrency_limit, total)

    async def _worker(
        self,
        index: int,
        queue: asyncio.Queue[tuple[ModelRequest, str]],
        results: asyncio.Queue[RequestResult | _Lost | BaseException],
        limit: _AdaptiveLimit,
        throttler: _Pace | None,
    ) -> None:
        while not queue.empty():
            await limit.wait_turn(index)
            try:
                request, key = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            try:
                fenced = self._fenced(request, key)
                if fenced is not None:
                    results.put_nowait(fenced)
                    continue
                result = await self._attempt_all(request, key, limit, throttler)
            except asyncio.CancelledError:
                raise
            except BaseException as error:  # fatal, or a bug: either way the run stops
                results.put_nowait(error)
                return
            results.put_nowait(result)

    def _fenced(self, request: ModelRequest, key: str) -> RequestResult | _Lost | None:
        """Before sending under a lease that may have run out (the process was frozen:
        Ctrl-Z, SIGSTOP, a laptop lid, past the lease): claim the request again. Another
        process that took it over answered it (served from the cache) or still holds it
        (given back, waited for); None: it is this run's to send."""
        lease = self._lease
        if lease is None or time.time() < lease.until - lease.seconds / 4:
            return None  # renewed in time: nobody else can hold it
        assert self.cache is not None
        claim = self.cache.claim([key], lease.holder, lease_s=lease.seconds)
        if key in claim.answered:
            return next(self._served([(request, key)]))
        if key in claim.held:
            lease.lost.append(key)
            return _LOST
        return None

    async def _attempt_all(
        self, request: ModelRequest, key: str, limit: _AdaptiveLimit, throttler: _Pace | None
    ) -> RequestResult:
        result = RequestResult(request, key)
        hintless_429s = 0
        began = time.perf_counter()

        async def attempt() -> tuple[ModelResponse, float]:
            nonlocal hintless_429s
            result.attempts += 1
            try:
                return await self._send(request, throttler)
            except BaseException as raw:
                error = self._classify(raw)
                if isinstance(error, RateLimitedError):
                    self._slow_down(limit)
                    hintless_429s += error.retry_after is None and error.status == 429
                if result.attempts <= self.settings.max_retries:
                    self._refuse_long_wait(error)
                raise error from raw

        try:
            # Most requests succeed at once: only a failure pays for tenacity's machinery.
            response, latency = await attempt()
        except FatalProviderError:
            raise
        except ProviderError as first_error:
            try:
                response, latency = await self._retry(attempt, first_error)
            except FatalProviderError:
                raise
            except ProviderError as error:
                if hintless_429s == result.attempts > 1:
                    raise QuotaExhaustedError(
                        f"rate limited on all {result.attempts} attempts with no Retry-After: "
                        "the account's quota or spend limit is probably exhausted"
                    ) from error
                result.error, result.error_type = str(error), type(error).__name__
                logger.warning(
                    "%s failed after %d attempts: %s", request.id, result.attempts, error
                )
                return result
        result.response, result.latency_s = response, latency
        # Everything before the answering attempt: --rpm / --tpm, failed attempts, backoff.
        result.waited_s = max(0.0, time.perf_counter() - began - latency)
        self._successes += 1
        limit.succeeded()
        self._show_limit(limit)
        self._record(response)
        if self.cache is not None:  # refusals too: the model's answer, paid for
            self.cache.put(key, response, model_id=self.provider.model_id)
        return result

    async def _retry(
        self,
        attempt: Callable[[], Awaitable[tuple[ModelResponse, float]]],
        first_error: ProviderError,
    ) -> tuple[ModelResponse, float]:
        """Tenacity's retry loop, entered after a failed first attempt.

        The loop's own first attempt re-raises ``first_error`` without sending,
        so attempt numbers, waits and the stop rule all count the real first try.
        """
        pending: list[ProviderError] = [first_error]

        async def replay_then_attempt() -> tuple[ModelResponse, float]:
            if pending:
                raise pending.pop()
            self.stats.retries += 1
            return await attempt()

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.settings.max_retries + 1),
            wait=self._wait,
            retry=self._should_retry,
            sleep=self._sleep,
            before_sleep=_log_retry,
            reraise=True,
        )
        return await retrying(replay_then_attempt)

    def _refuse_long_wait(self, error: ProviderError) -> None:
        """Stop the run when the endpoint asks to wait longer than one retry may wait.

        Waiting the cap instead, again and again for every prompt, would be hours
        of silence; the answers so far are cached and a later run resumes.
        """
        wait = getattr(error, "retry_after", None)
        cap = self.settings.max_retry_after
        if wait is None or wait <= cap:
            return
        raise WaitTooLongError(
            f"the endpoint asks to wait {_duration(wait)} before the next request "
            f"(Retry-After), longer than the {_duration(cap)} a retry waits at most: "
            f"{error}; run the same command again later (what arrived is cached)",
            status=error.status,
        ) from error

    def _slow_down(self, limit: _AdaptiveLimit) -> None:
        self.stats.rate_limited += 1
        limit.rate_limited()
        self._show_limit(limit)

    async def _send(
        self, request: ModelRequest, throttler: _Pace | None
    ) -> tuple[ModelResponse, float]:
        if throttler is not None:
            await throttler.wait(request)
        self.stats.sent += 1
        self.stats.in_flight += 1
        started = time.perf_counter()
        try:
            response = await self.provider.complete(request, timeout=self.settings.timeout)
        finally:
            self.stats.in_flight -= 1
        if not isinstance(response, ModelResponse):  # a plugin's provider, checked here
            raise MalformedResponseError(
                f"{type(self.provider).__name__}.complete() returned a "
                f"{type(response).__name__}, not a ModelResponse"
            )
        return response, time.perf_counter() - started

    def _record(self, response: ModelResponse) -> None:
        self.stats.count_response(response)
        self.stats.input_tokens += response.usage.input_tokens
        self.stats.output_tokens += response.usage.output_tokens

    def _classify(self, raw: BaseException) -> ProviderError:
        if isinstance(raw, asyncio.CancelledError | KeyboardInterrupt):
            raise raw
        try:
            return self.provider.classify(raw)
        except Exception:
            if self.provider.plugin is None:
                raise  # biasaudit's own providers: a bug, shown as one
            # A plugin's provider that fails in its own way: that request fails, named,
            # and the run goes on.
            return RequestRejectedError(
                redact(f"{type(self.provider).__name__} (provider plugin of "
                       f"{self.provider.plugin}) failed: {type(raw).__name__}: {raw}")
            )  # fmt: skip

    def _should_retry(self, state: RetryCallState) -> bool:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, EndpointUnreachableError):
            return self._successes > 0 or state.attempt_number < _UNREACHABLE_ATTEMPTS
        return isinstance(error, TransientProviderError)

    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        hint = getattr(error, "retry_after", None)
        if hint is not None:
            return float(min(hint, self.settings.max_retry_after))
        backoff = wait_random_exponential(
            multiplier=self.settings.backoff_initial, max=self.settings.backoff_max
        )
        return float(backoff(state))


def _duration(seconds: float) -> str:
    """``seconds`` as a person says it: 45 s, 12 min, 24 h."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.3g} h"


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    wait = state.next_action.sleep if state.next_action else 0.0
    logger.info("attempt %d failed (%s); retrying in %.2fs", state.attempt_number, error, wait)


def _request_lines(shard: list[tuple[ModelRequest, str]]) -> list[bytes]:
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


class _TokenRate:
    """At most ``tpm`` estimated tokens a minute (:func:`estimate_tokens`: the prompt,
    and the most the answer may take): a bucket that fills continuously and holds ten
    seconds' worth, so a run starts at once and then keeps to the rate. A request
    larger than the bucket waits for a full one. Requests are served in turn."""

    def __init__(
        self,
        tpm: float,
        sleep: Callable[[float], Awaitable[None]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = tpm / 60.0
        self.capacity = tpm / 6.0
        self.level = self.capacity
        self._sleep, self._clock = sleep, clock
        self._stamp = clock()
        self._turn = asyncio.Lock()

    async def take(self, tokens: int) -> None:
        wanted = min(float(tokens), self.capacity)
        async with self._turn:
            while True:
                now = self._clock()
                self.level = min(self.capacity, self.level + (now - self._stamp) * self.rate)
                self._stamp = now
                if self.level >= wanted:
                    self.level -= wanted
                    return
                await self._sleep((wanted - self.level) / self.rate)


class _Pace:
    """What each attempt waits for before it is sent: ``rpm`` and ``tpm``."""

    def __init__(self, throttler: Throttler | None, tokens: _TokenRate | None) -> None:
        self._throttler, self._tokens = throttler, tokens

    @classmethod
    def of(
        cls, settings: EngineSettings, sleep: Callable[[float], Awaitable[None]]
    ) -> _Pace | None:
        if not settings.rpm and not settings.tpm:
            return None
        throttler = _throttler(settings.rpm) if settings.rpm else None
        return cls(throttler, _TokenRate(settings.tpm, sleep) if settings.tpm else None)

    async def wait(self, request: ModelRequest) -> None:
        if self._tokens is not None:
            await self._tokens.take(sum(estimate_tokens(request)))
        if self._throttler is not None:
            async with self._throttler:
                pass


def _throttler(rpm: float) -> Throttler:
    """At most ``rpm`` starts a minute, spread out: bursts of at most one second's worth."""
    per_window = max(1, round(rpm / 60.0))
    return Throttler(rate_limit=per_window, period=per_window * 60.0 / rpm)


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


def _drain(queue: asyncio.Queue[Any]) -> None:
    """Empty ``queue``: the workers take nothing more from it."""
    while True:
        try:
            queue.get_nowait()
        except asyncio.QueueEmpty:
            return


async def _in_flight(
    tasks: Sequence[asyncio.Task[None]],
    results: asyncio.Queue[RequestResult | _Lost | BaseException],
    sending: Callable[[], int],
) -> AsyncIterator[RequestResult | _Lost | BaseException]:
    """What the workers still put in ``results`` while any request is on the wire
    (``sending()``): a worker waiting for its turn or backing off before a retry has
    nothing paid for, and is cancelled with the rest."""
    while True:
        if results.empty() and (sending() == 0 or all(task.done() for task in tasks)):
            return
        try:
            yield await asyncio.wait_for(results.get(), timeout=0.2)
        except TimeoutError:
            continue
