"""Providers through the official SDKs against real loopback servers speaking the wire formats."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from biasaudit.engine.core import Engine, EngineSettings, RequestResult
from biasaudit.errors import (
    AuthenticationFailedError,
    EndpointUnreachableError,
    LogprobsUnavailableError,
    QuotaExhaustedError,
    RunAbortedError,
)
from biasaudit.probes import NextWordProbe
from biasaudit.providers import ModelRequest, Provider, resolve_model
from biasaudit.store.cache import ResponseCache
from tests.servers import AnthropicServer, Choice, Fault, OpenAIServer

from .fakes import chat


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as server:
        yield server


def vllm(server: OpenAIServer, **kw: object) -> Provider:
    return resolve_model("vllm/test-model", base_url=server.base_url, **kw)  # type: ignore[arg-type]


def run(
    provider: Provider,
    requests: list[ModelRequest],
    cache: ResponseCache | None,
    **settings: object,
) -> list[RequestResult]:
    async def go() -> list[RequestResult]:
        try:
            engine = Engine(provider, cache, EngineSettings(**{"backoff_max": 0.01, **settings}))  # type: ignore[arg-type]
            return [r async for r in engine.run(requests)]
        finally:
            await provider.aclose()

    return asyncio.run(go())


def one(
    provider: Provider,
    request: ModelRequest,
    cache: ResponseCache | None = None,
    **settings: object,
) -> RequestResult:
    [result] = run(provider, [request], cache, **settings)
    return result


def completion(request_id: str, prompt: str, **params: object) -> ModelRequest:
    return ModelRequest.model_validate({"id": request_id, "prompt": prompt, "params": params})


# --- OpenAI-compatible: shapes -------------------------------------------------------


def test_chat_logprobs_are_normalised(openai_server: OpenAIServer) -> None:
    result = one(
        vllm(openai_server), chat("q", "Yes or No?", max_tokens=1, logprobs=True, top_logprobs=5)
    )
    assert result.ok and result.response is not None
    response = result.response
    assert response.text == "Yes" and response.model_version == "test-model"
    assert response.system_fingerprint == "fp_test1" and response.request_id
    [first] = response.logprobs or [None]
    assert first is not None and first.token == "Yes"
    assert [tok for tok, _ in first.top][:2] == ["Yes", "No"] and len(first.top) == 5
    assert response.usage.input_tokens > 0
    body = openai_server.bodies("/v1/chat/completions")[0]
    assert body["logprobs"] is True and body["top_logprobs"] == 5 and body["max_tokens"] == 1


@pytest.mark.parametrize("style", ["legacy", "chat"])
def test_completions_logprobs_in_both_shapes(style: str) -> None:
    with OpenAIServer(completions_logprobs_style=style) as server:
        result = one(vllm(server), completion("c", "The nurse said", max_tokens=1, logprobs=3))
    assert result.response is not None
    [first] = result.response.logprobs or [None]
    assert first is not None and first.token == "Yes" and len(first.top) >= 3
    assert dict(first.top)["Yes"] == pytest.approx(-0.4)


def test_an_echoed_prompt_comes_back_with_its_tokens_logprobs_and_offsets() -> None:
    def score(before: str, token: str) -> float:
        return -len(before) / 10  # a logprob that says where the token stood

    with OpenAIServer(echo_logprob=score) as server:
        result = one(vllm(server), completion("c", "The nurse is she", max_tokens=1, echo=True))
    body = server.bodies()[0]
    assert body["echo"] is True and body["logprobs"] == 1
    assert result.response is not None and result.response.logprobs is None
    echoed = result.response.echoed or ()
    assert [(t.token, t.offset) for t in echoed] == [
        ("The", 0),
        (" nurse", 3),
        (" is", 9),
        (" she", 12),
    ]  # only the prompt's tokens: the answer's are left out
    assert echoed[0].logprob is None and echoed[3].logprob == pytest.approx(-1.2)


def test_an_answer_that_does_not_echo_the_prompt_is_no_continuation_score() -> None:
    from biasaudit.providers.openai_compatible import _echoed

    answer_only = {"tokens": [" a"], "token_logprobs": [-0.5], "text_offset": [16]}
    with pytest.raises(LogprobsUnavailableError, match="did not echo"):
        _echoed(answer_only, "The nurse is she")  # type: ignore[arg-type]
    with pytest.raises(LogprobsUnavailableError, match="did not echo"):
        _echoed(None, "The nurse is she")
    # llama.cpp's content[] shape carries no offsets: they are rebuilt from the tokens.
    content = {"content": [{"token": "The", "logprob": -1.0}, {"token": " nurse", "logprob": -2.0}]}
    found = _echoed(content, "The nurse")  # type: ignore[arg-type]
    assert [(t.token, t.offset, t.logprob) for t in found] == [
        ("The", 0, -1.0),
        (" nurse", 3, -2.0),
    ]


def test_n_choices_come_back_in_order(openai_server: OpenAIServer) -> None:
    result = one(vllm(openai_server), chat("q", "Yes or No?", n=4, temperature=1.0, max_tokens=1))
    assert result.response is not None and len(result.response.texts) == 4
    assert openai_server.bodies()[0]["n"] == 4


def test_planted_probabilities_reach_the_response() -> None:
    def responder(body: dict, path: str) -> list[Choice]:
        content = body["messages"][-1]["content"]
        return [Choice.binary(0.9 if "Emily" in content else 0.3)]

    with OpenAIServer(responder=responder) as server:
        results = run(
            vllm(server),
            [
                chat("e", "Emily", logprobs=True, top_logprobs=2),
                chat("j", "Jamal", logprobs=True, top_logprobs=2),
            ],
            None,
        )
    p_yes = {
        r.request.id: dict(r.response.logprobs[0].top)["Yes"]
        for r in results
        if r.response and r.response.logprobs and r.response.logprobs[0]
    }
    assert p_yes["e"] == pytest.approx(-0.1053, abs=1e-3) and p_yes["j"] == pytest.approx(
        -1.204, abs=1e-3
    )


def test_vllm_top_logprobs_cap_is_refused_before_sending(openai_server: OpenAIServer) -> None:
    with pytest.raises(LogprobsUnavailableError, match="at most 20"):
        one(vllm(openai_server), chat("q", logprobs=True, top_logprobs=50))
    assert openai_server.request_count == 0


def test_server_rejecting_logprobs_stops_the_run_clearly() -> None:
    with OpenAIServer(logprobs_supported=False) as server:
        with pytest.raises(RunAbortedError) as caught:
            run(
                vllm(server),
                [chat(f"q{i}", str(i), logprobs=True) for i in range(5)],
                None,
                concurrency=1,
            )
        assert isinstance(caught.value.cause, LogprobsUnavailableError)
        assert "logprobs" in str(caught.value) and server.request_count == 1


def test_groq_is_known_not_to_give_logprobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "gsk-test")
    provider = resolve_model("groq/llama-3.1-8b-instant")
    with pytest.raises(LogprobsUnavailableError, match="cannot return logprobs"):
        provider.check(chat("q", logprobs=True))


@pytest.mark.parametrize(
    ("model", "completions"),
    [
        ("gpt-4o-mini", False),
        ("gpt-3.5-turbo-instruct", True),
        ("davinci-002", True),
        ("ft:babbage-002:acme::abc123", True),
    ],
)
def test_openai_chat_models_have_no_legacy_completions(
    monkeypatch: pytest.MonkeyPatch, model: str, completions: bool
) -> None:
    """OpenAI's API 404s /v1/completions for chat models: probes must choose chat there."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    provider = resolve_model(f"openai/{model}")
    assert provider.capabilities.completions is completions
    # RUTEd's next-word test (--next-word auto) follows: completions logprobs or chat logprobs.
    probe = NextWordProbe.for_endpoint(provider.capabilities)
    assert probe.via == ("completions" if completions else "chat")
    # Behind a --base-url, openai/ is any OpenAI-compatible server: completions stay on.
    assert resolve_model(
        f"openai/{model}", base_url="http://127.0.0.1:9/v1"
    ).capabilities.completions


