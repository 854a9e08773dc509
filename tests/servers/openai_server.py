"""Loopback server speaking the OpenAI REST wire format (chat + legacy completions).

Run standalone for benchmarks / kill tests (from the repo root):
    python -m tests.servers.openai_server --port 0 --latency 0.05 [--model X] [--log FILE]
        [--batch-delay S]
The Batch API (files and batches) is in `openai_batches.py`.
It prints `PORT <n>` once listening and serves until SIGTERM.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from aiohttp import web

from .base import ApiError, Builder, FakeProviderServer, cli_parser, json_response, run_cli
from .batches import BatchBook
from .faults import Fault
from .openai_batches import OpenAIBatchRoutes
from .responders import (
    RESPONDERS,
    JsonDict,
    Rendered,
    Responder,
    content_text,
    count_tokens,
    position_dist,
    render,
    sampled_logprob,
    tokenize,
    top_k,
)

CompletionsLogprobsStyle = Literal["legacy", "chat"]
EchoScorer = Callable[[str, str], float]
"""``scorer(text_before, token) -> logprob`` of a prompt token, for ``echo``."""

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
_MAX_N = 128

# Error `type` OpenAI uses per status when the fault doesn't say.
_ERROR_TYPES: Mapping[int, str] = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "requests",
}
_ERROR_CODES: Mapping[int, str] = {401: "invalid_api_key", 429: "rate_limit_exceeded"}


class OpenAIServer(FakeProviderServer):
    """OpenAI-compatible server; `base_url` ends in /v1 like the SDK expects."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        responder: Responder | None = None,
        max_top_logprobs: int = 20,
        logprobs_supported: bool = True,
        completions_logprobs_style: CompletionsLogprobsStyle = "legacy",
        model: str = "test-model",
        system_fingerprint: str | None = "fp_test1",
        require_api_key: str | None = None,
        record: bool = True,
        log_path: str | None = None,
        batch_delay: float = 0.0,
        batch_max_requests: int | None = None,
        reasoning_tokens: int = 0,
        echo_logprob: EchoScorer | None = None,
    ) -> None:
        super().__init__(
            latency=latency,
            responder=responder,
            model=model,
            require_api_key=require_api_key,
            record=record,
            log_path=log_path,
        )
        if completions_logprobs_style not in ("legacy", "chat"):
            raise ValueError(f"bad completions_logprobs_style {completions_logprobs_style!r}")
        self.max_top_logprobs = max_top_logprobs
        self.logprobs_supported = logprobs_supported
        self.completions_logprobs_style = completions_logprobs_style
        self.system_fingerprint = system_fingerprint
        # > 0: chat answers as OpenAI's reasoning models do (_refuse_non_reasoning_params).
        self.reasoning_tokens = reasoning_tokens
        # Legacy completions with `echo`: the logprob of each prompt token given the text
        # before it (None: this server does not echo, as OpenAI's chat-era models).
        self.echo_logprob = echo_logprob
        self.batches = BatchBook(delay=batch_delay, max_requests=batch_max_requests)
        self._batch_routes = OpenAIBatchRoutes(self, self.batches)

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def routes(self) -> Iterable[web.AbstractRouteDef]:
        return [
            web.post(CHAT_PATH, self._post(self.chat_completion)),
            web.post(COMPLETIONS_PATH, self._post(self.completion)),
            web.get("/v1/models", self._models),
            *self._batch_routes.routes(),
        ]

    def _post(self, build: Builder) -> Any:
        async def handler(request: web.Request) -> web.StreamResponse:
            return await self.handle(request, build)

        return handler

    # ------------------------------------------------------------ auth / errors
    def authorized(self, headers: Mapping[str, str]) -> bool:
        return headers.get("Authorization") == f"Bearer {self.require_api_key}"

    def auth_error(self) -> ApiError:
        return ApiError(401, "Incorrect API key provided.", code="invalid_api_key")

    def error_payload(self, err: ApiError) -> JsonDict:
        default_type = "server_error" if err.status >= 500 else "invalid_request_error"
        return {
            "error": {
                "message": err.message,
                "type": err.error_type or _ERROR_TYPES.get(err.status, default_type),
                "param": err.param,
                "code": err.code or _ERROR_CODES.get(err.status),
            }
        }

    # ------------------------------------------------------------ chat
    def chat_completion(self, body: JsonDict, fault: Fault | None) -> JsonDict:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "'messages' must be a non-empty array.", param="messages")
        n = _n(body)
        if self.reasoning_tokens:
            _refuse_non_reasoning_params(body)
        k = self._chat_top_k(body)
        max_tokens = _max_tokens(body, "max_completion_tokens", "max_tokens")
        if self.reasoning_tokens and max_tokens is not None:
            max_tokens = max(0, max_tokens - self.reasoning_tokens)
        stops = _stops(body.get("stop"))
        null = fault is not None and fault.null_content
        rendered = [render(c, max_tokens, stops) for c in self.choices(body, CHAT_PATH, n, fault)]
        choices = [_chat_choice(i, r, k, null) for i, r in enumerate(rendered)]
        prompt_tokens = sum(count_tokens(content_text(m.get("content"))) + 3 for m in messages)
        usage = _usage(prompt_tokens, rendered)
        if self.reasoning_tokens:
            # Reasoning is billed as output; the budget is spent on it before the answer.
            reasoning = min(self.reasoning_tokens, _budget(body)) * len(rendered)
            usage["completion_tokens"] += reasoning
            usage["total_tokens"] += reasoning
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return self._envelope("chatcmpl-", "chat.completion", body, choices, usage)

    def _chat_top_k(self, body: JsonDict) -> int | None:
        """Requested top_logprobs count, or None when no logprobs were asked for."""
        wants, top = body.get("logprobs"), body.get("top_logprobs")
        if not wants and top is None:
            return None
        self._check_logprobs_supported()
        if not wants:
            raise ApiError(
                400,
                "Invalid value: 'top_logprobs'. 'logprobs' must be set to true "
                "when 'top_logprobs' is specified.",
                param="top_logprobs",
            )
        return self._check_k(0 if top is None else top, "top_logprobs")

    # ------------------------------------------------------------ legacy completions
    def completion(self, body: JsonDict, fault: Fault | None) -> JsonDict:
        prompts = _prompts(body.get("prompt"))
        n = _n(body)
        k = self._completion_k(body)
        max_tokens = _max_tokens(body, "max_tokens")
        if max_tokens is None:
            max_tokens = 16  # the legacy endpoint's documented default
        stops = _stops(body.get("stop"))
        choices: list[JsonDict] = []
        all_rendered: list[Rendered] = []
        for p_idx, prompt in enumerate(prompts):
            # Responders see one prompt at a time, whatever the batch shape.
            sub = body if body.get("prompt") == prompt else {**body, "prompt": prompt}
            for j, choice in enumerate(self.choices(sub, COMPLETIONS_PATH, n, fault)):
                r = render(choice, max_tokens, stops)
                all_rendered.append(r)
                made = self._completion_choice(p_idx * n + j, r, k, len(prompt))
                if body.get("echo"):
                    made = self._echo(made, prompt, k)
                choices.append(made)
        usage = _usage(sum(count_tokens(p) for p in prompts), all_rendered)
        return self._envelope("cmpl-", "text_completion", body, choices, usage)

    def _completion_k(self, body: JsonDict) -> int | None:
        k = body.get("logprobs")
        if k is None or k is False:
            return None
        self._check_logprobs_supported()
        return self._check_k(k, "logprobs")

    def _completion_choice(self, index: int, r: Rendered, k: int | None, offset: int) -> JsonDict:
        logprobs: JsonDict | None = None
        if k is not None and self.completions_logprobs_style == "chat":
            logprobs = {"content": _chat_logprobs(r, k)}  # llama.cpp's shape
        elif k is not None:
            logprobs = _legacy_logprobs(r, k, offset)
        return {
            "index": index,
            "text": r.text,
            "logprobs": logprobs,
            "finish_reason": r.finish_reason,
        }

    def _echo(self, choice: JsonDict, prompt: str, k: int | None) -> JsonDict:
        """``echo``, as vLLM answers it: the text and the logprobs lists start with the
        prompt's own tokens (the first without a logprob), offsets from the prompt's start."""
        if self.echo_logprob is None:
            raise ApiError(400, "echo is not supported with this model", param="echo")
        tokens = tokenize(prompt)
        offsets = [0, *itertools.accumulate(len(t) for t in tokens[:-1])]
        logprobs = [
            None if i == 0 else self.echo_logprob(prompt[:offset], token)
            for i, (token, offset) in enumerate(zip(tokens, offsets, strict=True))
        ]
        block = choice["logprobs"] or {"tokens": [], "token_logprobs": [], "top_logprobs": [],
                                        "text_offset": []}  # fmt: skip
        if k is not None and self.completions_logprobs_style == "legacy":
            block = {
                "tokens": [*tokens, *block["tokens"]],
                "token_logprobs": [*logprobs, *block["token_logprobs"]],
                "top_logprobs": [
                    *(
                        {} if lp is None else {t: lp}
                        for t, lp in zip(tokens, logprobs, strict=True)
                    ),
                    *block["top_logprobs"],
                ],
                "text_offset": [*offsets, *block["text_offset"]],
            }
        return {**choice, "text": prompt + choice["text"], "logprobs": block}

    # ------------------------------------------------------------ shared
    def _check_logprobs_supported(self) -> None:
        if not self.logprobs_supported:
            raise ApiError(400, "logprobs are not supported with this model", param="logprobs")

    def _check_k(self, k: object, param: str) -> int:
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise ApiError(400, f"'{param}' must be a non-negative integer.", param=param)
        if k > self.max_top_logprobs:
            # vLLM's wording for the same condition.
            raise ApiError(
                400,
                f"Requested sample logprobs of {k}, which is greater than max allowed: "
                f"{self.max_top_logprobs}",
                param=param,
            )
        return k

    def _envelope(
        self, id_prefix: str, obj: str, body: JsonDict, choices: list[JsonDict], usage: JsonDict
    ) -> JsonDict:
        return {
            "id": self.new_id(id_prefix),
            "object": obj,
            "created": self.timestamp(),
            "model": body.get("model") or self.model,
            "system_fingerprint": self.system_fingerprint,
            "choices": choices,
            "usage": usage,
        }

    async def _models(self, _request: web.Request) -> web.Response:
        entry = {"id": self.model, "object": "model", "created": 0, "owned_by": "biasaudit-tests"}
        return json_response({"object": "list", "data": [entry]})


