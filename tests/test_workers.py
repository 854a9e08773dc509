"""Fan-out shared among worker processes: same answers, one request each, fatal errors kept."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from biasaudit.cache import ResponseCache
from biasaudit.engine import MIN_REQUESTS_PER_WORKER, Engine, EngineSettings, RequestResult
from biasaudit.errors import AuthenticationFailedError, RunAbortedError
from biasaudit.providers import ModelRequest, resolve_model
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
    with OpenAIServer(require_api_key="sk-right") as server, pytest.raises(RunAbortedError) as caught:
        run(requests, server.base_url, cache, workers=2, api_key_env="WORKER_KEY")
    assert isinstance(caught.value.cause, AuthenticationFailedError)
    assert "sk-wrong-key" not in str(caught.value)


def test_small_runs_stay_in_one_process(cache: ResponseCache) -> None:
    with OpenAIServer() as server:
        results, engine = run(
            [chat(f"q{i}", str(i)) for i in range(20)], server.base_url, cache, workers=4
        )
    assert len(results) == 20 and engine.stats.sent == 20
