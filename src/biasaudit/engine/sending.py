"""Sending from this process: the strategy every other one rests on.

:class:`InProcess` sends requests from asyncio tasks of this process, each request
with its retries (tenacity: capped exponential backoff with full jitter, or as long
as ``Retry-After`` asks), within the concurrency limit that adapts to rate limits
(:class:`_AdaptiveLimit`) and the pace of ``rpm`` (:mod:`asyncio_throttle`) and
``tpm`` (:class:`_TokenRate`). What it needs of the engine, and what every strategy
adds to, is a :class:`SendContext`: the provider, the cache, the settings and the
counters.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from asyncio_throttle import Throttler  # type: ignore[attr-defined]
from tenacity import AsyncRetrying, RetryCallState, stop_after_attempt, wait_random_exponential

from biasaudit.engine.types import EngineSettings, EngineStats, Pairs, RequestResult
from biasaudit.errors import (
    EndpointUnreachableError,
    FatalProviderError,
    MalformedResponseError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitedError,
    RequestRejectedError,
    RunAbortedError,
    TransientProviderError,
    WaitTooLongError,
)
from biasaudit.providers import ModelRequest, ModelResponse, Provider
from biasaudit.providers._types import estimate_tokens
from biasaudit.secrets import redact
from biasaudit.store.cache import ResponseCache

__all__ = ["LOST", "Fence", "InProcess", "SendContext"]

logger = logging.getLogger(__name__)

_CACHE_CHUNK = 2_000
# Before any request has succeeded, a refused connection means a wrong URL or a
# server that is down: stop after this many attempts rather than back off for minutes.
_UNREACHABLE_ATTEMPTS = 2


class _Lost:
    """A request another process took over while this one was frozen."""


LOST = _Lost()
Fence = Callable[[ModelRequest, str], "RequestResult | _Lost | None"]
"""Asked before each request is sent under leases (:class:`~biasaudit.engine.strategies.
Leased`): its cached answer, :data:`LOST` (another process holds it), or None (send it)."""


@dataclass
class SendContext:
    """What every strategy of one engine sends with and adds to: the provider, the
    cache answers go to, the settings, the counters, and the concurrency limits of
    every process sending for the run (for the progress line)."""

    provider: Provider
    cache: ResponseCache | None
    settings: EngineSettings
    sleep: Callable[[float], Awaitable[None]]
    stats: EngineStats = field(default_factory=EngineStats)
    successes: int = 0
    """Answers so far: once the endpoint answered, a refused connection is transient."""
    limit_here: _AdaptiveLimit | None = None
    limit_elsewhere: int = 0
    """The children's concurrency limits, with worker processes."""

    def served(self, pairs: list[tuple[ModelRequest, str]]) -> Iterator[RequestResult]:
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

    def record(self, response: ModelResponse) -> None:
        """Count an answer: its model version and tokens."""
        self.stats.count_response(response)
        self.stats.input_tokens += response.usage.input_tokens
        self.stats.output_tokens += response.usage.output_tokens

    def show_limit(self, limit: _AdaptiveLimit) -> None:
        """Report the concurrency limit of every process sending for this run."""
        total = limit.limit + self.limit_elsewhere
        self.stats.concurrency_limit = total
        self.stats.lowest_concurrency_limit = min(self.stats.lowest_concurrency_limit, total)