# ---------------------------------------------------------------- wire shapes
def _usage(prompt_tokens: int, rendered: Sequence[Rendered]) -> JsonDict:
    completion_tokens = sum(len(r.tokens) for r in rendered)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _chat_choice(index: int, r: Rendered, k: int | None, null_content: bool) -> JsonDict:
    logprobs = None if k is None else {"content": _chat_logprobs(r, k), "refusal": None}
    return {
        "index": index,
        "message": {
            "role": "assistant",
            "content": None if null_content else r.text,
            "refusal": None,
        },
        "logprobs": logprobs,
        "finish_reason": r.finish_reason,
    }


def _chat_logprobs(r: Rendered, k: int) -> list[JsonDict]:
    out = []
    for i, token in enumerate(r.tokens):
        dist = position_dist(r, i)
        out.append(
            {
                "token": token,
                "logprob": sampled_logprob(token, dist),
                "bytes": list(token.encode()),
                "top_logprobs": [
                    {"token": t, "logprob": lp, "bytes": list(t.encode())}
                    for t, lp in top_k(token, dist, k)
                ],
            }
        )
    return out


def _legacy_logprobs(r: Rendered, k: int, prompt_len: int) -> JsonDict:
    token_logprobs, tops, offsets = [], [], []
    offset = prompt_len  # OpenAI counts text_offset from the start of the prompt
    for i, token in enumerate(r.tokens):
        dist = position_dist(r, i)
        lp = sampled_logprob(token, dist)
        top = dict(top_k(token, dist, k))
        top.setdefault(token, lp)  # "the logprob of the sampled token is always returned"
        token_logprobs.append(lp)
        tops.append(top)
        offsets.append(offset)
        offset += len(token)
    return {
        "tokens": list(r.tokens),
        "token_logprobs": token_logprobs,
        "top_logprobs": tops,
        "text_offset": offsets,
    }


