"""Fan-out shared among worker processes: same answers, one request each, fatal errors kept."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.engine import worker_pool
from biasaudit.engine.core import MIN_REQUESTS_PER_WORKER, Engine, EngineSettings, RequestResult
from biasaudit.errors import AuthenticationFailedError, RunAbortedError
from biasaudit.providers import ModelRequest, resolve_model
from biasaudit.store.cache import ResponseCache
from biasaudit.store.runs import read_manifest
from tests.servers import OpenAIServer

from .fakes import chat

N = 2 * MIN_REQUESTS_PER_WORKER + 10


def run(
    requests: list[ModelRequest], base_url: str, cache: ResponseCache, **settings: object
) -> tuple[list[RequestResult], Engine]:
    provider = resolve_model(
        "vllm/test-model", base_url=base_url, api_key_env=settings.pop("api_key_env", None)
    )  # type: ignore[arg-type]
    engine = Engine(provider, cache, EngineSettings(**settings))  # type: ignore[arg-type]

    async def go() -> list[RequestResult]:
        try:
            return [r async for r in engine.run(requests)]
        finally:
            await provider.aclose()

    return asyncio.run(go()), engine


def test_two_workers_answer_everything_once(cache: ResponseCache) -> None:
    requests = [
        chat(f"q{i}", f"prompt {i}", max_tokens=1, logprobs=True, top_logprobs=3) for i in range(N)
    ]
    with OpenAIServer() as server:
        results, engine = run(requests, server.base_url, cache, workers=2, concurrency=16)
        received = server.count_by(lambda r: r.body["messages"][0]["content"] if r.body else None)
    assert sorted(r.request.id for r in results) == sorted(r.id for r in requests)
    assert all(r.ok and r.response and r.response.logprobs for r in results)
    assert set(received.values()) == {1} and len(received) == N
    assert engine.stats.sent == N and engine.stats.model_versions == {"test-model": N}
    assert len(cache) == N, "workers commit every answer to the shared cache"


def test_workers_and_one_process_give_the_same_answers(tmp_path: Path) -> None:
    requests = [chat(f"q{i}", f"prompt {i}", n=2, temperature=1.0, seed=i) for i in range(N)]
    with OpenAIServer() as server:
        with ResponseCache(tmp_path / "a.sqlite") as one_cache:
            single, _ = run(requests, server.base_url, one_cache)
        with ResponseCache(tmp_path / "b.sqlite") as many_cache:
            pooled, _ = run(requests, server.base_url, many_cache, workers=3)

    def answers(results: list[RequestResult]) -> dict[str, tuple[object, ...]]:
        return {r.request.id: (r.response.texts, r.response.usage) for r in results if r.response}

    assert len(answers(pooled)) == N and answers(pooled) == answers(single)


def test_a_fatal_error_in_a_worker_stops_the_run(
    cache: ResponseCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKER_KEY", "sk-wrong-key-123456")
    requests = [chat(f"q{i}", f"prompt {i}") for i in range(N)]
    with (
        OpenAIServer(require_api_key="sk-right") as server,
        pytest.raises(RunAbortedError) as caught,
    ):
        run(requests, server.base_url, cache, workers=2, api_key_env="WORKER_KEY")
    assert isinstance(caught.value.cause, AuthenticationFailedError)
    assert "sk-wrong-key" not in str(caught.value)


def test_small_runs_stay_in_one_process(cache: ResponseCache) -> None:
    with OpenAIServer() as server:
        results, engine = run(
            [chat(f"q{i}", str(i)) for i in range(20)], server.base_url, cache, workers=4
        )
    assert len(results) == 20 and engine.stats.sent == 20


def test_the_parent_sends_a_share_and_one_child_per_extra_worker(
    cache: ResponseCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[dict[str, object]] = []
    real_init = worker_pool.WorkerProcess.__init__

    def counting_init(self: worker_pool.WorkerProcess, provider: dict[str, object]) -> None:
        started.append(provider)
        real_init(self, provider)

    monkeypatch.setattr(worker_pool.WorkerProcess, "__init__", counting_init)
    n = 3 * MIN_REQUESTS_PER_WORKER
    requests = [chat(f"q{i}", f"prompt {i}") for i in range(n)]
    with OpenAIServer() as server:
        results, engine = run(requests, server.base_url, cache, workers=3, concurrency=30)
    assert len(started) == 2, "workers=3 is this process and two children"
    assert all(p["max_connections"] == 10 for p in started), "each process gets a third"
    assert len(results) == n and engine.stats.sent == n and len(cache) == n
    assert engine.stats.concurrency_limit == 30 and engine.stats.in_flight == 0


def test_prestarted_children_are_used_and_unused_ones_exit(
    cache: ResponseCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = [chat(f"q{i}", f"prompt {i}") for i in range(N)]
    with OpenAIServer() as server:
        worker_pool.prestart_for(
            "vllm/test-model", server.base_url, None, concurrency=16, workers=2
        )
        ready = list(worker_pool._prestarted)
        assert len(ready) == 1
        real_init = worker_pool.WorkerProcess.__init__
        fresh: list[object] = []

        def counting_init(self: worker_pool.WorkerProcess, provider: dict[str, object]) -> None:
            fresh.append(provider)
            real_init(self, provider)

        monkeypatch.setattr(worker_pool.WorkerProcess, "__init__", counting_init)
        results, engine = run(requests, server.base_url, cache, workers=2, concurrency=16)
        assert not fresh and not worker_pool._prestarted, "the waiting child did the work"
        assert len(results) == N and engine.stats.sent == N
        assert ready[0].popen.wait(timeout=30) == 0
        # A child started for other settings is not used: it reads end-of-file and exits.
        monkeypatch.setattr(worker_pool.WorkerProcess, "__init__", real_init)
        worker_pool.prestart_for(
            "vllm/other-model", server.base_url, None, concurrency=16, workers=2
        )
        (unused,) = worker_pool._prestarted
        run([chat(f"r{i}", f"other {i}") for i in range(N)], server.base_url, cache, workers=2)
        assert not worker_pool._prestarted
        assert unused.popen.wait(timeout=30) == 0
        assert server.count_by(lambda r: r.body and r.body.get("model"))["other-model"] == 0


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc (Linux)")
def test_a_prestarted_child_imports_its_sdk_before_its_requests_come() -> None:
    """Told only its provider, a child builds the SDK client while the parent gets ready."""
    with OpenAIServer() as server:
        worker_pool.prestart_for(
            "vllm/test-model", server.base_url, None, concurrency=16, workers=2
        )
        (child,) = worker_pool._prestarted
        maps = Path(f"/proc/{child.popen.pid}/maps")
        deadline = time.monotonic() + 30
        # aiohttp's compiled parser is mapped once the SDK's transport is imported.
        while "aiohttp" not in maps.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        loaded = "aiohttp" in maps.read_text()
        worker_pool._close_unused()
        assert child.popen.wait(timeout=30) == 0
    assert loaded, "the child waited for its requests before importing the SDK"
    assert server.requests == [], "getting ready sends nothing"


def test_fanout_command_with_workers_answers_each_prompt_once(tmp_path: Path) -> None:
    """The CLI starts its child before reading the prompts; the run is the same run."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": f"q {i}"}]}) + "\n"
            for i in range(N)
        )
    )
    with OpenAIServer() as server:
        args = ["fanout", str(prompts), "--model", "vllm/test-model", "--base-url"]
        args += [server.base_url, "--workers", "2", "--runs-dir", str(tmp_path / "runs")]
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        received = server.count_by(lambda r: r.body["messages"][0]["content"] if r.body else None)
    assert result.exit_code == 0, result.output
    assert len(received) == N and set(received.values()) == {1}
    run_dir = Path(result.output.strip().splitlines()[-1].removeprefix("run: "))
    manifest = read_manifest(run_dir)
    assert manifest.counts.sent == N and manifest.counts.failures == 0
    assert not worker_pool._prestarted


