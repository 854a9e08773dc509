"""Anthropic's Messages API through the official ``anthropic`` async SDK.

The API gives no logprobs and no ``n``: probes take the sampled-replicate path,
and the engine splits ``n`` into separate, separately cached calls.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ProviderError, RequestRejectedError, TransientProviderError, UsageError
from ..secrets import redact, remember_secret
from ._base import classify_status
from ._batch_api import BatchAPI
from ._sdk import SDKProvider, connection_error
from ._types import Capabilities, ModelRequest, ModelResponse, Usage

__all__ = ["ANTHROPIC_CAPABILITIES", "AnthropicProvider"]

ANTHROPIC_CAPABILITIES = Capabilities(
    chat=True, completions=False, logprobs=False, max_top_logprobs=0, n=False, seed=False,
    batch=True,
)  # fmt: skip
# The Messages API requires max_tokens; this is used when a request sets none.
DEFAULT_MAX_TOKENS = 1024


class AnthropicProvider(SDKProvider):
    """``anthropic/<model>``: chat requests as Messages API calls."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        max_connections: int = 64,
        name: str = "anthropic",
    ) -> None:
        self.name, self.model = name, model
        self.base_url = (base_url or "https://api.anthropic.com").rstrip("/")
        self.capabilities = ANTHROPIC_CAPABILITIES
        self._api_key = api_key
        remember_secret(api_key)
        self._max_connections = max_connections

    def __repr__(self) -> str:
        return f"AnthropicProvider({self.model_id!r}, base_url={self.base_url!r})"

    def _new_client(self, http_client: Any) -> Any:
        import anthropic

        return anthropic.AsyncAnthropic(
            api_key=self._api_key,
            base_url=self.base_url,
            max_retries=0,  # the engine owns retries
            http_client=http_client,
        )

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        params = self.message_body(request)
        # Recent SDKs no longer type the sampling parameters, but models that take
        # them still read them from the body.
        sampling = {name: params.pop(name) for name in ("temperature", "top_p") if name in params}
        if sampling:
            params["extra_body"] = sampling
        raw = await self._sdk().messages.with_raw_response.create(timeout=timeout, **params)
        return _parse_message(raw.http_response)

    def check(self, request: ModelRequest) -> None:
        super().check(request)
        if request.params.reasoning_effort is not None:
            raise UsageError(
                "anthropic/ takes no reasoning_effort (Claude's extended thinking is set "
                "by a token budget, which biasaudit does not ask for); leave it unset"
            )

    def message_body(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API body of one request, as it is sent."""
        if request.kind != "chat":
            raise RequestRejectedError("anthropic/ takes chat 'messages', not a 'prompt'")
        system, messages = _split_system(request.messages or ())
        p = request.params
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": p.max_tokens or DEFAULT_MAX_TOKENS,
        }
        if system:
            body["system"] = system
        if p.temperature is not None:
            body["temperature"] = min(p.temperature, 1.0)  # Anthropic's range is [0, 1]
        if p.top_p is not None:
            body["top_p"] = p.top_p
        if p.stop:
            body["stop_sequences"] = list(p.stop)
        return body

    def batch_api(self) -> BatchAPI:
        """Anthropic's Message Batches."""
        from .anthropic_batch import AnthropicBatchAPI

        return AnthropicBatchAPI(self._sdk, self.message_body, parse_message_body)

    def classify(self, error: BaseException) -> ProviderError:
        import anthropic

        if isinstance(error, ProviderError):
            return error
        if isinstance(error, anthropic.APIConnectionError):  # timeouts included
            return connection_error(self.base_url or "", error)
        if isinstance(error, anthropic.APIStatusError):
            body = error.body
            message = error.message
            if isinstance(body, dict) and isinstance(body.get("error"), dict):
                message = str(body["error"].get("message") or message)
            return classify_status(error.status_code, message, headers=error.response.headers)
        return super().classify(error)


def _split_system(messages: tuple[dict[str, Any], ...]) -> tuple[str, list[dict[str, Any]]]:
    """Anthropic takes the system prompt apart from the turns."""
    system = "\n\n".join(str(m["content"]) for m in messages if m["role"] == "system")
    turns = [
        {"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"
    ]
    return system, turns


def _parse_message(http_response: Any) -> ModelResponse:
    try:
        body = json.loads(http_response.content)
        return parse_message_body(body, request_id=http_response.headers.get("request-id"))
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        snippet = http_response.content[:120].decode("utf-8", "replace")
        raise TransientProviderError(
            redact(f"the endpoint returned an unreadable message: {snippet!r}")
        ) from None


def parse_message_body(body: dict[str, Any], *, request_id: str | None) -> ModelResponse:
    """Normalise a Messages API answer (raises ``KeyError``/``TypeError`` if it is not one)."""
    blocks = body["content"]
    text = "".join(
        b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"
    )
    usage = body.get("usage") or {}
    return ModelResponse(
        texts=(text,),
        finish_reasons=(body.get("stop_reason"),),
        refusal="the model refused" if body.get("stop_reason") == "refusal" else None,
        model_version=body.get("model"),
        request_id=request_id or body.get("id"),
        usage=Usage(
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
        ),
    )
