"""Thousands of mutated answers through both providers: no traceback, nothing malformed cached.

The loopback servers answer every request with a valid body, mutated at
random (types swapped, fields dropped, numbers out of range or not finite,
nesting beyond any parser's limit, truncation) and record what they sent. An
oracle written here, on plain ``json`` and explicit type checks (independent of
the pydantic models under test), says for each body whether it is an answer
and what it says; the run must agree with it, request by request: an answer
read and cached as the oracle reads it, or a failure of that request alone,
never cached.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import random
import threading
from collections.abc import Callable
from typing import Any

import pytest

from biasaudit.engine.core import Engine, EngineSettings, RequestResult
from biasaudit.errors import LogprobsUnavailableError, RunAbortedError
from biasaudit.providers import ModelRequest, resolve_model
from biasaudit.store.cache import ResponseCache
from tests.servers import AnthropicServer, Choice, Fault, OpenAIServer

MUTATIONS_PER_PROVIDER = 1500
_MAX_COUNT = 10**12
_LOGPROB_SLACK = 1e-3
_ODD_VALUES: list[Any] = [
    1,
    -1,
    0,
    2.5,
    "x",
    "",
    None,
    True,
    False,
    [],
    {},
    [1, "a"],
    {"a": 1},
    2**70,
    -(2**70),
]
_RAW_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", str(2**80)]

INVALID, FATAL = "invalid", "fatal"


# --- mutations ------------------------------------------------------------------------------


def _paths(node: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [here]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*here, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*here, index))
    return found


def _parent(body: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        body = body[step]
    return body


def mutate(body: dict[str, Any], rng: random.Random) -> bytes:
    """``body`` with one to three random changes, as the bytes a server sends."""
    body = copy.deepcopy(body)
    raw: dict[str, str] = {}  # placeholder -> JSON text no Python value serialises to
    for _ in range(rng.choice((1, 1, 2, 3))):
        paths = [p for p in _paths(body) if p]
        if not paths:
            break
        path = rng.choice(paths)
        parent, last = _parent(body, path), path[-1]
        kind = rng.choice(("type", "type", "drop", "number", "deep", "extra"))
        if kind == "type":
            parent[last] = copy.deepcopy(rng.choice(_ODD_VALUES))
        elif kind == "drop":
            del parent[last]
        elif kind in ("number", "deep"):
            marker = f"@@{len(raw)}@@"
            deep = "[" * 5000 + "]" * 5000
            raw[marker] = rng.choice(_RAW_NUMBERS) if kind == "number" else deep
            parent[last] = marker
        elif isinstance(parent, dict):  # a field nobody reads: harmless
            parent[f"extra_{rng.randrange(99)}"] = rng.choice(_ODD_VALUES)
    text = json.dumps(body)
    for marker, value in raw.items():
        text = text.replace(f'"{marker}"', value)
    if rng.random() < 0.08:
        text = text[: rng.randrange(len(text))]
    return text.encode()


# --- the oracle ---------------------------------------------------------------------------


class Unreadable(Exception):
    pass


# Nesting past this is refused by every JSON parser the product may meet: pydantic's
# jiter stops at 200 levels. Python's json stops at the recursion limit below 3.12 but
# parses the mutations' 5,000 levels from 3.12 on, so the oracle counts them itself.
_MAX_DEPTH = 1000


def _load(raw: bytes) -> Any:
    try:
        value = json.loads(raw)  # NaN and Infinity parse, as they do in the parser under test
    except (ValueError, RecursionError):
        raise Unreadable from None
    level = [(value, 1)]
    while level:
        item, depth = level.pop()
        if depth > _MAX_DEPTH:
            raise Unreadable
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        )
        level.extend((child, depth + 1) for child in children)
    return value


def _is(value: Any, kind: str, *, optional: bool = True) -> bool:
    if value is None:
        return optional
    if kind == "str":
        return isinstance(value, str)
    if kind == "count":
        return type(value) is int and 0 <= value <= _MAX_COUNT
    if kind == "logprob":
        return type(value) in (int, float) and math.isfinite(value) and value <= _LOGPROB_SLACK
    raise AssertionError(kind)


def _need(condition: bool) -> None:
    if not condition:
        raise Unreadable


def _fields(node: dict[str, Any], kinds: dict[str, str]) -> None:
    for name, kind in kinds.items():
        _need(_is(node.get(name), kind))


def _token(entry: Any, *, logprob_required: bool) -> None:
    _need(isinstance(entry, dict) and isinstance(entry.get("token"), str))
    _need(_is(entry.get("logprob"), "logprob", optional=not logprob_required))
    if logprob_required:
        _need("logprob" in entry)


def _logprobs(block: Any) -> tuple[str, float | None, list[Any]] | None:
    """Check a choice's logprobs; return its first token, own logprob and alternatives."""
    if block is None:
        return None
    _need(isinstance(block, dict))
    content = block.get("content")
    if content is not None:
        _need(isinstance(content, list))
        for entry in content:
            _token(entry, logprob_required=False)
            top = entry.get("top_logprobs")
            _need(top is None or isinstance(top, list))
            for alternative in top or ():
                _token(alternative, logprob_required=True)
    for name, check in (("tokens", "str"), ("token_logprobs", "logprob")):
        values = block.get(name)
        _need(values is None or isinstance(values, list))
        for value in values or ():
            _need(_is(value, check, optional=check == "logprob"))
            _need(value is not None or check == "logprob")
    top_list = block.get("top_logprobs")
    _need(top_list is None or isinstance(top_list, list))
    for entry in top_list or ():
        _need(entry is None or isinstance(entry, dict))
        for value in (entry or {}).values():
            _need(_is(value, "logprob", optional=False))
    if content is not None:
        if not content:
            return None
        return content[0]["token"], content[0].get("logprob"), content[0].get("top_logprobs")
    if block.get("tokens"):
        return block["tokens"][0], None, None
    return None


