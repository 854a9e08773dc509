"""What biasaudit reads of an endpoint's answer, checked before it becomes a response.

A 200 can carry anything: a proxy's error page, half a body, fields of the
wrong type (``"choices": [1]``, ``"content": 5``, ``"prompt_tokens": "abc"``),
``NaN``, ``1e400``, an array nested 100,000 deep. Every answer is read here,
against the few fields biasaudit uses, typed strictly (pydantic in strict mode:
no coercion, finite numbers only; the JSON parser refuses nesting deeper than
a few hundred levels). Fields biasaudit does not read are ignored.

An answer that does not match, or is larger than its request allows
(:func:`answer_limit`), raises :class:`~biasaudit.errors.MalformedResponseError`:
a transient failure of that one request, retried like a dropped connection and
never cached. Its message quotes the first bytes of the body.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Annotated, Any, NotRequired, TypeVar

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

from biasaudit.errors import MalformedResponseError
from biasaudit.providers._types import ModelRequest
from biasaudit.secrets import redact

__all__ = [
    "ANSWER_LIMIT",
    "ANTHROPIC_BODY",
    "OPENAI_BODY",
    "AnthropicBody",
    "ChatChoice",
    "ChoiceLogprobs",
    "OpenAIBody",
    "Unreadable",
    "answer_limit",
    "check_size",
    "read_wire",
]

# A logprob is at most 0; float rounding in some servers lands a hair above.
_LOGPROB_SLACK = 1e-3
_MAX_COUNT = 10**12  # more tokens than any request is ever billed for
_SNIPPET = 120

# answer_limit(): bytes of envelope (ids, usage, headers of the JSON), and bytes one
# generated token may take, each alternative of its logprobs included (a token of
# escaped non-ASCII text with its byte list is ~150 bytes; this allows 3x that).
_ENVELOPE_BYTES = 64 * 1024
_BYTES_PER_TOKEN = 512
# A request that sets no max_tokens may get what the model's own limit allows.
_UNSET_MAX_TOKENS = 32_768

ANSWER_LIMIT: ContextVar[int | None] = ContextVar("biasaudit_answer_limit", default=None)
"""The most bytes the answer being read may take; the HTTP client stops reading beyond it."""

Logprob = Annotated[float, Field(le=_LOGPROB_SLACK)]
Count = Annotated[int, Field(ge=0, le=_MAX_COUNT)]

# Read into plain dicts (TypedDicts): a fifth of the cost of building model objects
# for every answer. Strict: no coercion; finite numbers only; other keys ignored.
_STRICT = with_config(ConfigDict(strict=True, allow_inf_nan=False, extra="ignore"))


class Unreadable(ValueError):
    """A body of the right types that still is no answer (a chat choice without a message).

    Providers turn it into :class:`MalformedResponseError` with the body quoted.
    """


# --- OpenAI chat and legacy completions (and every compatible server) -------------------


@_STRICT
class TopLogprob(TypedDict):
    token: str
    logprob: Logprob


@_STRICT
class TokenLogprob(TypedDict):
    token: str
    logprob: NotRequired[Logprob | None]
    top_logprobs: NotRequired[list[TopLogprob] | None]


@_STRICT
class ChoiceLogprobs(TypedDict):
    """Either shape: chat's ``content`` list (also llama.cpp's completions), or legacy lists."""

    content: NotRequired[list[TokenLogprob] | None]
    tokens: NotRequired[list[str] | None]
    token_logprobs: NotRequired[list[Logprob | None] | None]
    top_logprobs: NotRequired[list[dict[str, Logprob] | None] | None]
    text_offset: NotRequired[list[Count] | None]


@_STRICT
class ContentPart(TypedDict):
    """One part of a message whose content is a list (some servers send text in parts)."""

    type: str
    text: NotRequired[str | None]


@_STRICT
class ChatMessage(TypedDict):
    content: NotRequired[str | list[ContentPart] | None]
    refusal: NotRequired[str | None]


@_STRICT
class ChatChoice(TypedDict):
    index: NotRequired[Count | None]
    message: NotRequired[ChatMessage | None]
    text: NotRequired[str | None]
    finish_reason: NotRequired[str | None]
    logprobs: NotRequired[ChoiceLogprobs | None]


@_STRICT
class OpenAIUsage(TypedDict):
    prompt_tokens: NotRequired[Count | None]
    completion_tokens: NotRequired[Count | None]


@_STRICT
class OpenAIBody(TypedDict):
    """A chat or legacy completions answer: at least one choice."""

    id: NotRequired[str | None]
    model: NotRequired[str | None]
    system_fingerprint: NotRequired[str | None]
    choices: Annotated[list[ChatChoice], Field(min_length=1)]
    usage: NotRequired[OpenAIUsage | None]


# --- Anthropic Messages ---------------------------------------------------------------


@_STRICT
class ContentBlock(TypedDict):
    type: str
    text: NotRequired[str | None]


@_STRICT
class AnthropicUsage(TypedDict):
    input_tokens: NotRequired[Count | None]
    output_tokens: NotRequired[Count | None]


@_STRICT
class AnthropicBody(TypedDict):
    id: NotRequired[str | None]
    model: NotRequired[str | None]
    content: list[ContentBlock]
    stop_reason: NotRequired[str | None]
    usage: NotRequired[AnthropicUsage | None]


W = TypeVar("W")
OPENAI_BODY: TypeAdapter[OpenAIBody] = TypeAdapter(OpenAIBody)
ANTHROPIC_BODY: TypeAdapter[AnthropicBody] = TypeAdapter(AnthropicBody)


def read_wire(
    shape: TypeAdapter[W], content: bytes | dict[str, Any], *, content_type: str | None = None
) -> W:
    """``content`` (a body's bytes, or an already parsed answer) read as ``shape``.

    Raises
    ------
    MalformedResponseError
        Not JSON, or not of the shape: the message names the first field at
        fault and quotes the body's first bytes.
    """
    try:
        if isinstance(content, bytes):
            return shape.validate_json(content)
        return shape.validate_python(content)
    except ValidationError as error:
        first = error.errors(include_input=False)[0]
        if first["type"] == "json_invalid" and isinstance(content, bytes):
            # The parser's reason says which: cut short ("EOF while parsing ... at line 1
            # column 812"), nested past its limit, or not JSON at all.
            reason = first["msg"].removeprefix("Invalid JSON: ")
            kind = content_type or "no content-type"
            raise malformed(f"a body that is not JSON ({kind}; {reason})", content) from None
        where = ".".join(str(part) for part in first["loc"]) or "the body"
        raise malformed(f"an answer it cannot read ({where}: {first['msg']})", content) from None


def malformed(problem: str, content: bytes | dict[str, Any] | str) -> MalformedResponseError:
    """The error for an unreadable answer, quoting the first bytes of its body."""
    if isinstance(content, dict):
        content = repr(content)
    if isinstance(content, str):
        content = content.encode("utf-8", "replace")
    if not content:
        return MalformedResponseError(redact(f"the endpoint returned {problem}"))
    snippet = content[:_SNIPPET].decode("utf-8", "replace").replace("\n", " ")
    return MalformedResponseError(redact(f"the endpoint returned {problem}: {snippet!r}"))


def answer_limit(
    request: ModelRequest,
    *,
    extra_tokens: int = 0,
    prompts: int = 1,
    default_max_tokens: int = _UNSET_MAX_TOKENS,
) -> int:
    """The most bytes an answer to ``request`` may take: a generous multiple of what it allows.

    ``max_tokens`` (plus ``extra_tokens``, a reasoning model's allowance) for each
    of ``n`` choices of each of ``prompts`` prompts, at ``_BYTES_PER_TOKEN`` per
    token and per logprob alternative, plus an envelope. An answer of 50 MB to a
    request for one token is not an answer. A request without ``max_tokens`` is
    sent with ``default_max_tokens`` (Anthropic's default) or gets the model's own.
    """
    p = request.params
    tokens = (p.max_tokens or default_max_tokens) + extra_tokens
    alternatives = 1 + (p.top_logprobs or 0) if p.wants_logprobs else 0
    per_token = _BYTES_PER_TOKEN * (1 + alternatives)
    return _ENVELOPE_BYTES + prompts * (p.n or 1) * tokens * per_token


def check_size(content: bytes, limit: int) -> None:
    """Raise :class:`MalformedResponseError` when ``content`` is larger than ``limit`` bytes."""
    if len(content) > limit:
        raise malformed(
            f"{len(content):,} bytes, more than the {limit:,} its request allows", content
        )
