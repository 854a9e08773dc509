"""The typed request and response every provider speaks, whatever its API."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "DEFAULT_OUTPUT_TOKENS",
    "Capabilities",
    "FirstTokenLogprobs",
    "ModelRequest",
    "ModelResponse",
    "SamplingParams",
    "Usage",
    "estimate_tokens",
]

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
# Chat roles a request may use (tool turns need tool calls, which biasaudit never makes).
CHAT_ROLES = ("system", "developer", "user", "assistant")


class SamplingParams(BaseModel):
    """Everything about how to sample that changes the answer (and so the cache key)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int | None = Field(None, ge=1, description="Upper bound on generated tokens.")
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    logprobs: bool = Field(False, description="Return log-probabilities of the first token.")
    top_logprobs: int | None = Field(
        None, ge=0, le=100, description="How many alternatives to return per token position."
    )
    n: int | None = Field(None, ge=1, le=128, description="Choices to sample in one call.")
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    echo: bool = Field(
        False,
        description="Legacy completions: also return the prompt's own tokens with their "
        "log-probabilities, to score the prompt's end as a continuation.",
    )
    reasoning_effort: ReasoningEffort | None = Field(
        None,
        description="How much a reasoning model reasons before it answers (OpenAI's "
        "reasoning_effort); unset: the model's default.",
    )

    @model_validator(mode="before")
    @classmethod
    def _legacy_logprobs(cls, data: Any) -> Any:
        # The legacy completions API writes `"logprobs": 5` for "top 5"; accept it.
        if isinstance(data, dict) and type(data.get("logprobs")) is int:
            data = dict(data)
            data.setdefault("top_logprobs", data["logprobs"])
            data["logprobs"] = data["logprobs"] > 0 or data.get("top_logprobs") is not None
        if isinstance(data, dict) and isinstance(data.get("stop"), str):
            data = {**data, "stop": (data["stop"],)}
        return data

    @property
    def wants_logprobs(self) -> bool:
        return self.logprobs or bool(self.top_logprobs)

    def key_fields(self) -> dict[str, Any]:
        """The fields that are set, for the cache key (unset ones leave the key alone)."""
        return self.model_dump(exclude_none=True, exclude_defaults=True)


