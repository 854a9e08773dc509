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
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import MalformedResponseError
from ..secrets import redact
from ._types import ModelRequest

__all__ = [
    "ANSWER_LIMIT",
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


class Unreadable(ValueError):
    """A body of the right types that still is no answer (a chat choice without a message).

    Providers turn it into :class:`MalformedResponseError` with the body quoted.
    """


class _Wire(BaseModel):
    model_config = ConfigDict(
        extra="ignore", frozen=True, strict=True, allow_inf_nan=False, hide_input_in_errors=True
    )


# --- OpenAI chat and legacy completions (and every compatible server) -------------------


class TopLogprob(_Wire):
    token: str
    logprob: Logprob


class TokenLogprob(_Wire):
    token: str
    logprob: Logprob | None = None
    top_logprobs: list[TopLogprob] | None = None


class ChoiceLogprobs(_Wire):
    """Either shape: chat's ``content`` list (also llama.cpp's completions), or legacy lists."""

    content: list[TokenLogprob] | None = None
    tokens: list[str] | None = None
    token_logprobs: list[Logprob | None] | None = None
    top_logprobs: list[dict[str, Logprob] | None] | None = None


class ContentPart(_Wire):
    """One part of a message whose content is a list (some servers send text in parts)."""

    type: str
    text: str | None = None


class ChatMessage(_Wire):
    content: str | list[ContentPart] | None = None
    refusal: str | None = None


class ChatChoice(_Wire):
    index: Count | None = None
    message: ChatMessage | None = None
    text: str | None = None
    finish_reason: str | None = None
    logprobs: ChoiceLogprobs | None = None


class OpenAIUsage(_Wire):
    prompt_tokens: Count | None = None
    completion_tokens: Count | None = None


class OpenAIBody(_Wire):
    """A chat or legacy completions answer: at least one choice."""

    id: str | None = None
    model: str | None = None
    system_fingerprint: str | None = None
    choices: list[ChatChoice] = Field(min_length=1)
    usage: OpenAIUsage | None = None


# --- Anthropic Messages ---------------------------------------------------------------


class ContentBlock(_Wire):
    type: str
    text: str | None = None


class AnthropicUsage(_Wire):
    input_tokens: Count | None = None
    output_tokens: Count | None = None


class AnthropicBody(_Wire):
    id: str | None = None
    model: str | None = None
    content: list[ContentBlock]
    stop_reason: str | None = None
    usage: AnthropicUsage | None = None


W = TypeVar("W", bound=_Wire)


def read_wire(
    shape: type[W], content: bytes | dict[str, Any], *, content_type: str | None = None
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
            return shape.model_validate_json(content)
        return shape.model_validate(content)
    except ValidationError as error:
        first = error.errors()[0]
        if first["type"] == "json_invalid" and isinstance(content, bytes):
            kind = content_type or "no content-type"
            raise malformed(f"a body that is not JSON ({kind})", content) from None
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


def answer_limit(request: ModelRequest, *, extra_tokens: int = 0, prompts: int = 1) -> int:
    """The most bytes an answer to ``request`` may take: a generous multiple of what it allows.

    ``max_tokens`` (plus ``extra_tokens``, a reasoning model's allowance) for each
    of ``n`` choices of each of ``prompts`` prompts, at ``_BYTES_PER_TOKEN`` per
    token and per logprob alternative, plus an envelope. An answer of 50 MB to a
    request for one token is not an answer.
    """
    p = request.params
    tokens = (p.max_tokens or _UNSET_MAX_TOKENS) + extra_tokens
    alternatives = 1 + (p.top_logprobs or 0) if p.wants_logprobs else 0
    per_token = _BYTES_PER_TOKEN * (1 + alternatives)
    return _ENVELOPE_BYTES + prompts * (p.n or 1) * tokens * per_token


def check_size(content: bytes, limit: int) -> None:
    """Raise :class:`MalformedResponseError` when ``content`` is larger than ``limit`` bytes."""
    if len(content) > limit:
        raise malformed(
            f"{len(content):,} bytes, more than the {limit:,} its request allows", content
        )
