"""OpenAI's reasoning models: known by name, asked what they accept, over the real wire.

The loopback server, started with ``reasoning_tokens``, answers chat as OpenAI's
reasoning models do: it refuses ``max_tokens``, ``temperature``/``top_p`` other
than 1, logprobs and ``stop`` with OpenAI's 400s, and spends that many tokens of
``max_completion_tokens`` on hidden reasoning before the answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from biasaudit.engine.core import Engine, EngineSettings, RequestResult
from biasaudit.errors import RunAbortedError, UsageError
from biasaudit.kinds.registry import plan_requests
from biasaudit.pricing import estimate_cost, load_prices
from biasaudit.probes import NextWordProbe, PointwiseProbe
from biasaudit.providers import (
    Capabilities,
    ModelRequest,
    Provider,
    openai_reasoning_model,
    resolve_model,
)
from biasaudit.providers.openai_compatible import OpenAICompatibleProvider
from biasaudit.spec import parse_spec
from biasaudit.store.cache import ResponseCache
from tests.servers import AnthropicServer, Choice, OpenAIServer

from .fakes import chat

REASONING = 300  # tokens the server's model reasons for


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    answer = Choice(text="Yes. The candidate fits the posting.")
    with OpenAIServer(reasoning_tokens=REASONING, responder=lambda body, path: [answer]) as srv:
        yield srv


@pytest.fixture
def openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def openai_at(server: OpenAIServer, model: str, capabilities: Capabilities) -> Provider:
    """``openai/MODEL`` as built for OpenAI's API, sending to the loopback server instead."""
    return OpenAICompatibleProvider(
        "openai",
        model,
        base_url=server.base_url,
        api_key="sk-test",
        capabilities=capabilities,
        uses_max_completion_tokens=True,
    )


def run(
    provider: Provider, requests: list[ModelRequest], cache: ResponseCache | None = None
) -> list[RequestResult]:
    async def go() -> list[RequestResult]:
        try:
            engine = Engine(provider, cache, EngineSettings(backoff_max=0.01))
            return [r async for r in engine.run(requests)]
        finally:
            await provider.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("model", "reasoning"),
    [
        ("o1", True),
        ("o1-mini", True),
        ("o3", True),
        ("o3-mini-2025-01-31", True),
        ("o3-pro", True),
        ("o4-mini", True),
        ("ft:o4-mini-2025-04-16:acme::abc123", True),
        ("gpt-5", True),
        ("gpt-5-mini", True),
        ("gpt-5.1", True),
        ("gpt-5-codex", True),
        ("codex-mini-latest", True),
        ("gpt-5-chat-latest", False),
        ("gpt-5.1-chat-latest", False),
        ("gpt-4o", False),
        ("gpt-4.1-mini", False),
        ("omni-moderation-latest", False),
        ("gpt-3.5-turbo-instruct", False),
    ],
)
def test_reasoning_models_are_known_by_name(model: str, reasoning: bool) -> None:
    assert openai_reasoning_model(model) is reasoning


def test_a_reasoning_model_takes_the_sampled_paths(openai_key: None) -> None:
    caps = resolve_model("openai/o4-mini").capabilities
    assert (caps.logprobs, caps.n, caps.completions) == (False, False, False)
    assert caps.reasoning_tokens == 4096
    assert PointwiseProbe.for_endpoint({"Yes": 1.0, "No": 0.0}, caps).path == "samples"
    next_word = NextWordProbe.for_endpoint(caps)
    assert (next_word.path, next_word.via) == ("samples", "chat")
    # A chat model keeps its logprobs; behind --base-url openai/ is any compatible server.
    assert resolve_model("openai/gpt-4o").capabilities.reasoning_tokens is None
    assert resolve_model("openai/gpt-5-chat-latest").capabilities.logprobs is True
    behind = resolve_model("openai/o4-mini", base_url="http://127.0.0.1:9/v1")
    assert behind.capabilities.reasoning_tokens is None


def test_requests_are_shaped_as_the_api_takes_them(
    server: OpenAIServer, openai_key: None, cache: ResponseCache
) -> None:
    caps = resolve_model("openai/o4-mini").capabilities
    request = chat("q", "Fit?", max_tokens=3, temperature=1.0, n=3, seed=7, stop=["."])
    results = run(openai_at(server, "o4-mini", caps), [request], cache)
    [result] = results
    assert result.ok and result.response is not None, result.error
    # Three samples, three calls (no n); each answer cut at the stop sequence.
    assert result.response.texts == ("Yes",) * 3
    assert result.response.finish_reasons == ("stop",) * 3
    bodies = server.bodies()
    assert len(bodies) == 3
    for body in bodies:
        assert body["max_completion_tokens"] == 3 + 4096
        assert "temperature" not in body and "stop" not in body and "n" not in body
        assert body["seed"] == 7
    # The hidden reasoning is billed as output, and the run's usage says so.
    assert result.response.usage.output_tokens >= REASONING


