"""Engine logic against an in-process fake provider: cache, retries, limits, fatal errors."""

from __future__ import annotations

import asyncio

import pytest

from biasaudit.engine.core import Engine, EngineSettings, RequestResult
from biasaudit.errors import (
    AuthenticationFailedError,
    QuotaExhaustedError,
    RateLimitedError,
    ReplayMissError,
    RequestRejectedError,
    RunAbortedError,
    TransientProviderError,
)
from biasaudit.providers import ModelRequest, ModelResponse
from biasaudit.store.cache import ResponseCache

from .fakes import FakeProvider, chat


def collect(engine: Engine, requests: list[ModelRequest]) -> list[RequestResult]:
    async def go() -> list[RequestResult]:
        return [result async for result in engine.run(requests)]

    return asyncio.run(go())


def test_every_request_answered_and_cached(cache: ResponseCache) -> None:
    provider = FakeProvider()
    requests = [chat(f"q{i}", f"prompt {i}") for i in range(50)]
    results = collect(Engine(provider, cache), requests)
    assert sorted(r.request.id for r in results) == sorted(r.id for r in requests)
    assert all(r.ok and not r.cached and r.attempts == 1 for r in results)
    assert len(cache) == 50

    again = Engine(FakeProvider(), cache)
    second = collect(again, requests)
    assert all(r.cached for r in second)
    assert again.stats.sent == 0 and again.stats.cache_hits == 50


def test_a_kill_loses_at_most_the_answers_in_flight(cache: ResponseCache) -> None:
    """At every send, answers received but not yet committed plus requests in flight
    are within the concurrency: a kill -9 at any moment re-pays at most that many."""
    concurrency, seen = 4, []

    class Watching(FakeProvider):
        async def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
            seen.append(cache.uncommitted + self.in_flight + 1)
            return await super().complete(request, timeout=timeout)

    provider = Watching(delay=0.001)
    settings = EngineSettings(concurrency=concurrency)
    collect(Engine(provider, cache, settings), [chat(f"q{i}", f"p{i}") for i in range(200)])
    assert len(seen) == 200 and max(seen) <= concurrency, max(seen)


def test_same_content_different_id_is_one_cache_entry(cache: ResponseCache) -> None:
    provider = FakeProvider()
    collect(Engine(provider, cache), [chat("a", "same")])
    results = collect(Engine(provider, cache), [chat("b", "same")])
    assert results[0].cached and provider.calls["b"] == 0


def test_replicates_are_distinct_cache_entries(cache: ResponseCache) -> None:
    provider = FakeProvider()
    base = chat("q", "same", temperature=1.0)
    requests = [base.model_copy(update={"replicate": r}) for r in range(3)]
    collect(Engine(provider, cache), requests)
    assert provider.calls["q"] == 3 and len(cache) == 3


def test_transient_errors_are_retried_with_backoff(
    cache: ResponseCache, recording_sleep, sleeps
) -> None:
    provider = FakeProvider()
    provider.script["q"] = [TransientProviderError("HTTP 500"), TransientProviderError("HTTP 502")]
    engine = Engine(
        provider, cache, EngineSettings(backoff_initial=0.5, backoff_max=4), sleep=recording_sleep
    )
    [result] = collect(engine, [chat("q")])
    assert result.ok and result.attempts == 3 and engine.stats.retries == 2
    assert len(sleeps) == 2 and all(0 <= s <= 4 for s in sleeps)


def test_a_retry_checks_the_cache_first_and_pays_for_nothing_answered_elsewhere(
    cache: ResponseCache, recording_sleep, sleeps
) -> None:
    """A run frozen past its lease, resumed, retried its in-flight requests after another
    process sharing the cache had answered them: each was paid for again. While this
    request waits to retry, the other process's answer lands in the cache."""
    provider = FakeProvider()
    request = chat("q")
    elsewhere = ModelResponse(texts=("answered elsewhere",), model_version="model-1-2026")

    async def answered_meanwhile(seconds: float) -> None:
        await recording_sleep(seconds)
        cache.put(engine.key(request), elsewhere, model_id="fake/model-1")

    engine = Engine(provider, cache, sleep=answered_meanwhile)
    provider.script["q"] = [TransientProviderError("HTTP 503")]
    [result] = collect(engine, [request])
    assert result.ok and result.cached and result.response == elsewhere
    assert provider.calls["q"] == 1 and len(sleeps) == 1  # the one failed attempt only


def test_retry_after_is_honoured(cache: ResponseCache, recording_sleep, sleeps) -> None:
    provider = FakeProvider()
    provider.script["q"] = [RateLimitedError("429", status=429, retry_after=7.5)]
    engine = Engine(provider, cache, sleep=recording_sleep)
    [result] = collect(engine, [chat("q")])
    assert result.ok and sleeps == [7.5]