# ---------------------------------------------------------------- request parsing
def _n(body: JsonDict) -> int:
    n = body.get("n")
    if n is None:
        return 1
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= _MAX_N:
        raise ApiError(400, f"'n' must be an integer between 1 and {_MAX_N}.", param="n")
    return n


def _refuse_non_reasoning_params(body: JsonDict) -> None:
    """What OpenAI's API answers a reasoning model's request with parameters it refuses."""
    if body.get("max_tokens") is not None:
        raise ApiError(
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            param="max_tokens",
            code="unsupported_parameter",
        )
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None and value != 1:
            raise ApiError(
                400,
                f"Unsupported value: '{name}' does not support {value} with this model. "
                "Only the default (1) value is supported.",
                param=name,
                code="unsupported_value",
            )
    for name in ("logprobs", "top_logprobs", "stop"):
        if body.get(name) not in (None, False):
            raise ApiError(
                400,
                f"Unsupported parameter: '{name}' is not supported with this model.",
                param=name,
                code="unsupported_parameter",
            )


def _budget(body: JsonDict) -> int:
    value = body.get("max_completion_tokens")
    return value if isinstance(value, int) else 1 << 30


def _max_tokens(body: JsonDict, *names: str) -> int | None:
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ApiError(400, f"'{name}' must be a positive integer.", param=name)
        return value
    return None