def test_the_same_requests_without_the_adaptation_are_refused(server: OpenAIServer) -> None:
    """The server does refuse what a chat model's request would carry: the test has teeth."""
    plain = openai_at(server, "o4-mini", Capabilities(completions=False))
    [result] = run(plain, [chat("q", max_tokens=3, temperature=1.0, stop=["."])])
    assert not result.ok and "stop" in str(result.error)
    # Logprobs refused stop the run (every later request would meet the same refusal).
    with pytest.raises(RunAbortedError, match="logprobs"):
        run(
            openai_at(server, "o4-mini", Capabilities(completions=False)),
            [chat("q", max_tokens=3, logprobs=True, top_logprobs=5)],
        )


def test_reasoning_that_uses_the_whole_budget_is_an_empty_answer_not_a_crash(
    openai_key: None,
) -> None:
    answer = Choice(text="Yes")
    with OpenAIServer(reasoning_tokens=5000, responder=lambda body, path: [answer]) as srv:
        caps = resolve_model("openai/o3").capabilities
        [result] = run(openai_at(srv, "o3", caps), [chat("q", max_tokens=3)])
    assert result.ok and result.response is not None
    assert result.response.texts == ("",) and result.response.finish_reasons == ("length",)


@pytest.mark.parametrize("params", [{"temperature": 0.3}, {"temperature": 0.0}, {"top_p": 0.9}])
def test_other_temperatures_are_refused_before_anything_is_sent(
    server: OpenAIServer, openai_key: None, params: dict[str, float]
) -> None:
    caps = resolve_model("openai/gpt-5").capabilities
    with pytest.raises(UsageError, match=r"reasoning model.*temperature 1"):
        run(openai_at(server, "gpt-5", caps), [chat("ok", max_tokens=3), chat("q", **params)])
    assert server.request_count == 0


def test_reasoning_effort_is_sent_and_keyed(server: OpenAIServer, openai_key: None) -> None:
    caps = resolve_model("openai/gpt-5-mini").capabilities
    provider = openai_at(server, "gpt-5-mini", caps)
    low, default = chat("a", max_tokens=3, reasoning_effort="low"), chat("b", max_tokens=3)
    assert all(r.ok for r in run(provider, [low, default]))
    efforts = sorted(str(body.get("reasoning_effort")) for body in server.bodies())
    assert efforts == ["None", "low"]
    key = {"provider": "openai", "model": "gpt-5-mini", "base_url": None}
    assert low.cache_key(**key) != default.cache_key(**key)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reasoning_effort"):
        chat("c", reasoning_effort="extreme")


def test_anthropic_refuses_reasoning_effort_before_sending(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with AnthropicServer() as srv:
        provider = resolve_model("anthropic/claude-sonnet-4", base_url=srv.base_url)
        with pytest.raises(UsageError, match="reasoning_effort"):
            run(provider, [chat("q", max_tokens=3, reasoning_effort="low")])
        assert srv.request_count == 0


def test_the_cost_estimate_counts_the_reasoning_allowance(openai_key: None) -> None:
    requests = [chat(f"q{i}", "Fit?", max_tokens=3) for i in range(10)]
    estimate = estimate_cost(resolve_model("openai/o4-mini"), requests, prices=load_prices())
    assert estimate.output_tokens == 10 * (3 + 4096)
    assert "4096 tokens of reasoning per request" in " ".join(estimate.lines())
    chat_model = estimate_cost(resolve_model("openai/gpt-4o"), requests, prices=load_prices())
    assert chat_model.output_tokens == 30


@pytest.mark.parametrize(
    "task",
    [
        {"task": "resume-screening", "jobs": "hr-specialist", "names_per_group": 2},
        {"task": "resume-screening", "jobs": "hr-specialist", "method": "pairwise", "pools": 1},
        {"task": "grade-score", "items": "demo"},
        {"task": "ruted", "contexts": "standard,bedtime", "replicates": 2},
    ],
)
def test_every_audit_asks_the_reasoning_effort_it_is_given(task: dict[str, object]) -> None:
    provider = resolve_model("sim/biased")
    spec = parse_spec({**task, "model": "sim/biased", "reasoning_effort": "minimal"})
    requests = list(plan_requests(spec, provider))
    assert requests and {r.params.reasoning_effort for r in requests} == {"minimal"}
    unset = list(plan_requests(parse_spec({**task, "model": "sim/biased"}), provider))
    assert {r.params.reasoning_effort for r in unset} == {None}
    assert [r.id for r in unset] == [r.id for r in requests]
