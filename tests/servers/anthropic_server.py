"""Loopback server speaking the Anthropic Messages API wire format.

`base_url` has no /v1: the anthropic SDK appends "/v1/messages" itself.
Standalone: python -m tests.servers.anthropic_server --port 0 [--latency S] [--log FILE]
    [--batch-delay S]
Message Batches are in `anthropic_batches.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from aiohttp import web

from .anthropic_batches import AnthropicBatchRoutes
from .base import ApiError, FakeProviderServer, cli_parser, json_response, run_cli
from .batches import BatchBook
from .faults import Fault
from .responders import (
    RESPONDERS,
    JsonDict,
    Rendered,
    Responder,
    content_text,
    count_tokens,
    render,
)

MESSAGES_PATH = "/v1/messages"

_ERROR_TYPES: Mapping[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
# OpenAI-style finish reasons a responder may set, in Anthropic's vocabulary.
_STOP_REASONS: Mapping[str, str] = {"stop": "end_turn", "length": "max_tokens"}


class AnthropicServer(FakeProviderServer):
    """Messages API server; one choice per request (the API has no `n`)."""

    request_id_header = "request-id"

    def __init__(
        self,
        *,
        latency: float = 0.0,
        responder: Responder | None = None,
        model: str = "test-model",
        require_api_key: str | None = None,
        record: bool = True,
        log_path: str | None = None,
        batch_delay: float = 0.0,
        batch_max_requests: int | None = None,
    ) -> None:
        super().__init__(
            latency=latency,
            responder=responder,
            model=model,
            require_api_key=require_api_key,
            record=record,
            log_path=log_path,
        )
        self.batches = BatchBook(delay=batch_delay, max_requests=batch_max_requests)
        self._batch_routes = AnthropicBatchRoutes(self, self.batches)

    @property
    def base_url(self) -> str:
        return self.root_url

    def routes(self) -> Iterable[web.AbstractRouteDef]:
        return [
            web.post(MESSAGES_PATH, self._messages),
            web.get("/v1/models", self._models),
            *self._batch_routes.routes(),
        ]

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        return await self.handle(request, self.message)

    # ------------------------------------------------------------ auth / errors
    def authorized(self, headers: Mapping[str, str]) -> bool:
        key = self.require_api_key
        return headers.get("x-api-key") == key or headers.get("Authorization") == f"Bearer {key}"

    def auth_error(self) -> ApiError:
        return ApiError(401, "invalid x-api-key")

    def error_payload(self, err: ApiError) -> JsonDict:
        default_type = "api_error" if err.status >= 500 else "invalid_request_error"
        error: JsonDict = {
            "type": err.error_type or _ERROR_TYPES.get(err.status, default_type),
            "message": err.message,
        }
        if err.code:
            # Where the SDK looks for a machine-readable code (extract_error_code).
            error["details"] = {"error_code": err.code}
        return {"type": "error", "error": error, "request_id": self.new_id("req_")}

    # ------------------------------------------------------------ messages
    def message(self, body: JsonDict, fault: Fault | None) -> JsonDict:
        messages, max_tokens, system = _validate(body)
        choice = self.choices(body, MESSAGES_PATH, 1, fault)[0]
        r = render(choice, max_tokens, _stop_sequences(body.get("stop_sequences")))
        null = fault is not None and fault.null_content
        input_tokens = count_tokens(system) + sum(
            count_tokens(content_text(m.get("content"))) + 3 for m in messages
        )
        return {
            "id": self.new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or self.model,
            "content": [] if null else [{"type": "text", "text": r.text}],
            "stop_reason": _stop_reason(r),
            "stop_sequence": r.stop_sequence,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": len(r.tokens),
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "service_tier": "standard",
            },
        }

    async def _models(self, _request: web.Request) -> web.Response:
        entry = {
            "type": "model",
            "id": self.model,
            "display_name": self.model,
            "created_at": "2025-01-01T00:00:00Z",
        }
        page = {"data": [entry], "has_more": False, "first_id": self.model, "last_id": self.model}
        return json_response(page)


def _validate(body: JsonDict) -> tuple[list[JsonDict], int, str]:
    """The fields the real API rejects a request without; returns (messages, max_tokens, system)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages: Field required")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ApiError(400, "max_tokens: Field required (a positive integer)")
    if not isinstance(body.get("model"), str):
        raise ApiError(400, "model: Field required")
    system = body.get("system", "")
    if not isinstance(system, str | list):
        raise ApiError(400, "system: Input should be a valid string or list of text blocks")
    return messages, max_tokens, content_text(system)


def _stop_sequences(stops: object) -> Sequence[str]:
    if stops is None:
        return ()
    if isinstance(stops, list) and all(isinstance(s, str) for s in stops):
        return stops
    raise ApiError(400, "stop_sequences: Input should be a valid list of strings")


def _stop_reason(r: Rendered) -> str:
    if r.stop_sequence is not None:
        return "stop_sequence"
    return _STOP_REASONS.get(r.finish_reason, r.finish_reason)


def main(argv: Sequence[str] | None = None) -> None:
    args = cli_parser("python -m tests.servers.anthropic_server").parse_args(argv)
    server = AnthropicServer(
        latency=args.latency,
        model=args.model,
        require_api_key=args.require_api_key,
        log_path=args.log,
        batch_delay=args.batch_delay,
        responder=RESPONDERS[args.responder],
    )
    run_cli(server, args.host, args.port)


if __name__ == "__main__":
    main()