def _stops(stop: object) -> list[str]:
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop) and len(stop) <= 4:
        return stop
    raise ApiError(400, "'stop' must be a string or an array of up to 4 strings.", param="stop")


def _prompts(prompt: object) -> list[str]:
    """Legacy `prompt`: a string, a list of strings, or token-id arrays (shown as text)."""
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, str) for p in prompt):
            return list(prompt)
        if all(isinstance(t, int) for t in prompt):
            return [" ".join(map(str, prompt))]
        if all(isinstance(p, list) and all(isinstance(t, int) for t in p) for p in prompt):
            return [" ".join(map(str, p)) for p in prompt]
    raise ApiError(400, "'prompt' must be a string or an array of strings.", param="prompt")


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli_parser("python -m tests.servers.openai_server")
    parser.add_argument("--max-top-logprobs", type=int, default=20)
    parser.add_argument("--no-logprobs", action="store_true", help="reject logprob requests")
    parser.add_argument(
        "--completions-logprobs-style", choices=("legacy", "chat"), default="legacy"
    )
    args = parser.parse_args(argv)
    server = OpenAIServer(
        latency=args.latency,
        model=args.model,
        require_api_key=args.require_api_key,
        max_top_logprobs=args.max_top_logprobs,
        logprobs_supported=not args.no_logprobs,
        completions_logprobs_style=args.completions_logprobs_style,
        log_path=args.log,
        batch_delay=args.batch_delay,
        responder=RESPONDERS[args.responder],
    )
    run_cli(server, args.host, args.port)


if __name__ == "__main__":
    main()