class ModelRequest(BaseModel):
    """One prompt to send: chat ``messages`` or a legacy completions ``prompt``.

    ``id`` is the caller's label and does not enter the cache key: two requests
    with the same content are the same question. ``replicate`` does: it makes
    repeated samples of one prompt distinct cache entries. ``sample`` is set by
    the engine when it splits an ``n``-choice request for an endpoint without ``n``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    messages: tuple[dict[str, Any], ...] | None = None
    prompt: str | None = None
    params: SamplingParams = SamplingParams()
    replicate: int = Field(0, ge=0)
    sample: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _exactly_one_input(self) -> ModelRequest:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("give exactly one of 'messages' (chat) or 'prompt' (completions)")
        if self.messages is not None:
            if not self.messages:
                raise ValueError("'messages' is empty")
            for i, message in enumerate(self.messages):
                if "role" not in message or "content" not in message:
                    raise ValueError(f"messages[{i}] needs 'role' and 'content'")
                if message["role"] not in CHAT_ROLES:
                    raise ValueError(
                        f"messages[{i}].role must be one of {', '.join(CHAT_ROLES)}; got "
                        f"{str(message['role'])[:40]!r}"
                    )
                if not isinstance(message["content"], str | list):
                    raise ValueError(f"messages[{i}].content must be text (or a list of parts)")
        return self

    def asking_effort(self, effort: ReasoningEffort | None) -> ModelRequest:
        """This request with ``reasoning_effort`` set to ``effort``, unless it sets its own."""
        if effort is None or self.params.reasoning_effort is not None:
            return self
        params = self.params.model_copy(update={"reasoning_effort": effort})
        return self.model_copy(update={"params": params})

    @property
    def kind(self) -> Literal["chat", "completion"]:
        return "chat" if self.messages is not None else "completion"

    def cache_key(self, *, provider: str, model: str, base_url: str | None) -> str:
        """SHA-256 of everything that determines the response, and nothing else.

        Provider, model and base URL are in the key so one model's answers can
        never be served as another's; secrets, ``id``, concurrency, retry and
        timeout settings are not.
        """
        payload = {
            "v": 1,
            "provider": provider,
            "model": model,
            "base_url": base_url.rstrip("/") if base_url else None,
            "kind": self.kind,
            "input": list(self.messages) if self.messages is not None else self.prompt,
            "params": self.params.key_fields(),
            "replicate": self.replicate,
        }
        if self.sample is not None:
            payload["sample"] = self.sample
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


class FirstTokenLogprobs(BaseModel):
    """Log-probabilities at the first generated token of one choice.

    ``top`` lists ``[token, logprob]`` pairs, most likely first, exactly as the
    endpoint spelled the tokens (``"Yes"`` and ``" Yes"`` stay distinct; merging
    tokenisation variants is the probes' business).
    """

    model_config = ConfigDict(frozen=True)

    token: str
    logprob: float | None = Field(None, description="The chosen token's own log-probability.")
    top: tuple[tuple[str, float], ...] = ()


class EchoedToken(BaseModel):
    """One token of a prompt the endpoint echoed: its text, log-probability given the
    tokens before it (None for the first), and where it starts in the prompt."""

    model_config = ConfigDict(frozen=True)

    token: str
    logprob: float | None = None
    offset: int = Field(ge=0)


@dataclass(frozen=True)
class ModelChatTemplate:
    """A model's own chat template (Jinja, Hugging Face's format) with its BOS and EOS
    token texts, where a provider can read it (a GGUF file's metadata)."""

    source: str
    bos_token: str = ""
    eos_token: str = ""


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0


class ModelResponse(BaseModel):
    """What one request returned, normalised across APIs.

    ``texts`` holds one entry per choice (several when ``n`` > 1);
    ``logprobs`` one entry per choice when log-probabilities were asked for.
    """

    model_config = ConfigDict(frozen=True)

    texts: tuple[str, ...]
    logprobs: tuple[FirstTokenLogprobs | None, ...] | None = None
    finish_reasons: tuple[str | None, ...] = ()
    model_version: str | None = Field(None, description="The model name the endpoint reported.")
    system_fingerprint: str | None = None
    request_id: str | None = None
    usage: Usage = Usage()
    refusal: str | None = Field(None, description="Why the model refused, if it did.")
    simulated: bool = False
    echoed: tuple[EchoedToken, ...] | None = Field(
        None, description="The prompt's tokens with their log-probabilities (``echo``)."
    )

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""


class Capabilities(BaseModel):
    """What an endpoint can do, so probes choose the logprob or the replicate path.

    ``logprobs`` is ``None`` when not known in advance (a self-hosted server of
    unknown make): the first request that asks finds out, and fails the run
    clearly if the answer is no. ``reasoning_tokens`` is set for a reasoning
    model (OpenAI's o-series and gpt-5): the provider adapts each request to
    what such a model takes.
    """

    model_config = ConfigDict(frozen=True)

    chat: bool = True
    completions: bool = True
    logprobs: bool | None = True
    max_top_logprobs: int | None = 20
    n: bool = True
    seed: bool = True
    prompt_batch: int = Field(
        1, ge=1, description="Most legacy-completions prompts one request may carry (a list)."
    )
    batch: bool = Field(
        False, description="Has a provider batch API (``--batch``): half price, up to 24 h."
    )
    max_stop: int | None = Field(
        None, ge=1, description="Most stop sequences a request may give (None: no known limit)."
    )
    echo: bool = Field(
        False,
        description="Legacy completions echo the prompt with its tokens' log-probabilities "
        "(vLLM, llama.cpp, SGLang): a given continuation can be scored whole.",
    )
    reasoning_tokens: int | None = Field(
        None,
        ge=1,
        description="A reasoning model (it reasons in hidden output tokens before it "
        "answers): the tokens each request allows for that reasoning, on top of its "
        "max_tokens. It samples only at temperature 1 and takes no stop sequences. "
        "None: not a reasoning model.",
    )


DEFAULT_OUTPUT_TOKENS = 512
"""The output tokens a request without ``max_tokens`` is counted for, before it runs."""
_CHARS_PER_TOKEN = 4
_TOKENS_PER_MESSAGE = 4
_REPLY_PRIMING_TOKENS = 3


def estimate_tokens(request: ModelRequest) -> tuple[int, int]:
    """(input, output) tokens of one request before it is sent (for the cost estimate
    and ``--tpm``): the prompt's characters / 4, rounded up (OpenAI's rule of thumb
    for English), plus 4 per chat message and 3 to prime the reply; output:
    ``max_tokens`` (``DEFAULT_OUTPUT_TOKENS`` when unset) times ``n``, an upper bound."""
    if request.messages is not None:
        chars = sum(len(str(message.get("content", ""))) for message in request.messages)
        overhead = _TOKENS_PER_MESSAGE * len(request.messages) + _REPLY_PRIMING_TOKENS
    else:
        chars, overhead = len(request.prompt or ""), 0
    params = request.params
    output = (params.max_tokens or DEFAULT_OUTPUT_TOKENS) * (params.n or 1)
    return math.ceil(chars / _CHARS_PER_TOKEN) + overhead, output