@dataclass
class InProcess:
    """Send from asyncio tasks of this process, within ``settings``' concurrency and
    pace (the engine's, or one worker's share of them)."""

    context: SendContext
    settings: EngineSettings
    fence: Fence | None = None

    async def send(self, todo: Pairs) -> AsyncIterator[RequestResult]:
        """Each of ``todo`` sent until answered or failed, as each completes.

        Raises
        ------
        RunAbortedError
            After the answers in flight, when the endpoint or the budget stopped the run.
        """
        if not todo:
            return
        context, settings = self.context, self.settings
        queue: asyncio.Queue[tuple[ModelRequest, str]] = asyncio.Queue()
        for pair in todo:
            queue.put_nowait(pair)
        results: asyncio.Queue[RequestResult | _Lost | BaseException] = asyncio.Queue()
        most = context.provider.answers_at_once or settings.concurrency
        limit = context.limit_here = _AdaptiveLimit(min(settings.concurrency, most, len(todo)))
        total = limit.limit + context.limit_elsewhere
        context.stats.concurrency_limit = context.stats.lowest_concurrency_limit = total
        throttler = _Pace.of(settings, context.sleep)
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
                async for outcome in _in_flight(tasks, results, lambda: context.stats.in_flight):
                    if isinstance(outcome, RequestResult):
                        yield outcome
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if context.cache is not None:
                context.cache.flush_hits()
        if isinstance(fatal, ProviderError):
            raise RunAbortedError(fatal)
        if fatal is not None:
            raise fatal

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
                fenced = self.fence(request, key) if self.fence is not None else None
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

        async def retry() -> tuple[ModelResponse, float]:
            # Another process sharing the cache may have answered it meanwhile (a run
            # frozen past its lease, resumed): never pay for an answer the cache holds.
            cache = self.context.cache
            cached = cache.get(key) if cache is not None else None
            if cached is not None:
                result.cached = True
                return cached, 0.0
            return await attempt()

        try:
            # Most requests succeed at once: only a failure pays for tenacity's machinery.
            response, latency = await attempt()
        except FatalProviderError:
            raise
        except ProviderError as first_error:
            try:
                response, latency = await self._retry(retry, first_error)
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
        if result.cached:  # answered elsewhere while this one waited to retry
            self.context.stats.count_response(response)
            return result
        self.context.successes += 1
        limit.succeeded()
        self.context.show_limit(limit)
        self.context.record(response)
        cache = self.context.cache
        if cache is not None:  # refusals too: the model's answer, paid for
            cache.put(key, response, model_id=self.context.provider.model_id)
            # The commit put scheduled runs before this worker sends its next request, so
            # a kill -9 loses at most the answers in flight (never one received as well).
            await asyncio.sleep(0)
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
            self.context.stats.retries += 1
            return await attempt()

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.settings.max_retries + 1),
            wait=self._wait,
            retry=self._should_retry,
            sleep=self.context.sleep,
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
        self.context.stats.rate_limited += 1
        limit.rate_limited()
        self.context.show_limit(limit)

    async def _send(
        self, request: ModelRequest, throttler: _Pace | None
    ) -> tuple[ModelResponse, float]:
        if throttler is not None:
            await throttler.wait(request)
        self.context.stats.sent += 1
        self.context.stats.in_flight += 1
        started = time.perf_counter()
        provider = self.context.provider
        try:
            call = provider.complete(request, timeout=self.settings.timeout)
            response = await (call if provider.plugin is None else self._bounded(call))
        finally:
            self.context.stats.in_flight -= 1
        if not isinstance(response, ModelResponse):  # a plugin's provider, checked here
            raise MalformedResponseError(
                f"{type(self.context.provider).__name__}.complete() returned a "
                f"{type(response).__name__}, not a ModelResponse"
            )
        return response, time.perf_counter() - started

    async def _bounded(self, call: Awaitable[ModelResponse]) -> ModelResponse:
        """A plugin's answer within ``--timeout``, as biasaudit's own providers bound each
        attempt: a plugin whose call never returns fails that attempt (retried), named,
        and never holds up the run."""
        provider = self.context.provider
        try:
            async with asyncio.timeout(self.settings.timeout):
                return await call
        except TimeoutError:
            raise TransientProviderError(
                f"{type(provider).__name__} (provider plugin of {provider.plugin}) gave no "
                f"answer within {self.settings.timeout:g} s (--timeout)"
            ) from None

    def _classify(self, raw: BaseException) -> ProviderError:
        if isinstance(raw, asyncio.CancelledError | KeyboardInterrupt):
            raise raw
        try:
            return self.context.provider.classify(raw)
        except Exception:
            if self.context.provider.plugin is None:
                raise  # biasaudit's own providers: a bug, shown as one
            # A plugin's provider that fails in its own way: that request fails, named,
            # and the run goes on.
            return RequestRejectedError(
                redact(f"{type(self.context.provider).__name__} (provider plugin of "
                       f"{self.context.provider.plugin}) failed: {type(raw).__name__}: {raw}")
            )  # fmt: skip

    def _should_retry(self, state: RetryCallState) -> bool:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, EndpointUnreachableError):
            return self.context.successes > 0 or state.attempt_number < _UNREACHABLE_ATTEMPTS
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
