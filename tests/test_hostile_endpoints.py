"""Endpoints that misbehave: the request fails or is retried, the run goes on, nothing bad is cached.

Each case runs against the loopback servers, through the official SDKs, on the
OpenAI-compatible and the Anthropic path alike.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from biasaudit.engine.core import Engine, EngineSettings, RequestResult
from biasaudit.errors import RunAbortedError, WaitTooLongError
from biasaudit.providers import ModelRequest, Provider, parse_retry_after, resolve_model
from biasaudit.store.cache import ResponseCache
from tests.servers import AnthropicServer, Choice, Fault, OpenAIServer

from .fakes import chat

Server = OpenAIServer | AnthropicServer


@pytest.fixture(params=["openai", "anthropic"])
def server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    cls = OpenAIServer if request.param == "openai" else AnthropicServer
    with cls() as running:
        yield running


def provider_for(server: Server) -> Provider:
    name = "vllm/m" if isinstance(server, OpenAIServer) else "anthropic/m"
    return resolve_model(name, base_url=server.base_url)


def run(
    server: Server, requests: list[ModelRequest], cache: ResponseCache | None, **settings: Any
) -> list[RequestResult]:
    provider = provider_for(server)

    async def go() -> list[RequestResult]:
        try:
            engine = Engine(provider, cache, EngineSettings(**{"backoff_max": 0.01, **settings}))
            return [r async for r in engine.run(requests)]
        finally:
            await provider.aclose()

    return asyncio.run(go())


def by_id(results: list[RequestResult]) -> dict[str, RequestResult]:
    return {r.request.id: r for r in results}


def three_prompts() -> list[ModelRequest]:
    return [chat(name, f"prompt {name}", max_tokens=5) for name in ("good1", "bad", "good2")]


# --- 1. a 200 of the wrong shape ----------------------------------------------------------


def _first_choice(body: dict[str, Any], **change: Any) -> dict[str, Any]:
    return {**body, "choices": [{**body["choices"][0], **change}]}


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _raw_field(name: str, raw: str) -> Callable[[dict[str, Any]], str]:
    """The normal body with ``name`` set to ``raw`` JSON text (NaN, 1e400, deep arrays)."""

    def reshape(body: dict[str, Any]) -> str:
        text = json.dumps({**body, name: "@@"})
        return text.replace('"@@"', raw)

    return reshape


def _usage_raw(field: str, raw: str) -> Callable[[dict[str, Any]], str]:
    def reshape(body: dict[str, Any]) -> str:
        return json.dumps({**body, "usage": {field: "@@"}}).replace('"@@"', raw)

    return reshape


WRONG_SHAPES_OPENAI: dict[str, Callable[[dict[str, Any]], object]] = {
    "choices-int": lambda b: {**b, "choices": [1]},
    "message-str": lambda b: _first_choice(b, message="Yes"),
    "content-5": lambda b: _first_choice(b, message={"role": "assistant", "content": 5}),
    "model-123": lambda b: {**b, "model": 123},
    "prompt-tokens-abc": lambda b: {**b, "usage": {"prompt_tokens": "abc"}},
    "prompt-tokens-nan": _usage_raw("prompt_tokens", "NaN"),
    "prompt-tokens-1e400": _usage_raw("prompt_tokens", "1e400"),
    "index-a": lambda b: _first_choice(b, index="a"),
    "deep-array": _raw_field("choices", _deep(100_000)),
    "not-an-object": lambda b: [b],
}
WRONG_SHAPES_ANTHROPIC: dict[str, Callable[[dict[str, Any]], object]] = {
    "content-5": lambda b: {**b, "content": 5},
    "model-123": lambda b: {**b, "model": 123},
    "input-tokens-abc": lambda b: {**b, "usage": {"input_tokens": "abc"}},
    "input-tokens-nan": _usage_raw("input_tokens", "NaN"),
    "output-tokens-1e400": _usage_raw("output_tokens", "1e400"),
    "block-text-5": lambda b: {**b, "content": [{"type": "text", "text": 5}]},
    "deep-array": _raw_field("content", _deep(100_000)),
    "not-an-object": lambda b: [b],
}


@pytest.mark.parametrize(
    ("provider_name", "case"),
    [("openai", case) for case in WRONG_SHAPES_OPENAI]
    + [("anthropic", case) for case in WRONG_SHAPES_ANTHROPIC],
)
def test_wrong_shape_fails_that_request_and_the_run_goes_on(
    provider_name: str, case: str, cache: ResponseCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    shapes = WRONG_SHAPES_OPENAI if provider_name == "openai" else WRONG_SHAPES_ANTHROPIC
    cls = OpenAIServer if provider_name == "openai" else AnthropicServer
    with cls() as server:
        # max_tokens large enough that the deep array is read, not refused for its size.
        requests = [chat(n, f"prompt {n}", max_tokens=4000) for n in ("good1", "bad", "good2")]
        server.fail_all(Fault.reshaped(shapes[case]), match="prompt bad")
        results = by_id(run(server, requests, cache, max_retries=2, concurrency=1))
    bad = results["bad"]
    assert bad.response is None and bad.attempts == 3
    assert bad.error is not None and bad.error_type == "MalformedResponseError"
    assert "the endpoint returned" in bad.error and len(bad.error) < 400
    assert results["good1"].ok and results["good2"].ok
    assert len(cache) == 2 and cache.get(bad.key) is None


def test_the_error_quotes_the_first_bytes_of_the_body(openai_server: OpenAIServer) -> None:
    openai_server.fail_all(Fault.reshaped(lambda b: {**b, "model": 123}))
    [result] = run(openai_server, [chat("q")], None, max_retries=0)
    assert result.error is not None and "model: Input should be a valid string" in result.error
    assert '\'{"id": "chatcmpl-' in result.error


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


# --- 2. an empty answer list is no answer ----------------------------------------------


@pytest.mark.parametrize(
    ("provider_name", "reshape"),
    [
        ("openai", lambda b: {**b, "choices": []}),
        ("anthropic", lambda b: {**b, "content": []}),
        ("anthropic", lambda b: {**b, "content": ["Yes"]}),
        ("anthropic", lambda b: {**b, "content": [{"type": "text"}]}),
    ],
    ids=[
        "openai-choices-empty",
        "anthropic-content-empty",
        "anthropic-content-str",
        "anthropic-text-missing",
    ],
)
def test_no_choices_or_no_content_is_a_failure_not_an_answer(
    provider_name: str, reshape: Any, cache: ResponseCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    cls = OpenAIServer if provider_name == "openai" else AnthropicServer
    with cls() as server:
        server.fail_all(Fault.reshaped(reshape))
        [result] = run(server, [chat("q")], cache, max_retries=1)
    assert result.response is None and result.error_type == "MalformedResponseError"
    assert len(cache) == 0


def test_anthropic_refusal_without_content_is_a_refusal(
    monkeypatch: pytest.MonkeyPatch, cache: ResponseCache
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    with AnthropicServer() as server:
        server.fail_all(Fault.reshaped(lambda b: {**b, "content": [], "stop_reason": "refusal"}))
        [result] = run(server, [chat("q")], cache)
    assert result.response is not None and result.response.refusal


# --- 3. a reply that is not HTTP ----------------------------------------------------------

NOT_HTTP = {
    "ssh-banner": b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n",
    "bad-header-line": b"HTTP/1.1 200 OK\r\nContent-Type application/json\r\nContent-Length: 2\r\n\r\n{}",
    "bad-chunk-size": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    "http-0.9-body": b'{"choices": [{"index": 0, "message": {"content": "Yes"}}]}',
}


@pytest.mark.parametrize("case", list(NOT_HTTP))
def test_reply_that_is_not_http_is_transient(server: Server, case: str) -> None:
    server.inject(Fault.not_http(NOT_HTTP[case]))
    [result] = run(server, [chat("q")], None)
    assert result.ok and result.attempts == 2


def test_reply_that_is_not_http_is_named_when_it_persists(server: Server) -> None:
    server.fail_all(Fault.not_http(NOT_HTTP["ssh-banner"]))
    [result] = run(server, [chat("q")], None, max_retries=1)
    assert result.error is not None and "not HTTP" in result.error and "SSH-2.0" in result.error
    assert result.error_type == "MalformedResponseError"


# --- 4. Retry-After that is not a time ------------------------------------------------------


@pytest.mark.parametrize("value", ["soon", "", "nan", "inf", "1e400", "Mon, 99 Foo 2025 xx"])
def test_garbage_retry_after_is_no_hint(value: str) -> None:
    assert parse_retry_after({"retry-after": value}) is None
    assert parse_retry_after({"retry-after-ms": value}) is None


def test_garbage_retry_after_backs_off_as_without_one(server: Server) -> None:
    server.inject(Fault("status", 429, headers={"Retry-After": "soon"}))
    [result] = run(server, [chat("q")], None)
    assert result.ok and result.attempts == 2


# --- 5. --timeout is a deadline for the whole attempt ----------------------------------


def test_timeout_is_a_deadline_for_the_whole_attempt(server: Server) -> None:
    # Headers at once, then one byte every 0.2 s: no single read ever waits 1 s.
    server.inject(Fault.trickle(0.2))
    started = time.monotonic()
    [result] = run(server, [chat("q")], None, timeout=1.0)
    assert result.ok and result.attempts == 2
    assert time.monotonic() - started < 6  # the trickled body alone takes minutes


def test_a_trickle_that_persists_fails_with_the_deadline_named(server: Server) -> None:
    server.fail_all(Fault.trickle(0.2))
    [result] = run(server, [chat("q")], None, timeout=0.5, max_retries=1)
    assert result.error is not None and "within 0.5 s (--timeout)" in result.error


# --- 6. an answer larger than its request allows ----------------------------------------


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_answer_larger_than_its_request_allows_is_refused(
    server: Server, cache: ResponseCache, chunked: bool
) -> None:
    huge = b'{"padding": "' + b"x" * 50_000_000 + b'"}'
    server.fail_all(Fault.body(huge, chunked=chunked))
    [result] = run(server, [chat("q", max_tokens=1)], cache, max_retries=0)
    assert result.response is None and result.error_type == "MalformedResponseError"
    assert result.error is not None and "request allows" in result.error
    assert len(cache) == 0


def test_a_long_answer_within_its_max_tokens_is_read(server: Server, cache: ResponseCache) -> None:
    text = " ".join(["word"] * 2000)
    server.responder = lambda body, path: [Choice(text)]
    [result] = run(server, [chat("q", max_tokens=4000)], cache)
    assert result.ok and result.response is not None and result.response.text.startswith("word")


# --- 7. messages that say what happened ---------------------------------------------------


def test_persistent_529_is_reported_as_overloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    with AnthropicServer() as server:
        server.fail_all(Fault.overloaded())
        results = run(server, [chat("a"), chat("b", "other")], None, max_retries=2)
    for result in results:
        assert result.error is not None and "overloaded (HTTP 529)" in result.error
        assert "quota" not in result.error


def test_connection_reset_is_reported_as_reset(server: Server) -> None:
    server.fail_all(Fault.drop())
    [result] = run(server, [chat("q")], None, max_retries=1)
    assert result.error is not None and "reset the connection" in result.error
    assert "timed out" not in result.error


def test_retry_after_longer_than_the_cap_stops_the_run_with_one_message(server: Server) -> None:
    server.fail_all(Fault.rate_limit(retry_after=86400))
    started = time.monotonic()
    with pytest.raises(RunAbortedError) as caught:
        run(server, [chat(f"q{i}", str(i)) for i in range(5)], None, concurrency=1)
    assert isinstance(caught.value.cause, WaitTooLongError)
    assert "asks to wait 24 h" in str(caught.value)
    assert server.request_count == 1 and time.monotonic() - started < 5


def test_a_wrong_shape_that_persists_fails_one_prompt_and_a_rerun_sends_only_it(
    tmp_path: Any,
) -> None:
    from click.testing import CliRunner

    from biasaudit.cli import cli
    from biasaudit.store.runs import read_manifest

    prompts = tmp_path / "p.jsonl"
    lines = [
        {"id": f"q{i}", "messages": [{"role": "user", "content": f"prompt {i}"}]} for i in range(6)
    ]
    prompts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with OpenAIServer() as server:
        server.fail_all(Fault.reshaped(lambda b: {**b, "choices": [1]}), match="prompt 3")
        args = ["fanout", str(prompts), "--model", "vllm/m", "--base-url", server.base_url,
                "--runs-dir", str(tmp_path / "runs"), "--max-retries", "1"]  # fmt: skip
        first = CliRunner().invoke(cli, args)
        assert first.exit_code == 1 and "5 answered, 1 failed" in first.output, first.output
        run_dir = first.output.strip().splitlines()[-1].removeprefix("run: ")
        manifest = read_manifest(run_dir)
        assert manifest.status == "completed" and manifest.counts.failures == 1
        sent = server.request_count
        again = CliRunner().invoke(cli, args)
        assert again.exit_code == 1 and "5 from cache, 2 requests sent" in again.output
        assert server.request_count == sent + 2  # the failed prompt, and its one retry