def test_empty_content_is_an_answer_not_a_crash(
    openai_server: OpenAIServer, cache: ResponseCache
) -> None:
    openai_server.inject(Fault.empty(null_content=True))
    result = one(vllm(openai_server), chat("q"), cache)
    assert result.ok and result.response is not None and result.response.text == ""


# --- OpenAI-compatible: failures and retries -----------------------------------------


def test_429_retry_after_is_honoured_then_answered(
    openai_server: OpenAIServer, cache: ResponseCache
) -> None:
    openai_server.inject(Fault.rate_limit(retry_after_ms=30), times=2)
    result = one(vllm(openai_server), chat("q"), cache)
    assert result.ok and result.attempts == 3 and openai_server.request_count == 3


@pytest.mark.parametrize(
    "fault",
    [
        Fault.server_error(500),
        Fault.server_error(503),
        Fault.http(408),
        Fault.drop(),
        Fault.malformed(),
        Fault.non_json(200),
        Fault.non_json(502),
    ],
    ids=["500", "503", "408", "drop", "malformed", "html-200", "html-502"],
)
def test_transient_failures_are_retried(
    openai_server: OpenAIServer, cache: ResponseCache, fault: Fault
) -> None:
    openai_server.inject(fault)
    result = one(vllm(openai_server), chat("q"), cache)
    assert result.ok and result.attempts == 2, result.error
    assert len(cache) == 1


