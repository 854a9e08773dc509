"""Legacy-completions prompts sent several to a request, each still its own answer and cache entry."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from biasaudit.engine.core import Engine, EngineSettings, RequestResult
from biasaudit.errors import FatalProviderError, MalformedResponseError
from biasaudit.providers import ModelRequest, Provider, resolve_model
from biasaudit.providers._prompt_batch import split_choices
from biasaudit.providers._wire import OPENAI_BODY, read_wire
from biasaudit.store.cache import ResponseCache
from tests.servers import Choice, Fault, OpenAIServer

from .conftest import no_sleep


def echo(body: dict[str, Any], path: str) -> list[Choice]:
    """Each choice names its prompt and its place among the prompt's n choices."""
    n = body.get("n") or 1
    return [Choice(f"{body['prompt']}#{j}", [{f"{body['prompt']}": -0.1}]) for j in range(n)]


def completion(i: int, **params: object) -> ModelRequest:
    return ModelRequest.model_validate({"id": f"q{i}", "prompt": f"p{i}", "params": params})


def run(
    provider: Provider, requests: list[ModelRequest], cache: ResponseCache | None, **settings: Any
) -> tuple[list[RequestResult], Engine]:
    engine = Engine(provider, cache, EngineSettings(**settings), sleep=no_sleep)

    async def go() -> list[RequestResult]:
        try:
            return [r async for r in engine.run(requests)]
        finally:
            await provider.aclose()

    return asyncio.run(go()), engine


def texts(results: list[RequestResult]) -> dict[str, tuple[str, ...]]:
    return {r.request.id: r.response.texts for r in results if r.response is not None}


def test_vllm_sends_prompts_in_batches_and_each_gets_its_own_answer(cache: ResponseCache) -> None:
    requests = [completion(i, max_tokens=1, logprobs=1) for i in range(100)]
    with OpenAIServer(responder=echo, latency=0.01) as server:
        provider = resolve_model("vllm/test-model", base_url=server.base_url)
        assert provider.capabilities.prompt_batch == 32
        results, engine = run(provider, requests, cache, concurrency=64)
        bodies = server.bodies("/v1/completions")
    assert all(r.ok for r in results) and len(results) == 100
    assert texts(results) == {f"q{i}": (f"p{i}#0",) for i in range(100)}
    assert all(r.response and r.response.logprobs and r.response.logprobs[0] for r in results), (
        "logprobs follow their prompt"
    )
    assert len(bodies) <= 8 and max(len(b["prompt"]) for b in bodies) == 32
    assert sum(len(b["prompt"]) if isinstance(b["prompt"], list) else 1 for b in bodies) == 100
    assert engine.stats.sent == 100 and len(cache) == 100, "one engine request per prompt"
    usage = sum(r.response.usage.input_tokens for r in results if r.response)
    assert usage == engine.stats.input_tokens > 0


def test_n_choices_are_split_back_by_index(cache: ResponseCache) -> None:
    requests = [completion(i, n=3, temperature=1.0, max_tokens=2) for i in range(10)]
    with OpenAIServer(responder=echo) as server:
        results, _ = run(resolve_model("vllm/m", base_url=server.base_url), requests, cache)
        assert server.request_count < 10
    assert texts(results) == {f"q{i}": tuple(f"p{i}#{j}" for j in range(3)) for i in range(10)}


def test_batched_and_single_answers_share_cache_entries(cache: ResponseCache) -> None:
    requests = [completion(i, max_tokens=1) for i in range(20)]
    with OpenAIServer(responder=echo) as server:
        batched, _ = run(resolve_model("vllm/m", base_url=server.base_url), requests, cache)
        single = resolve_model("llamacpp/m", base_url=server.base_url)
        assert single.capabilities.prompt_batch == 1
        sent_before = server.request_count
        one_each, _ = run(single, requests, None)
        assert server.request_count == sent_before + 20
        again, hits = run(resolve_model("vllm/m", base_url=server.base_url), requests, cache)
    assert texts(batched) == texts(one_each) == texts(again)
    assert hits.stats.cache_hits == 20 and hits.stats.sent == 0


def test_different_parameters_never_share_a_batch(cache: ResponseCache) -> None:
    requests = [completion(i, max_tokens=1 + i % 2) for i in range(10)]
    with OpenAIServer(responder=echo) as server:
        results, _ = run(resolve_model("vllm/m", base_url=server.base_url), requests, cache)
        bodies = server.bodies("/v1/completions")
    assert len(bodies) == 2 and {b["max_tokens"] for b in bodies} == {1, 2}
    assert texts(results) == {f"q{i}": (f"p{i}#0",) for i in range(10)}


def test_a_failed_batch_is_retried_prompt_by_prompt(cache: ResponseCache) -> None:
    requests = [completion(i, max_tokens=1) for i in range(12)]
    with OpenAIServer(responder=echo) as server:
        server.inject(Fault.server_error(503))
        results, engine = run(resolve_model("vllm/m", base_url=server.base_url), requests, cache)
    assert all(r.ok for r in results) and engine.stats.retries == 12
    assert texts(results) == {f"q{i}": (f"p{i}#0",) for i in range(12)}


def test_chat_requests_are_never_batched(cache: ResponseCache) -> None:
    chats = [
        ModelRequest.model_validate(
            {"id": f"c{i}", "messages": [{"role": "user", "content": f"x{i}"}]}
        )
        for i in range(5)
    ]
    with OpenAIServer() as server:
        run(resolve_model("vllm/m", base_url=server.base_url), chats, cache)
        assert server.request_count == 5


def test_split_choices_shares_usage_and_rejects_a_wrong_count() -> None:
    body = read_wire(
        OPENAI_BODY,
        {
            "model": "m",
            "choices": [{"index": i, "text": str(i)} for i in reversed(range(6))],
            "usage": {"prompt_tokens": 7, "completion_tokens": 6},
        },
    )
    parts = split_choices(body, prompts=3, n=2)
    assert [[c["text"] for c in sorted(p["choices"], key=lambda c: c["index"])] for p in parts] == [
        ["0", "1"],
        ["2", "3"],
        ["4", "5"],
    ]
    assert [p["usage"]["prompt_tokens"] for p in parts] == [3, 2, 2]
    assert sum(p["usage"]["completion_tokens"] for p in parts) == 6
    with pytest.raises(FatalProviderError, match="does not take a list of prompts"):
        split_choices(body, prompts=4, n=2)


@pytest.mark.parametrize(
    "indices", [[0, 1, 2, 3, 4, 9], [0, 0, 2, 3, 4, 5]], ids=["out-of-range", "repeated"]
)
def test_split_choices_with_bad_indices_is_a_malformed_answer(indices: list[int]) -> None:
    body = read_wire(OPENAI_BODY, {"choices": [{"index": i, "text": str(i)} for i in indices]})
    with pytest.raises(MalformedResponseError):
        split_choices(body, prompts=3, n=2)
