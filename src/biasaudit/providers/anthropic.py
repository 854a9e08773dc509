"""Anthropic's Messages API through the official ``anthropic`` async SDK.

The API gives no logprobs and no ``n``: probes take the sampled-replicate path,
and the engine splits ``n`` into separate, separately cached calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from biasaudit.errors import ProviderError, RequestRejectedError, UsageError
from biasaudit.providers._base import classify_status
from biasaudit.providers._batch_api import BatchAPI
from biasaudit.providers._sdk import (
    SDKProvider,
    check_certificates,
    check_proxy_environment,
    is_transport_error,
    transport_error,
)
from biasaudit.providers._types import Capabilities, ModelRequest, ModelResponse, Usage
from biasaudit.providers._wire import ANTHROPIC_BODY, answer_limit, check_size, malformed, read_wire
from biasaudit.secrets import EndpointURL, remember_secret

__all__ = ["ANTHROPIC_CAPABILITIES", "AnthropicProvider"]

ANTHROPIC_CAPABILITIES = Capabilities(
    chat=True, completions=False, logprobs=False, max_top_logprobs=0, n=False, seed=False,
    batch=True,
)  # fmt: skip
# OpenAI's "developer" role is its newer name for "system".
_SYSTEM_ROLES = ("system", "developer")
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
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.name, self.model = name, model
        self._endpoint = EndpointURL(base_url or "https://api.anthropic.com")
        self.base_url = self._endpoint.shown
        check_proxy_environment(self.base_url)
        check_certificates(self.base_url)
        # Credentials in the URL are basic auth (a proxy's); the key goes as x-api-key.
        self._headers = {**(headers or {}), **self._endpoint.auth_headers()}
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
            base_url=self._endpoint.connect,
            default_headers=self._headers or None,
            default_query=self._endpoint.query or None,
            max_retries=0,  # the engine owns retries
            http_client=http_client,
        )

    @property
    def cache_scope(self) -> str:
        return self._endpoint.scope  # the URL without its credentials

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        params = self.message_body(request)
        # Recent SDKs no longer type the sampling parameters, but models that take
        # them still read them from the body.
        sampling = {name: params.pop(name) for name in ("temperature", "top_p") if name in params}
        if sampling:
            params["extra_body"] = sampling
        limit = answer_limit(request, default_max_tokens=DEFAULT_MAX_TOKENS)
        raw = await self._attempt(
            self._sdk().messages.with_raw_response.create(timeout=timeout, **params),
            timeout=timeout,
            limit=limit,
        )
        http_response = raw.http_response
        content: bytes = http_response.content
        check_size(content, limit)
        return parse_message_body(content, request_id=http_response.headers.get("request-id"))

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
        from biasaudit.providers.anthropic_batch import AnthropicBatchAPI

        return AnthropicBatchAPI(self._sdk, self.message_body, parse_message_body)

    def classify(self, error: BaseException) -> ProviderError:
        import anthropic

        if isinstance(error, ProviderError):
            return error
        if isinstance(error, anthropic.APIConnectionError) or is_transport_error(error):
            return transport_error(self.base_url or "", error)
        if isinstance(error, anthropic.APIStatusError):
            body = error.body
            message = error.message
            if isinstance(body, dict) and isinstance(body.get("error"), dict):
                message = str(body["error"].get("message") or message)
            return classify_status(error.status_code, message, headers=error.response.headers)
        return super().classify(error)


def _split_system(messages: tuple[dict[str, Any], ...]) -> tuple[str, list[dict[str, Any]]]:
    """Anthropic takes the system prompt apart from the turns."""
    system = "\n\n".join(str(m["content"]) for m in messages if m["role"] in _SYSTEM_ROLES)
    turns = [
        {"role": m["role"], "content": m["content"]}
        for m in messages
        if m["role"] not in _SYSTEM_ROLES
    ]
    return system, turns


def parse_message_body(body: bytes | dict[str, Any], *, request_id: str | None) -> ModelResponse:
    """Normalise a Messages API answer: its bytes, or its parsed JSON (a batch's result).

    A message with no content is no answer unless the model refused
    (``stop_reason: refusal``).

    Raises
    ------
    MalformedResponseError
        Not a message (see :mod:`._wire`), or one without content or text.
    """
    message = read_wire(ANTHROPIC_BODY, body)
    stop_reason = message.get("stop_reason")
    refused = stop_reason == "refusal"
    if not message["content"] and not refused:
        raise malformed("a message with no content", body)
    texts = []
    for block in message["content"]:
        if block["type"] == "text":
            text = block.get("text")
            if text is None:
                raise malformed("a text block with no text", body)
            texts.append(text)
    usage = message.get("usage") or {}
    return ModelResponse(
        texts=("".join(texts),),
        finish_reasons=(stop_reason,),
        refusal="the model refused" if refused else None,
        model_version=message.get("model"),
        request_id=request_id or message.get("id"),
        usage=Usage(
            input_tokens=usage.get("input_tokens") or 0,
            output_tokens=usage.get("output_tokens") or 0,
        ),
    )