def test_retry_after_within_the_cap_is_waited_as_asked(
    cache: ResponseCache, recording_sleep, sleeps
) -> None:
    provider = FakeProvider()
    provider.script["q"] = [RateLimitedError("429", status=429, retry_after=45)]
    engine = Engine(provider, cache, EngineSettings(max_retry_after=60), sleep=recording_sleep)
    collect(engine, [chat("q")])
    assert sleeps == [45]


def test_rejected_request_is_not_retried_and_not_cached(
    cache: ResponseCache, recording_sleep
) -> None:
    provider = FakeProvider()
    provider.script["bad"] = [RequestRejectedError("HTTP 400: bad", status=400)]
    engine = Engine(provider, cache, sleep=recording_sleep)
    results = {r.request.id: r for r in collect(engine, [chat("bad", "1"), chat("good", "2")])}
    assert results["bad"].error == "HTTP 400: bad" and results["bad"].attempts == 1
    assert results["bad"].error_type == "RequestRejectedError"
    assert results["good"].ok
    assert engine.stats.failures == 1 and len(cache) == 1


def test_retries_run_out_and_the_failure_is_recorded(cache: ResponseCache, recording_sleep) -> None:
    provider = FakeProvider()
    provider.script["q"] = [TransientProviderError("HTTP 503")] * 10
    engine = Engine(provider, cache, EngineSettings(max_retries=3), sleep=recording_sleep)
    [result] = collect(engine, [chat("q")])
    assert result.error == "HTTP 503" and result.attempts == 4 and provider.calls["q"] == 4
    assert len(cache) == 0


def test_fatal_error_stops_the_run_after_yielding_what_arrived(cache: ResponseCache) -> None:
    provider = FakeProvider(delay=0.01)
    provider.script["q5"] = [AuthenticationFailedError("HTTP 401", status=401)]
    requests = [chat(f"q{i}", f"p{i}") for i in range(40)]
    got: list[RequestResult] = []

    async def go() -> None:
        async for result in Engine(provider, cache, EngineSettings(concurrency=2)).run(requests):
            got.append(result)

    with pytest.raises(RunAbortedError) as caught:
        asyncio.run(go())
    assert isinstance(caught.value.cause, AuthenticationFailedError)
    assert 0 < len(got) < 40 and sum(provider.calls.values()) < 40
    assert len(cache) == len(got)


def test_repeated_429_without_retry_after_means_quota_exhausted(
    cache: ResponseCache, recording_sleep
) -> None:
    provider = FakeProvider()
    provider.script["q"] = [RateLimitedError("429", status=429)] * 10
    engine = Engine(provider, cache, EngineSettings(max_retries=2), sleep=recording_sleep)
    with pytest.raises(RunAbortedError) as caught:
        collect(engine, [chat("q")])
    assert isinstance(caught.value.cause, QuotaExhaustedError)
    assert provider.calls["q"] == 3


def test_rate_limits_lower_concurrency_then_it_recovers(cache: ResponseCache) -> None:
    provider = FakeProvider(delay=0.005)
    for i in range(4):
        provider.script[f"q{i}"] = [RateLimitedError("429", status=429, retry_after=0.01)]
    requests = [chat(f"q{i}", f"p{i}") for i in range(300)]
    engine = Engine(provider, cache, EngineSettings(concurrency=16))
    seen_limits: list[int] = []

    async def go() -> None:
        async for _ in engine.run(requests):
            seen_limits.append(engine.stats.concurrency_limit)

    asyncio.run(go())
    lowest = engine.stats.lowest_concurrency_limit
    assert lowest <= 8, "a 429 halves the requests in flight"
    assert seen_limits[-1] > lowest, "successes raise the limit again"
    assert engine.stats.rate_limited == 4 and engine.stats.failures == 0


def test_concurrency_is_a_ceiling(cache: ResponseCache) -> None:
    provider = FakeProvider(delay=0.005)
    collect(
        Engine(provider, cache, EngineSettings(concurrency=5)),
        [chat(f"q{i}", f"{i}") for i in range(60)],
    )
    assert provider.max_in_flight == 5


def test_rpm_spreads_request_starts(cache: ResponseCache) -> None:
    provider = FakeProvider()
    requests = [chat(f"q{i}", f"{i}") for i in range(30)]
    collect(Engine(provider, cache, EngineSettings(rpm=1200, concurrency=30)), requests)
    starts = sorted(provider.starts)
    # 1200 per minute is 20 per second: no one-second window may hold more than 20 starts.
    for i, start in enumerate(starts):
        in_window = sum(1 for s in starts[i:] if s < start + 0.95)
        assert in_window <= 20