def _envelope(raw: bytes, fields: dict[str, str], usage_fields: dict[str, str]) -> dict[str, Any]:
    """The body as an object whose own fields and usage have their types."""
    body = _load(raw)
    _need(isinstance(body, dict))
    _fields(body, fields)
    usage = body.get("usage")
    _need(usage is None or isinstance(usage, dict))
    _fields(usage or {}, usage_fields)
    return body  # type: ignore[no-any-return]


def read_openai(raw: bytes, *, wants_logprobs: bool) -> tuple[str, tuple[str, ...], bool] | str:
    """What a chat answer says: (verdict 'ok', texts, refused), or INVALID / FATAL."""
    try:
        body = _envelope(
            raw, {"id": "str", "model": "str", "system_fingerprint": "str"},
            {"prompt_tokens": "count", "completion_tokens": "count"},
        )  # fmt: skip
        choices = body.get("choices")
        _need(isinstance(choices, list) and len(choices) > 0)
        texts, refused, first_tokens = [], False, []
        for choice in choices:
            _need(isinstance(choice, dict))
            _fields(choice, {"index": "count", "text": "str", "finish_reason": "str"})
            message = choice.get("message")
            _need(isinstance(message, dict))
            _fields(message, {"refusal": "str"})
            content = message.get("content")
            if isinstance(content, list):
                for part in content:
                    _need(isinstance(part, dict) and isinstance(part.get("type"), str))
                    _fields(part, {"text": "str"})
                text = "".join(p.get("text") or "" for p in content if "text" in p["type"])
            else:
                _need(_is(content, "str"))
                text = content or ""
            first_tokens.append(_logprobs(choice.get("logprobs")))
            texts.append((choice.get("index") or 0, text))
            refused |= (
                bool(message.get("refusal")) or choice.get("finish_reason") == "content_filter"
            )
    except Unreadable:
        return INVALID
    ordered = tuple(text for _, text in sorted(texts, key=lambda pair: pair[0]))
    if wants_logprobs and all(t is None for t in first_tokens) and any(ordered):
        return FATAL
    return ("ok", ordered, refused)


def read_anthropic(raw: bytes) -> tuple[str, tuple[str, ...], bool] | str:
    try:
        body = _envelope(
            raw, {"id": "str", "model": "str", "stop_reason": "str"},
            {"input_tokens": "count", "output_tokens": "count"},
        )  # fmt: skip
        content = body.get("content")
        _need(isinstance(content, list))
        refused = body.get("stop_reason") == "refusal"
        _need(bool(content) or refused)
        texts = []
        for block in content:
            _need(isinstance(block, dict) and isinstance(block.get("type"), str))
            _fields(block, {"text": "str"})
            if block["type"] == "text":
                _need(block.get("text") is not None)
                texts.append(block["text"])
    except Unreadable:
        return INVALID
    return ("ok", ("".join(texts),), refused)


# --- the run ----------------------------------------------------------------------------


def _echo(body: dict[str, Any], path: str) -> list[Choice]:
    """Answers name their prompt, so a body can be told from another's."""
    messages = body.get("messages") or []
    text = messages[-1].get("content") if messages else ""
    return [Choice(f"answer to {text}")]


