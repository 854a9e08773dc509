"""The fake provider servers speak the real wire formats: the official async SDKs
parse every response shape and surface every injected fault as the exception a
real provider's misbehaviour would produce."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anthropic
import openai
import pytest

from tests.servers import (
    DEFAULT_TOP_LOGPROBS,
    AnthropicServer,
    Choice,
    Fault,
    OpenAIServer,
    default_responder,
    request_key,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
MSGS: list[Any] = [{"role": "user", "content": "Should Alice get the loan?"}]
T = TypeVar("T")


# ------------------------------------------------------------------ helpers
@pytest.fixture(scope="module")
def oai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture
def oai(oai_server: OpenAIServer) -> OpenAIServer:
    oai_server.reset()
    oai_server.latency = 0.0
    oai_server.responder = default_responder
    return oai_server


@pytest.fixture(scope="module")
def ant_server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as srv:
        yield srv


@pytest.fixture
def ant(ant_server: AnthropicServer) -> AnthropicServer:
    ant_server.reset()
    ant_server.responder = default_responder
    return ant_server


def with_openai(
    srv: OpenAIServer | str, fn: Callable[[openai.AsyncOpenAI], Awaitable[T]], **kw: Any
) -> T:
    """Run fn(client) on a fresh event loop with a properly closed client."""

    async def go() -> T:
        opts: dict[str, Any] = {"api_key": "test", "max_retries": 0, "timeout": 5.0, **kw}
        url = srv if isinstance(srv, str) else srv.base_url
        async with openai.AsyncOpenAI(base_url=url, **opts) as client:
            return await fn(client)

    return asyncio.run(go())


def with_anthropic(
    srv: AnthropicServer | str, fn: Callable[[anthropic.AsyncAnthropic], Awaitable[T]], **kw: Any
) -> T:
    async def go() -> T:
        opts: dict[str, Any] = {"api_key": "test", "max_retries": 0, "timeout": 5.0, **kw}
        url = srv if isinstance(srv, str) else srv.base_url
        async with anthropic.AsyncAnthropic(base_url=url, **opts) as client:
            return await fn(client)

    return asyncio.run(go())


def chat(client: openai.AsyncOpenAI, **kw: Any) -> Awaitable[Any]:
    return client.chat.completions.create(model="gpt-test", messages=kw.pop("messages", MSGS), **kw)


def message(client: anthropic.AsyncAnthropic, **kw: Any) -> Awaitable[Any]:
    kw.setdefault("max_tokens", 16)
    return client.messages.create(model="claude-test", messages=MSGS, **kw)


def raises(fn: Callable[[], object], exc: type[BaseException]) -> Any:
    with pytest.raises(exc) as info:
        fn()
    return info.value


# ------------------------------------------------------------------ OpenAI shapes
def test_default_distribution_is_valid() -> None:
    assert max(DEFAULT_TOP_LOGPROBS, key=DEFAULT_TOP_LOGPROBS.__getitem__) == "Yes"
    assert sum(math.exp(v) for v in DEFAULT_TOP_LOGPROBS.values()) <= 1.0


def test_chat_with_logprobs(oai: OpenAIServer) -> None:
    raw = with_openai(
        oai,
        lambda c: c.chat.completions.with_raw_response.create(
            model="gpt-test", messages=MSGS, logprobs=True, top_logprobs=5
        ),
    )
    assert raw.headers["x-request-id"].startswith("req_")
    resp = raw.parse()
    assert (resp.object, resp.model, resp.system_fingerprint) == (
        "chat.completion",
        "gpt-test",
        "fp_test1",
    )
    choice = resp.choices[0]
    assert (choice.index, choice.message.role, choice.message.content) == (0, "assistant", "Yes")
    assert choice.finish_reason == "stop"
    assert choice.logprobs is not None and choice.logprobs.content is not None
    pos = choice.logprobs.content[0]
    assert (pos.token, pos.logprob, pos.bytes) == ("Yes", -0.4, list(b"Yes"))
    assert [t.token for t in pos.top_logprobs] == ["Yes", "No", " Yes", "yes", " No"]
    assert resp.usage is not None and resp.usage.completion_tokens == 1
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + 1


def test_chat_without_logprobs_has_none(oai: OpenAIServer) -> None:
    resp = with_openai(oai, lambda c: chat(c))
    assert resp.choices[0].logprobs is None


def test_chat_n_sampling_is_deterministic_per_seed(oai: OpenAIServer) -> None:
    async def twice(c: openai.AsyncOpenAI) -> list[list[str | None]]:
        out = []
        for _ in range(2):
            r = await chat(c, n=30, temperature=1.0, seed=7, logprobs=True, top_logprobs=2)
            assert [ch.index for ch in r.choices] == list(range(30))
            out.append([ch.message.content for ch in r.choices])
        return out

    first, second = with_openai(oai, twice)
    assert first == second
    assert {"Yes", "No"} <= set(first)
    greedy = with_openai(oai, lambda c: chat(c, n=3, temperature=0))
    assert [ch.message.content for ch in greedy.choices] == ["Yes"] * 3


def test_responder_max_tokens_and_stop(oai: OpenAIServer) -> None:
    oai.responder = lambda body, path: [Choice("The answer is Yes. Done")]
    cut = with_openai(oai, lambda c: chat(c, max_tokens=2))
    stopped = with_openai(oai, lambda c: chat(c, stop=["."]))
    assert (cut.choices[0].message.content, cut.choices[0].finish_reason) == (
        "The answer",
        "length",
    )
    assert cut.usage.completion_tokens == 2
    assert stopped.choices[0].message.content == "The answer is Yes"
    assert stopped.choices[0].finish_reason == "stop"


def test_completions_legacy_logprobs(oai: OpenAIServer) -> None:
    prompt = "Q: Is the sky blue?\nA:"
    resp = with_openai(oai, lambda c: c.completions.create(model="m", prompt=prompt, logprobs=3))
    assert resp.object == "text_completion"
    lp = resp.choices[0].logprobs
    assert resp.choices[0].text == "Yes" and lp is not None
    assert (lp.tokens, lp.token_logprobs, lp.text_offset) == (["Yes"], [-0.4], [len(prompt)])
    assert lp.top_logprobs == [{"Yes": -0.4, "No": -1.6, " Yes": -3.0}]


def test_completions_list_prompts_with_n_and_planted_probs(oai: OpenAIServer) -> None:
    p_yes = {"Alice": 0.9, "Bob": 0.2, "Chen": 0.6}
    oai.responder = lambda body, path: [Choice.binary(p_yes[body["prompt"].split()[-1]])]
    prompts = [f"Approve {name}" for name in p_yes]
    resp = with_openai(
        oai, lambda c: c.completions.create(model="m", prompt=prompts, n=2, logprobs=2)
    )
    assert [ch.index for ch in resp.choices] == list(range(6))
    for ch in resp.choices:
        name = list(p_yes)[ch.index // 2]
        assert ch.logprobs is not None and ch.logprobs.top_logprobs is not None
        top = ch.logprobs.top_logprobs[0]
        assert math.isclose(math.exp(top["Yes"]), p_yes[name])
        assert ch.text == ("Yes" if p_yes[name] >= 0.5 else "No")
    assert oai.count_by(lambda r: r.path) == {"/v1/completions": 1}


def test_completions_chat_style_logprobs(oai: OpenAIServer) -> None:
    with OpenAIServer(completions_logprobs_style="chat") as srv:
        resp = with_openai(srv, lambda c: c.completions.create(model="m", prompt="x", logprobs=2))
    lp = resp.choices[0].logprobs
    assert lp is not None and lp.tokens is None  # llama.cpp sends no legacy fields
    assert lp.model_extra is not None  # the SDK keeps unknown fields as extras
    content = lp.model_extra["content"]
    assert content[0]["token"] == "Yes"
    assert [t["token"] for t in content[0]["top_logprobs"]] == ["Yes", "No"]


def test_logprob_limits_and_unsupported(oai: OpenAIServer) -> None:
    err = raises(
        lambda: with_openai(oai, lambda c: chat(c, logprobs=True, top_logprobs=21)),
        openai.BadRequestError,
    )
    assert "greater than max allowed: 20" in err.message
    with OpenAIServer(logprobs_supported=False) as srv:
        err = raises(
            lambda: with_openai(srv, lambda c: chat(c, logprobs=True)), openai.BadRequestError
        )
        assert "logprobs are not supported" in err.message
        raises(
            lambda: with_openai(
                srv, lambda c: c.completions.create(model="m", prompt="x", logprobs=1)
            ),
            openai.BadRequestError,
        )
        assert with_openai(srv, lambda c: chat(c)).choices[0].message.content == "Yes"


def test_api_key_and_models(oai: OpenAIServer) -> None:
    with OpenAIServer(require_api_key="sk-right", model="served-model") as srv:
        err = raises(lambda: with_openai(srv, lambda c: chat(c)), openai.AuthenticationError)
        assert err.code == "invalid_api_key"
        models = with_openai(srv, lambda c: c.models.list(), api_key="sk-right")
        assert [m.id for m in models.data] == ["served-model"]
        headers = srv.requests[0].headers
    assert headers["authorization"] == "Bearer test"


# ------------------------------------------------------------------ OpenAI faults
@pytest.mark.parametrize(
    ("fault", "exc"),
    [
        (Fault.server_error(500), openai.InternalServerError),
        (Fault.overloaded(), openai.InternalServerError),  # no 529 class in openai
        (Fault.http(400, message="bad"), openai.BadRequestError),
        (Fault.timeout(2.0), openai.APITimeoutError),
        (Fault.non_json(502), openai.InternalServerError),
        # Not wrapped by the SDK: a truncated JSON body escapes as a plain JSONDecodeError.
        (Fault.malformed(), json.JSONDecodeError),
    ],
)
def test_openai_fault_exceptions(oai: OpenAIServer, fault: Fault, exc: type[Exception]) -> None:
    oai.inject(fault)
    raises(lambda: with_openai(oai, lambda c: chat(c), timeout=0.3), exc)
    assert oai.pending_faults == 0


def test_openai_drop_is_connection_error_not_timeout(oai: OpenAIServer) -> None:
    oai.inject(Fault.drop())
    err = raises(lambda: with_openai(oai, lambda c: chat(c)), openai.APIConnectionError)
    assert not isinstance(err, openai.APITimeoutError)


def test_openai_rate_limit_headers_and_quota(oai: OpenAIServer) -> None:
    oai.inject(Fault.rate_limit(retry_after=7, retry_after_ms=7000))
    err = raises(lambda: with_openai(oai, lambda c: chat(c)), openai.RateLimitError)
    assert err.response.headers["retry-after"] == "7"
    assert err.response.headers["retry-after-ms"] == "7000"
    assert err.code == "rate_limit_exceeded"
    oai.inject(Fault.quota())
    err = raises(lambda: with_openai(oai, lambda c: chat(c)), openai.RateLimitError)
    assert (err.code, err.type) == ("insufficient_quota", "insufficient_quota")
    assert set(err.body) == {"message", "type", "param", "code"}


def test_openai_sdk_honours_retry_after_ms(oai: OpenAIServer) -> None:
    oai.inject(Fault.rate_limit(retry_after_ms=300))
    start = time.monotonic()
    resp = with_openai(oai, lambda c: chat(c), max_retries=1)
    assert resp.choices[0].message.content == "Yes"
    assert time.monotonic() - start >= 0.3
    assert oai.request_count == 2


def test_openai_non_json_200_and_empty(oai: OpenAIServer) -> None:
    oai.inject(Fault.non_json(200))
    # The SDK does not raise: it hands back the body text instead of a model.
    assert isinstance(with_openai(oai, lambda c: chat(c)), str)
    oai.inject(Fault.empty())
    oai.inject(Fault.empty(null_content=True))
    oai.inject(Fault.empty())
    assert with_openai(oai, lambda c: chat(c)).choices[0].message.content == ""
    assert with_openai(oai, lambda c: chat(c)).choices[0].message.content is None
    assert (
        with_openai(oai, lambda c: c.completions.create(model="m", prompt="x")).choices[0].text
        == ""
    )


def test_fault_matching_fifo_and_persistent(oai: OpenAIServer) -> None:
    oai.inject(Fault.server_error(500), times=2, match="Bob")
    oai.inject(Fault.http(418), match=lambda body: body.get("seed") == 1)
    oai.fail_all(Fault.http(409))

    async def run(c: openai.AsyncOpenAI) -> list[int]:
        codes = []
        for who, seed in [("Alice", 1), ("Bob", 1), ("Bob", 0), ("Bob", 0), ("Carol", 0)]:
            try:
                await chat(c, messages=[{"role": "user", "content": who}], seed=seed)
                codes.append(200)
            except openai.APIStatusError as e:
                codes.append(e.status_code)
        return codes

    assert with_openai(oai, run) == [418, 500, 500, 409, 409]
    oai.clear_faults()
    assert with_openai(oai, lambda c: chat(c)).choices[0].message.content == "Yes"
    names = oai.count_by(lambda r: request_key(r.body, r.path))
    assert names["Bob"] == 3 and oai.bodies()[0]["seed"] == 1


def test_latency_is_adjustable_and_recording_is_concurrent(oai: OpenAIServer) -> None:
    oai.latency = 0.2

    async def burst(c: openai.AsyncOpenAI) -> float:
        start = time.monotonic()
        await asyncio.gather(
            *(chat(c, messages=[{"role": "user", "content": f"n{i}"}]) for i in range(40))
        )
        return time.monotonic() - start

    elapsed = with_openai(oai, burst)
    assert 0.2 <= elapsed < 1.5  # concurrent, not serialised
    assert len(oai.count_by(lambda r: request_key(r.body, r.path))) == 40


def test_sdk_retries_a_dropped_connection(oai: OpenAIServer) -> None:
    oai.inject(Fault.drop())
    assert with_openai(oai, lambda c: chat(c), max_retries=1).choices[0].message.content == "Yes"
    assert oai.wait_for_requests(2, timeout=1.0) and oai.pending_faults == 0


def test_restart_on_the_same_port() -> None:
    srv = OpenAIServer().start()
    port = srv.port
    assert port is not None
    srv.stop()
    raises(lambda: with_openai(srv, lambda c: chat(c)), openai.APIConnectionError)
    with srv.start(port=port):
        assert with_openai(srv, lambda c: chat(c)).choices[0].message.content == "Yes"


def test_stop_does_not_wait_for_hanging_handlers() -> None:
    srv = OpenAIServer().start()
    srv.inject(Fault.timeout(30))
    raises(lambda: with_openai(srv, lambda c: chat(c), timeout=0.2), openai.APITimeoutError)
    start = time.monotonic()
    srv.stop()
    assert time.monotonic() - start < 2.0


# ------------------------------------------------------------------ Anthropic
def test_anthropic_message_shape(ant: AnthropicServer) -> None:
    assert not ant.base_url.endswith("/v1")  # the SDK adds /v1/messages itself
    ant.responder = lambda body, path: [Choice(f"{body.get('system')} -> Yes. Then more")]

    async def raw_and_parsed(c: anthropic.AsyncAnthropic) -> tuple[Any, Any]:
        # Unlike openai's legacy raw response, anthropic's parse() is a coroutine.
        raw = await c.messages.with_raw_response.create(
            model="claude-test", messages=MSGS, max_tokens=3, system="SYS"
        )
        return raw, await raw.parse()

    raw, msg = with_anthropic(ant, raw_and_parsed)
    stopped = with_anthropic(ant, lambda c: message(c, stop_sequences=["."]))
    assert raw.headers["request-id"].startswith("req_") and msg._request_id is not None
    assert (msg.type, msg.role, msg.model) == ("message", "assistant", "claude-test")
    assert msg.id.startswith("msg_")
    assert [b.text for b in msg.content] == ["SYS -> Yes."]
    assert (msg.stop_reason, msg.stop_sequence, msg.usage.output_tokens) == ("max_tokens", None, 3)
    assert (stopped.stop_reason, stopped.stop_sequence) == ("stop_sequence", ".")
    path, headers, body, _ = ant.requests[0]
    # anthropic 2.x sends the API key as a Bearer token, not x-api-key.
    assert path == "/v1/messages" and headers["authorization"] == "Bearer test"
    assert "anthropic-version" in headers and body is not None and body["system"] == "SYS"


def test_anthropic_default_answer_and_auth(ant: AnthropicServer) -> None:
    msg = with_anthropic(ant, lambda c: message(c))
    assert (msg.content[0].text, msg.stop_reason) == ("Yes", "end_turn")
    with AnthropicServer(require_api_key="sk-ant-right") as srv:
        err = raises(
            lambda: with_anthropic(srv, lambda c: message(c)), anthropic.AuthenticationError
        )
        assert err.body["error"]["type"] == "authentication_error"
        ok = with_anthropic(srv, lambda c: message(c), api_key="sk-ant-right")
        assert ok.content[0].text == "Yes"
        # The real API's header, which other clients (curl, older SDKs) send.
        req = urllib.request.Request(
            f"{srv.base_url}/v1/messages",
            data=json.dumps({"model": "m", "max_tokens": 5, "messages": MSGS}).encode(),
            headers={"x-api-key": "sk-ant-right", "content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert json.load(resp)["content"] == [{"type": "text", "text": "Yes"}]


@pytest.mark.parametrize(
    ("fault", "exc", "error_type"),
    [
        (Fault.overloaded(), anthropic.OverloadedError, "overloaded_error"),
        (Fault.server_error(500), anthropic.InternalServerError, "api_error"),
        (Fault.http(400), anthropic.BadRequestError, "invalid_request_error"),
        (Fault.rate_limit(retry_after=3), anthropic.RateLimitError, "rate_limit_error"),
    ],
)
def test_anthropic_status_faults(
    ant: AnthropicServer, fault: Fault, exc: type[Exception], error_type: str
) -> None:
    ant.inject(fault)
    err = raises(lambda: with_anthropic(ant, lambda c: message(c)), exc)
    assert err.body["type"] == "error" and err.body["error"]["type"] == error_type
    assert err.response.headers.get("retry-after") == fault.response_headers().get("Retry-After")


def test_anthropic_overloaded_is_internal_server_error() -> None:
    assert issubclass(anthropic.OverloadedError, anthropic.InternalServerError)


@pytest.mark.parametrize(
    ("fault", "exc"),
    [
        (Fault.drop(), anthropic.APIConnectionError),
        (Fault.timeout(2.0), anthropic.APITimeoutError),
        (Fault.malformed(), json.JSONDecodeError),
        (Fault.non_json(502), anthropic.InternalServerError),
    ],
)
def test_anthropic_transport_faults(
    ant: AnthropicServer, fault: Fault, exc: type[Exception]
) -> None:
    ant.inject(fault)
    raises(lambda: with_anthropic(ant, lambda c: message(c), timeout=0.3), exc)


def test_anthropic_empty_content(ant: AnthropicServer) -> None:
    ant.inject(Fault.empty(null_content=True))
    assert with_anthropic(ant, lambda c: message(c)).content == []


# ------------------------------------------------------------------ subprocess mode
@contextlib.contextmanager
def subprocess_server(module: str, *args: str) -> Iterator[int]:
    """Run `python -m module --port 0 ...` from the repo root; yield its port;
    SIGTERM it afterwards and require a clean, silent exit."""
    with subprocess.Popen(
        [sys.executable, "-m", module, "--port", "0", *args],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("PORT "), line
            yield int(line.split()[1])
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=5)
        # Empty stderr also rules out runpy's double-import RuntimeWarning.
        assert (proc.returncode, err) == (0, "")


def test_subprocess_mode_serves_logs_and_stops(tmp_path: Path) -> None:
    log = tmp_path / "requests.log"
    args = ("--latency", "0.01", "--model", "bench", "--log", str(log))

    async def run(c: openai.AsyncOpenAI) -> None:
        prompts = [f"p{i}" for i in range(20)]
        await asyncio.gather(*(chat(c, messages=[{"role": "user", "content": p}]) for p in prompts))
        await chat(c, messages=[{"role": "user", "content": "line one\nline two"}])
        await c.completions.create(model="m", prompt="legacy prompt")
        assert (await c.models.list()).data[0].id == "bench"

    with subprocess_server("tests.servers.openai_server", *args) as port:
        with_openai(f"http://127.0.0.1:{port}/v1", run)
    lines = log.read_text().splitlines()
    assert len(lines) == 22  # one per POST, GETs are not logged
    assert lines[-2] == '/v1/chat/completions\t"line one\\nline two"'
    assert lines[-1] == '/v1/completions\t"legacy prompt"'


def test_anthropic_subprocess_mode() -> None:
    with subprocess_server("tests.servers.anthropic_server") as port:
        msg = with_anthropic(f"http://127.0.0.1:{port}", lambda c: message(c))
    assert msg.content[0].text == "Yes"