def test_refusals_are_cached_counted_and_replayed(cache: ResponseCache) -> None:
    provider = FakeProvider(refuse={"r"})
    engine = Engine(provider, cache)
    results = {r.request.id: r for r in collect(engine, [chat("r", "x"), chat("a", "y")])}
    assert results["r"].response is not None and results["r"].response.refusal
    assert not results["r"].ok and engine.stats.refusals == 1
    assert len(cache) == 2
    # Served again, from the cache: not sent, still a refusal, still counted.
    again = Engine(FakeProvider(), cache, EngineSettings(replay=True))
    replayed = {r.request.id: r for r in collect(again, [chat("r", "x"), chat("a", "y")])}
    assert replayed["r"].cached and replayed["r"].response is not None
    assert replayed["r"].response.refusal == results["r"].response.refusal
    assert again.stats.refusals == 1 and again.stats.sent == 0


def test_replay_names_what_is_missing_and_sends_nothing(cache: ResponseCache) -> None:
    provider = FakeProvider()
    collect(Engine(provider, cache), [chat("have", "1")])
    replayer = FakeProvider()
    with pytest.raises(ReplayMissError, match="1 of 2 prompts are not in the cache"):
        collect(
            Engine(replayer, cache, EngineSettings(replay=True)),
            [chat("have", "1"), chat("miss", "2")],
        )
    assert sum(replayer.calls.values()) == 0


def test_a_replay_of_identical_prompts_finds_every_one_and_names_only_what_is_missing(
    cache: ResponseCache,
) -> None:
    """Two inputs with the same content are one question: sent once, cached once, and
    each answered (its model version counted for each). A replay counts the calls it
    needs, not the keys, so it finds both in the cache, and a miss names the calls that
    lack an answer."""
    requests = [chat("a", "same"), chat("b", "same"), chat("c", "other")]
    first = Engine(FakeProvider(), cache)
    collect(first, requests)
    assert first.stats.sent == 2 and len(cache) == 2
    # Three answers, as a run served from the cache counts them.
    assert first.stats.cache_hits == 1 and first.stats.model_versions == {"model-1-2026": 3}
    replayer = FakeProvider()
    again = Engine(replayer, cache, EngineSettings(replay=True))
    again.check_replay(requests)
    assert all(r.cached for r in collect(again, requests)) and again.stats.sent == 0
    assert again.stats.model_versions == first.stats.model_versions
    more = [*requests, chat("d", "new"), chat("e", "new")]
    for check in (again.check_replay, lambda r: collect(again, r)):
        with pytest.raises(
            ReplayMissError, match=r"2 of 5 prompts are not in the cache .*\(e\.g\. d, e\)"
        ):
            check(more)
    assert sum(replayer.calls.values()) == 0


def test_n_is_split_into_cached_calls_where_unsupported(cache: ResponseCache) -> None:
    provider = FakeProvider(n=False)
    request = chat("q", "sample me", n=4, temperature=1.0)
    [result] = collect(Engine(provider, cache), [request])
    assert result.response is not None
    assert result.response.texts == tuple(f"answer to q#{i}" for i in range(4))
    assert provider.calls["q"] == 4 and len(cache) == 4
    [again] = collect(Engine(FakeProvider(n=False), cache), [request])
    assert again.cached and again.response == result.response


def test_split_samples_failing_fail_the_request(cache: ResponseCache, recording_sleep) -> None:
    provider = FakeProvider(n=False)
    provider.script["q"] = [RequestRejectedError("HTTP 400", status=400)]
    engine = Engine(provider, cache, sleep=recording_sleep)
    [result] = collect(engine, [chat("q", n=3, temperature=1.0)])
    assert result.error is not None and result.error.startswith("1 of 3 samples failed")
    assert engine.stats.failures == 1 and engine.stats.done == 1


def test_a_bug_in_a_provider_surfaces_instead_of_hanging(cache: ResponseCache) -> None:
    provider = FakeProvider()
    provider.script["q3"] = [TypeError("unexpected keyword argument 'temperature'")]
    with pytest.raises(TypeError, match="temperature"):
        collect(Engine(provider, cache), [chat(f"q{i}", str(i)) for i in range(6)])
    assert provider.calls["q3"] == 1, "a bug is never retried"


def test_identical_requests_in_one_run_are_sent_once(cache: ResponseCache) -> None:
    provider = FakeProvider()
    engine = Engine(provider, cache)
    results = collect(engine, [chat("a", "same"), chat("b", "same"), chat("c", "other")])
    assert sum(provider.calls.values()) == 2 and engine.stats.sent == 2
    by_id = {r.request.id: r for r in results}
    assert by_id["a"].response == by_id["b"].response and by_id["c"].ok
    assert engine.stats.done == 3 and engine.stats.cache_hits == 1


