"""Replicas of one self-hosted model: spread, failover, cool-down, cache key, manifest counts."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.engine.core import Engine, EngineSettings, RequestResult
from biasaudit.errors import (
    ConfigurationError,
    EndpointUnreachableError,
    RequestRejectedError,
    RunAbortedError,
    TransientProviderError,
)
from biasaudit.providers import ModelRequest, ModelResponse, Provider, resolve_model
from biasaudit.providers.replicas import ReplicaSetProvider
from biasaudit.spec import parse_spec
from biasaudit.store.cache import ResponseCache
from biasaudit.store.runs import read_manifest
from tests.servers import OpenAIServer

from .conftest import no_sleep
from .fakes import chat


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Replica(Provider):
    """Answers after ``delay``; raises the errors queued in ``failures`` first."""

    def __init__(self, url: str, delay: float = 0.0) -> None:
        self.name, self.model, self.base_url = "vllm", "m", url
        self.delay = delay
        self.failures: list[BaseException] = []
        self.calls = 0

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        self.calls += 1
        await asyncio.sleep(self.delay)
        if self.failures:
            raise self.failures.pop(0)
        return ModelResponse(texts=(f"{self.base_url}:{request.id}",))


def replica_set(*replicas: Replica, clock: Clock) -> ReplicaSetProvider:
    return ReplicaSetProvider(
        replicas, failure_threshold=2, cooldown=5.0, max_cooldown=12.0, clock=clock
    )


async def send(provider: Provider, request_id: str = "q") -> ModelResponse:
    return await provider.complete(chat(request_id, request_id), timeout=1.0)


def test_requests_go_to_the_replica_with_fewest_outstanding() -> None:
    fast, slow = Replica("http://a/v1", delay=0.001), Replica("http://b/v1", delay=0.05)
    provider = replica_set(fast, slow, clock=Clock())

    async def go() -> None:
        await asyncio.gather(*(send(provider, f"q{i}") for i in range(2)))  # one each
        await asyncio.gather(*(send(provider, f"r{i}") for i in range(40)))

    asyncio.run(go())
    assert fast.calls + slow.calls == 42 and fast.calls >= 1 and slow.calls >= 1
    counts = {r["base_url"]: r for r in provider.replicas}
    assert counts["http://a/v1"]["answered"] == fast.calls


def test_a_refused_connection_takes_a_replica_out_until_its_cooldown_ends() -> None:
    clock = Clock()
    a, b = Replica("http://a/v1"), Replica("http://b/v1")
    provider = replica_set(a, b, clock=clock)
    a.failures.append(EndpointUnreachableError("cannot reach http://a/v1"))

    async def go() -> None:
        with pytest.raises(TransientProviderError, match="taken out"):
            await send(provider)  # round robin starts at a
        for i in range(6):
            assert (await send(provider, f"q{i}")).text.startswith("http://b/v1")
        clock.now = 5.0  # cool-down over: the next request probes a, and a answers
        texts = {(await send(provider, f"p{i}")).text for i in range(4)}
        assert any(t.startswith("http://a/v1") for t in texts)

    asyncio.run(go())
    state = {r["base_url"]: r for r in provider.replicas}["http://a/v1"]
    assert state["state"] == "closed" and state["taken_out"] == 1 and state["failed"] == 1


def test_server_errors_in_a_row_take_a_replica_out_and_a_failed_probe_doubles_the_cooldown() -> (
    None
):
    clock = Clock()
    a, b = Replica("http://a/v1"), Replica("http://b/v1")
    provider = replica_set(a, b, clock=clock)
    a.failures.extend(TransientProviderError("HTTP 503", status=503) for _ in range(3))

    async def go() -> None:
        for i in range(8):  # a fails twice (threshold 2), then only b is used
            with contextlib.suppress(TransientProviderError):
                await send(provider, f"q{i}")
        assert a.calls == 2
        clock.now = 5.0
        for i in range(2):  # one of these probes a, which fails again
            with contextlib.suppress(TransientProviderError):
                await send(provider, f"p{i}")
        assert a.calls == 3
        clock.now = 5.0 + 9.9  # the cool-down is now 10 s
        await send(provider, "z0")
        assert a.calls == 3
        clock.now = 15.0
        await asyncio.gather(*(send(provider, f"y{i}") for i in range(4)))
        assert a.calls >= 4

    asyncio.run(go())
    state = {r["base_url"]: r for r in provider.replicas}["http://a/v1"]
    assert state["taken_out"] == 2 and state["state"] == "closed"


def test_rejections_and_rate_limits_leave_a_replica_in() -> None:
    a, b = Replica("http://a/v1"), Replica("http://b/v1")
    provider = replica_set(a, b, clock=Clock())
    a.failures.extend(RequestRejectedError("HTTP 400", status=400) for _ in range(4))

    async def go() -> None:
        for i in range(8):
            with contextlib.suppress(RequestRejectedError):
                await send(provider, f"q{i}")

    asyncio.run(go())
    assert all(r["state"] == "closed" and r["taken_out"] == 0 for r in provider.replicas)


def test_every_replica_out_is_unreachable_when_all_refused_else_a_wait() -> None:
    clock = Clock()
    a, b = Replica("http://a/v1"), Replica("http://b/v1")
    provider = replica_set(a, b, clock=clock)
    a.failures.append(EndpointUnreachableError("refused"))
    b.failures.append(EndpointUnreachableError("refused"))

    async def go() -> None:
        with pytest.raises(TransientProviderError):
            await send(provider)
        with pytest.raises(EndpointUnreachableError, match="any of the 2 replicas"):
            await send(provider)
        with pytest.raises(EndpointUnreachableError):
            await send(provider)  # nothing left to send to

    asyncio.run(go())
    c, d = Replica("http://c/v1"), Replica("http://d/v1")
    other = replica_set(c, d, clock=Clock())
    c.failures.extend(TransientProviderError("503") for _ in range(2))
    d.failures.extend(TransientProviderError("503") for _ in range(2))

    async def go_other() -> None:
        for i in range(4):
            with pytest.raises(TransientProviderError):
                await send(other, f"q{i}")
        with pytest.raises(TransientProviderError, match=r"tried again in 5\.0s") as caught:
            await send(other)
        assert caught.value.retry_after == pytest.approx(5.0)

    asyncio.run(go_other())


def test_several_base_urls_resolve_to_a_replica_set_keyed_on_the_first() -> None:
    provider = resolve_model("vllm/m", base_url=["http://a:8000/v1/", "http://b:8000/v1"])
    assert isinstance(provider, ReplicaSetProvider)
    assert provider.cache_scope == "http://a:8000/v1" and provider.spec is None
    single = resolve_model("vllm/m", base_url="http://a:8000/v1")
    request = chat("q", "hello")
    assert Engine(provider, None).key(request) == Engine(single, None).key(request)
    assert isinstance(resolve_model("vllm/m", base_url=["http://a:8000/v1"]), type(single))
    with pytest.raises(ConfigurationError, match="more than once"):
        resolve_model("vllm/m", base_url=["http://a:8000/v1", "http://a:8000/v1/"])
    with pytest.raises(ConfigurationError, match="one endpoint"):
        resolve_model("sim/biased", base_url=["http://a:8000/v1", "http://b:8000/v1"])


def test_specs_take_base_urls() -> None:
    spec = parse_spec(
        {"task": "resume-screening", "model": "vllm/m", "base_urls": ["http://a/v1", "http://b/v1"]}
    )
    assert spec.base_url == ("http://a/v1", "http://b/v1")
    one = parse_spec({"task": "resume-screening", "model": "vllm/m", "base_urls": ["http://a/v1"]})
    assert one.base_url == "http://a/v1"
    with pytest.raises(Exception, match="not both"):
        parse_spec(
            {"task": "resume-screening", "model": "vllm/m", "base_url": "x", "base_urls": ["y"]}
        )


def run_engine(
    provider: Provider,
    requests: list[ModelRequest],
    cache: ResponseCache,
    stop_after: int = 0,
    stop: OpenAIServer | None = None,
) -> tuple[list[RequestResult], Engine]:
    engine = Engine(provider, cache, EngineSettings(concurrency=8), sleep=no_sleep)

    async def go() -> list[RequestResult]:
        results = []
        try:
            async for result in engine.run(requests):
                results.append(result)
                if stop is not None and len(results) == stop_after:
                    await asyncio.to_thread(stop.stop)
        finally:
            await provider.aclose()
        return results

    return asyncio.run(go()), engine


def test_a_replica_killed_mid_run_is_taken_out_and_every_answer_arrives(
    cache: ResponseCache,
) -> None:
    requests = [chat(f"q{i}", f"prompt {i}", max_tokens=1) for i in range(300)]
    with (
        OpenAIServer(latency=0.005) as a,
        OpenAIServer(latency=0.005) as b,
        OpenAIServer(latency=0.005) as c,
    ):
        urls = [a.base_url, b.base_url, c.base_url]
        provider = resolve_model("vllm/test-model", base_url=urls)
        assert isinstance(provider, ReplicaSetProvider)
        results, engine = run_engine(provider, requests, cache, stop_after=40, stop=b)
        served = {s.base_url: s.request_count for s in (a, c)}
    assert len(results) == 300 and all(r.ok for r in results), [r.error for r in results][:3]
    counts = {r["base_url"]: r for r in provider.replicas}
    assert counts[urls[1]]["taken_out"] >= 1 and counts[urls[1]]["state"] == "open"
    assert counts[urls[0]]["answered"] == served[urls[0]] > 100
    assert sum(int(str(r["sent"])) for r in provider.replicas) == engine.stats.sent
    assert sum(int(str(r["answered"])) for r in provider.replicas) == 300
    assert len(cache) == 300


def test_an_answer_from_any_replica_is_a_cache_hit_later(cache: ResponseCache) -> None:
    requests = [chat(f"q{i}", f"prompt {i}") for i in range(40)]
    with OpenAIServer() as a, OpenAIServer() as b, OpenAIServer() as c:
        first, _ = run_engine(
            resolve_model("vllm/m", base_url=[a.base_url, b.base_url]), requests, cache
        )
        assert b.request_count > 0, "both replicas answered some"
        for urls in ([a.base_url], [a.base_url, c.base_url], [a.base_url, c.base_url, b.base_url]):
            again, engine = run_engine(resolve_model("vllm/m", base_url=urls), requests, cache)
            assert engine.stats.cache_hits == 40 and engine.stats.sent == 0
        assert c.request_count == 0
        # Keyed on the first URL: put another server first and it is another scope.
        _, engine = run_engine(
            resolve_model("vllm/m", base_url=[c.base_url, a.base_url]), requests, cache
        )
        assert engine.stats.cache_hits == 0
    assert {r.request.id: r.response.texts for r in first if r.response} == {
        r.request.id: r.response.texts for r in again if r.response
    }


def test_fanout_with_two_base_urls_records_per_replica_counts(tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        "".join(json.dumps({"id": f"q{i}", "prompt": f"p{i}"}) + "\n" for i in range(30))
    )
    with OpenAIServer() as a, OpenAIServer() as b:
        result = CliRunner().invoke(
            cli,
            ["fanout", str(prompts), "--model", "vllm/test-model", "--base-url", a.base_url,
             "--base-url", b.base_url, "--runs-dir", str(tmp_path / "runs")],
            catch_exceptions=False,
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    run_dir = Path(result.stdout.strip().splitlines()[-1].removeprefix("run: "))
    manifest = read_manifest(run_dir)
    replicas = manifest.endpoint["replicas"]
    assert [r["base_url"] for r in replicas] == [a.base_url, b.base_url]
    assert sum(r["answered"] for r in replicas) == 30 and all(r["sent"] > 0 for r in replicas)
    assert manifest.endpoint["base_urls"] == [a.base_url, b.base_url]
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["base_url"] == [a.base_url, b.base_url]


def test_every_replica_down_from_the_start_stops_the_run(cache: ResponseCache) -> None:
    with OpenAIServer() as a, OpenAIServer() as b:
        urls = [a.base_url, b.base_url]
    provider = resolve_model("vllm/m", base_url=urls)
    with pytest.raises(RunAbortedError) as caught:
        run_engine(provider, [chat(f"q{i}", str(i)) for i in range(4)], cache)
    assert isinstance(caught.value.cause, EndpointUnreachableError)