def test_a_child_that_dies_mid_run_costs_no_answer(
    cache: ResponseCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kill -9 the child partway: this process sends what it had not answered."""
    children: list[worker_pool.WorkerProcess] = []
    real_take = worker_pool.take

    def remembering_take(
        provider: dict[str, object], count: int
    ) -> list[worker_pool.WorkerProcess]:
        taken = real_take(provider, count)
        children.extend(taken)
        return taken

    monkeypatch.setattr(worker_pool, "take", remembering_take)
    requests = [chat(f"q{i}", f"prompt {i}") for i in range(N)]

    async def go(base_url: str) -> tuple[list[RequestResult], Engine]:
        provider = resolve_model("vllm/test-model", base_url=base_url)
        engine = Engine(provider, cache, EngineSettings(workers=2, concurrency=8))
        results: list[RequestResult] = []
        try:
            async for result in engine.run(requests):
                results.append(result)
                if len(results) == 40:
                    children[0].popen.kill()
            return results, engine
        finally:
            await provider.aclose()

    with OpenAIServer(latency=0.02) as server:
        results, engine = asyncio.run(go(server.base_url))
        received = server.count_by(lambda r: r.body["messages"][0]["content"] if r.body else None)
    assert children and children[0].popen.returncode == -9
    assert sorted(r.request.id for r in results) == sorted(r.id for r in requests)
    assert all(r.ok for r in results) and engine.stats.failures == 0
    assert len(received) == N, "every prompt reached the server"
    assert sum(received.values()) - N <= 8, "only what the child had in flight was asked twice"
    assert engine.stats.in_flight == 0