def test_the_token_rate_fills_continuously_and_holds_ten_seconds() -> None:
    from biasaudit.engine.sending import _TokenRate

    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    async def go() -> None:
        rate = _TokenRate(600, sleep, lambda: now[0])  # 10 tokens a second, 100 held
        await rate.take(100)  # a full bucket: at once
        assert slept == []
        await rate.take(50)  # empty: 5 s to refill 50
        assert slept == [pytest.approx(5.0)]
        now[0] += 30.0  # idle: refills to the 100 it holds, no more
        await rate.take(100)
        assert len(slept) == 1
        await rate.take(10_000)  # more than it holds: waits for a full bucket
        assert slept[-1] == pytest.approx(10.0)

    asyncio.run(go())


def test_tpm_holds_the_estimated_tokens_of_a_run_to_the_rate(cache: ResponseCache) -> None:
    """42 requests of 25 estimated tokens against 6,000 a minute (100 a second, 1,000
    held): the run waits about (1,050 - 1,000) / 100 = 0.5 s in all, not less."""
    from biasaudit.providers._types import estimate_tokens

    requests = [chat(f"q{i}", "x" * 30 + f"{i:02d}", max_tokens=10) for i in range(42)]
    assert {sum(estimate_tokens(r)) for r in requests} == {8 + 7 + 10}
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await asyncio.sleep(seconds)

    engine = Engine(FakeProvider(), cache, EngineSettings(tpm=6000, concurrency=8), sleep=sleep)
    results = collect(engine, requests)
    assert all(r.ok for r in results)
    assert 0.4 <= sum(slept) <= 0.55


def test_an_endpoint_that_answers_few_at_once_gets_no_more_in_flight(
    cache: ResponseCache,
) -> None:
    """A provider that declares ``answers_at_once`` (a local server: one each) is never
    sent more, whatever --concurrency says: the progress line's "in flight" and each
    request's latency are then the endpoint's own, not a queue's."""
    provider = FakeProvider(delay=0.005)
    provider.answers_at_once = 2
    engine = Engine(provider, cache, EngineSettings(concurrency=16))
    collect(engine, [chat(f"q{i}", f"{i}") for i in range(30)])
    assert provider.max_in_flight == 2
    assert engine.stats.concurrency_limit == 2


def test_time_waiting_and_time_answering_are_recorded_apart(cache: ResponseCache) -> None:
    """A request held by --tpm waits, then is answered: latency_s is the answer's time
    alone, waited_s what came before it."""
    provider = FakeProvider(delay=0.01)
    # 20 requests of 55 estimated tokens against a bucket of 1,000 filling at 100 a second:
    # the last ones wait about a second less the time the others took to answer, so the
    # assertion holds on a loaded machine too (answers up to 40 ms each).
    requests = [chat(f"q{i}", "x" * 30 + f"{i:02d}", max_tokens=40) for i in range(20)]
    results = collect(Engine(provider, cache, EngineSettings(tpm=6000, concurrency=1)), requests)
    assert all(r.latency_s is not None and 0.005 < r.latency_s < 0.5 for r in results)
    waits = [r.waited_s for r in results]
    assert all(w is not None and w >= 0 for w in waits)
    assert results[0].waited_s is not None and results[0].waited_s < 0.01  # a full bucket
    assert max(w for w in waits if w is not None) > 0.1  # the last ones waited for tokens


def test_rates_and_durations_read_as_people_read_them() -> None:
    from biasaudit.engine.progress import format_duration, format_rate

    assert [format_rate(r) for r in (0.0, 0.0432, 0.43, 4.25, 37.6)] == [
        "0 req/s", "0.043 req/s", "0.43 req/s", "4.2 req/s", "38 req/s"
    ]  # fmt: skip
    assert [format_duration(s) for s in (4.4, 65, 3599, 7260)] == [
        "4s", "1m05s", "59m59s", "2h01m"
    ]  # fmt: skip


def test_the_engine_settings_bounds_are_declared_once_for_both_doors() -> None:
    """``types.BOUNDS`` bounds the run options (pydantic names the field) and the engine
    settings library callers build (a ValueError naming the setting)."""
    import annotated_types

    from biasaudit.engine.options import RunOptions
    from biasaudit.engine.types import BOUNDS

    kinds = {"ge": annotated_types.Ge, "gt": annotated_types.Gt, "le": annotated_types.Le}
    for name, bounds in BOUNDS.items():
        if name in RunOptions.model_fields:
            declared = {type(m): m for m in RunOptions.model_fields[name].metadata}
            for kind, bound in bounds.items():
                assert getattr(declared[kinds[kind]], kind) == bound, (name, kind)
        for kind, bound in bounds.items():
            outside = bound - 1 if kind == "ge" else bound if kind == "gt" else bound * 2 + 1
            with pytest.raises(ValueError, match=name):
                EngineSettings(**{name: outside})