def test_timeouts_are_retried(openai_server: OpenAIServer, cache: ResponseCache) -> None:
    openai_server.inject(Fault.timeout(2.0))
    result = one(vllm(openai_server), chat("q"), cache, timeout=0.3)
    assert result.ok and result.attempts == 2


def test_non_json_is_reported_when_it_persists(
    openai_server: OpenAIServer, cache: ResponseCache
) -> None:
    openai_server.fail_all(Fault.non_json(200))
    result = one(vllm(openai_server), chat("q"), cache, max_retries=2)
    assert result.error is not None and "not JSON" in result.error and "text/html" in result.error
    assert result.attempts == 3 and len(cache) == 0


def test_a_body_cut_short_is_named_as_cut_where_it_ends(
    openai_server: OpenAIServer, cache: ResponseCache
) -> None:
    openai_server.fail_all(Fault.malformed())
    result = one(vllm(openai_server), chat("q"), cache, max_retries=1)
    assert (
        result.error is not None and "not JSON (application/json; EOF while parsing" in result.error
    )
    assert "at line 1 column" in result.error and len(cache) == 0


def test_a_base_url_without_the_api_path_is_named_with_the_path_it_lacks() -> None:
    with OpenAIServer() as server:
        provider = resolve_model("vllm/m", base_url=server.root_url)
        with pytest.raises(RunAbortedError) as caught:
            run(provider, [chat("q")], None)
    message = str(caught.value)
    assert "not found (HTTP 404)" in message and "the base URL has no path" in message
    assert f"under /v1, as {server.root_url}/v1" in message


def test_400_is_not_retried(openai_server: OpenAIServer) -> None:
    openai_server.inject(Fault.http(400, message="bad parameter"))
    result = one(vllm(openai_server), chat("q"), None)
    assert result.error == "HTTP 400: bad parameter" and result.attempts == 1


def test_insufficient_quota_stops_the_run(openai_server: OpenAIServer) -> None:
    openai_server.fail_all(Fault.quota())
    with pytest.raises(RunAbortedError) as caught:
        run(vllm(openai_server), [chat(f"q{i}", str(i)) for i in range(3)], None, concurrency=1)
    assert isinstance(caught.value.cause, QuotaExhaustedError)
    assert openai_server.request_count == 1


def test_wrong_key_stops_the_run_and_the_key_never_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-wrong-canary-0123456789")
    with OpenAIServer(require_api_key="sk-right") as server:
        provider = resolve_model("vllm/m", base_url=server.base_url, api_key_env="MY_KEY")
        with pytest.raises(RunAbortedError) as caught:
            run(provider, [chat("q")], None)
    assert isinstance(caught.value.cause, AuthenticationFailedError)
    assert "sk-wrong-canary" not in str(caught.value)