class Recorder:
    """Mutates every answer (a seeded draw per prompt) and keeps what was sent for each."""

    def __init__(self, seed: int, prompt_of: Callable[[dict[str, Any]], str]) -> None:
        self.seed, self._prompt_of = seed, prompt_of
        self.sent: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> bytes:
        prompt = self._prompt_of(body)
        raw = mutate(body, random.Random(f"{self.seed}|{prompt}"))
        with self._lock:
            self.sent[prompt] = raw
        return raw


def _openai_prompt(body: dict[str, Any]) -> str:
    return str(body["choices"][0]["message"]["content"]).removeprefix("answer to ")


def _anthropic_prompt(body: dict[str, Any]) -> str:
    return str(body["content"][0]["text"]).removeprefix("answer to ")


def _requests(count: int, *, logprobs: bool) -> list[ModelRequest]:
    found = []
    for i in range(count):
        params: dict[str, Any] = {"max_tokens": 20}
        if logprobs and i % 2 == 0:
            params |= {"logprobs": True, "top_logprobs": 3}
        messages = [{"role": "user", "content": f"prompt-{i}"}]
        found.append(
            ModelRequest.model_validate({"id": f"p{i}", "messages": messages, "params": params})
        )
    return found


async def _collect(
    engine: Engine, requests: list[ModelRequest], results: dict[str, RequestResult]
) -> None:
    try:
        async for result in engine.run(requests):
            results[result.request.id] = result
    finally:
        await engine.provider.aclose()


def _run_until_done(
    provider_name: str,
    base_url: str,
    requests: list[ModelRequest],
    cache: ResponseCache,
    stopping: Callable[[ModelRequest], bool],
) -> tuple[dict[str, RequestResult], int]:
    """Run every request; after a run stops (an answer without the logprobs asked for),
    run the rest, less the requests whose answer ``stopping`` says stops a run."""
    results: dict[str, RequestResult] = {}
    stops = 0
    pending = list(requests)
    while pending:
        provider = resolve_model(provider_name, base_url=base_url)
        settings = EngineSettings(max_retries=0, concurrency=32, backoff_max=0.01)
        try:
            asyncio.run(_collect(Engine(provider, cache, settings), pending, results))
        except RunAbortedError as error:
            assert isinstance(error.cause, LogprobsUnavailableError), error
            stops += 1
        pending = [r for r in pending if r.id not in results and not stopping(r)]
    return results, stops


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_mutated_answers_never_crash_a_run_and_are_never_cached_when_malformed(
    provider: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    openai = provider == "openai"
    recorder = Recorder(seed=20261123, prompt_of=_openai_prompt if openai else _anthropic_prompt)
    requests = _requests(MUTATIONS_PER_PROVIDER, logprobs=openai)
    cls = OpenAIServer if openai else AnthropicServer

    def expected(request: ModelRequest) -> tuple[str, tuple[str, ...], bool] | str | None:
        raw = recorder.sent.get(request.messages[-1]["content"])  # type: ignore[index]
        if raw is None:
            return None  # not sent yet
        if openai:
            return read_openai(raw, wants_logprobs=request.params.wants_logprobs)
        return read_anthropic(raw)

    with cls(responder=_echo) as server, ResponseCache(tmp_path / "c.sqlite") as cache:
        server.fail_all(Fault.reshaped(recorder))
        model = "vllm/m" if openai else "anthropic/m"
        results, stops = _run_until_done(
            model, server.base_url, requests, cache, lambda r: expected(r) == FATAL
        )
        cached = cache.keys_present(r.key for r in results.values())

    verdicts = {"ok": 0, INVALID: 0, FATAL: 0}
    for request in requests:
        raw = recorder.sent[request.messages[-1]["content"]]  # type: ignore[index]
        verdict = expected(request)
        if verdict == FATAL:
            # An answer without the logprobs asked for stops the run (it is the endpoint's
            # way of saying it has none): never an answer, never cached.
            verdicts[FATAL] += 1
            assert request.id not in results or results[request.id].response is None
            continue
        result = results[request.id]
        expected_now = verdict
        if expected_now == INVALID:
            verdicts[INVALID] += 1
            assert result.response is None, (raw[:300], result.response)
            assert result.error_type == "MalformedResponseError", (raw[:300], result.error)
            assert result.key not in cached, raw[:300]
            continue
        verdicts["ok"] += 1
        assert isinstance(expected_now, tuple)
        _, texts, refused = expected_now
        assert result.response is not None, (raw[:300], result.error)
        assert result.response.texts == texts and (result.response.refusal is not None) == refused
        assert result.key in cached
    # The draws exercise every branch, many times over.
    assert verdicts["ok"] > 100 and verdicts[INVALID] > 300, verdicts
    assert (stops > 0) == (verdicts[FATAL] > 0) and stops <= verdicts[FATAL]