def test_unreachable_server_stops_quickly(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        url = server.base_url
    provider = resolve_model("vllm/m", base_url=url)
    with pytest.raises(RunAbortedError) as caught:
        run(provider, [chat(f"q{i}", str(i)) for i in range(20)], None)
    assert isinstance(caught.value.cause, EndpointUnreachableError)
    # The reason once, from the socket, with the likely fix: not the SDKs' wrappers.
    message = str(caught.value)
    assert f"cannot reach {url}: connection refused (" in message
    assert "check that the server is running" in message and "Timeout" not in message


# aiohttp's own warnings about the proxy credentials it is handed, not biasaudit's.
@pytest.mark.filterwarnings("ignore:BasicAuth is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:The 'proxy_auth' parameter is deprecated:DeprecationWarning")
def test_an_unreachable_proxy_is_named_without_its_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with OpenAIServer() as server:
        closed = server.base_url.rsplit(":", 1)[1].split("/")[0]
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", f"http://me:proxy-secret-0123@127.0.0.1:{closed}")
    provider = resolve_model("vllm/m", base_url="http://model.invalid:8000/v1")
    with pytest.raises(RunAbortedError) as caught:
        run(provider, [chat("q")], None)
    message = str(caught.value)
    assert f"connection refused at the proxy http://127.0.0.1:{closed} (from http_proxy)" in message
    assert "list the host in NO_PROXY" in message and "proxy-secret" not in message


def test_repeated_429s_lower_concurrency_and_all_complete(
    openai_server: OpenAIServer, cache: ResponseCache
) -> None:
    openai_server.latency = 0.01
    openai_server.inject(Fault.rate_limit(retry_after_ms=20), times=6)
    requests = [chat(f"q{i}", str(i)) for i in range(80)]
    engine_results = run(vllm(openai_server), requests, cache, concurrency=16)
    assert all(r.ok for r in engine_results) and len(cache) == 80


# --- Anthropic ------------------------------------------------------------------------


def claude(server: AnthropicServer, monkeypatch: pytest.MonkeyPatch) -> Provider:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-canary-abcdef123456")
    return resolve_model("anthropic/claude-test", base_url=server.base_url)


def test_anthropic_messages(
    anthropic_server: AnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = ModelRequest.model_validate(
        {
            "id": "a",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Yes or No?"},
            ],
            "params": {"max_tokens": 5, "temperature": 1.5},
        }
    )
    result = one(claude(anthropic_server, monkeypatch), request)
    assert result.ok and result.response is not None
    assert result.response.text == "Yes" and result.response.model_version == "claude-test"
    assert result.response.request_id and result.response.logprobs is None
    body = anthropic_server.bodies()[0]
    assert body["system"] == "Be brief." and body["messages"] == [
        {"role": "user", "content": "Yes or No?"}
    ]
    assert body["temperature"] == 1.0 and body["max_tokens"] == 5


def test_anthropic_529_is_retried(
    anthropic_server: AnthropicServer, monkeypatch: pytest.MonkeyPatch, cache: ResponseCache
) -> None:
    anthropic_server.inject(Fault.overloaded(), times=2)
    result = one(claude(anthropic_server, monkeypatch), chat("a"), cache)
    assert result.ok and result.attempts == 3


def test_anthropic_n_becomes_separate_cached_calls(
    anthropic_server: AnthropicServer, monkeypatch: pytest.MonkeyPatch, cache: ResponseCache
) -> None:
    result = one(claude(anthropic_server, monkeypatch), chat("a", n=3, temperature=1.0), cache)
    assert result.response is not None and len(result.response.texts) == 3
    assert anthropic_server.request_count == 3 and len(cache) == 3
    assert all("n" not in body for body in anthropic_server.bodies())


def test_anthropic_refuses_logprobs_before_sending(
    anthropic_server: AnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(LogprobsUnavailableError):
        one(claude(anthropic_server, monkeypatch), chat("a", logprobs=True))
    assert anthropic_server.request_count == 0


def test_the_sdk_client_resolves_every_url_as_the_sdk_does() -> None:
    """The provider's client remembers parsed absolute URLs; the URLs are the SDK's own."""
    import openai

    provider = resolve_model("vllm/test-model", base_url="http://127.0.0.1:9/v1")
    client = provider._sdk()  # type: ignore[attr-defined]
    plain = openai.AsyncOpenAI(api_key="x", base_url="http://127.0.0.1:9/v1")
    urls = [
        "http://127.0.0.1:9/v1/chat/completions",
        "https://api.example.com/v1/files?purpose=batch",
        "chat/completions",
        "/batches",
    ]
    for url in urls * 2:  # the second pass comes from the memo
        assert str(client._prepare_url(url)) == str(plain._prepare_url(url))
    assert client._prepare_url(urls[0]) is client._prepare_url(urls[0]), "parsed once"
    client.base_url = "http://127.0.0.1:9/other/"  # relative URLs follow the base URL
    plain.base_url = "http://127.0.0.1:9/other/"
    assert str(client._prepare_url("batches")) == str(plain._prepare_url("batches"))
    assert isinstance(client, openai.AsyncOpenAI)
