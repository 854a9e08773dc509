"""OpenAI and every OpenAI-compatible server (vLLM, llama.cpp, Ollama, TGI, SGLang, hosts).

Requests go through the official ``openai`` async SDK (its aiohttp transport,
``max_retries=0``) so the wire behaviour is the SDK's own. Responses are read
from the raw body rather than through the SDK's pydantic types, which accept
anything: :mod:`._wire` checks every field biasaudit reads, strictly, and fails
the request on an answer of the wrong shape. Servers differ in how they shape
logprobs, and both shapes are read:

- OpenAI chat: ``choices[i].logprobs.content[0].top_logprobs = [{token, logprob}]``
- OpenAI legacy completions: ``choices[i].logprobs.top_logprobs[0] = {token: logprob}``
- llama.cpp ``/v1/completions``: the chat-style ``content[]`` list instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from biasaudit.errors import LogprobsUnavailableError, ProviderError
from biasaudit.providers._base import classify_status
from biasaudit.providers._batch_api import BatchAPI
from biasaudit.providers._prompt_batch import PromptBatcher, split_choices
from biasaudit.providers._sdk import (
    _URL_MEMO,
    SDKProvider,
    check_certificates,
    check_proxy_environment,
    http_module,
    is_transport_error,
    transport_error,
)
from biasaudit.providers._types import (
    Capabilities,
    EchoedToken,
    FirstTokenLogprobs,
    ModelRequest,
    ModelResponse,
    Usage,
)
from biasaudit.providers._wire import (
    OPENAI_BODY,
    ChatChoice,
    ChoiceLogprobs,
    OpenAIBody,
    Unreadable,
    answer_limit,
    check_size,
    malformed,
    read_wire,
)
from biasaudit.secrets import EndpointURL, remember_secret

__all__ = ["OpenAICompatibleProvider"]

# Placeholder for keyless self-hosted servers; the SDK refuses a missing key.
_NO_KEY = "no-key"


class OpenAICompatibleProvider(SDKProvider):
    """Chat and legacy completions through ``openai.AsyncOpenAI``.

    Parameters
    ----------
    name, model:
        The two halves of ``provider/model``.
    base_url:
        The ``.../v1`` root of the API.
    api_key:
        Secret key, or ``None`` for keyless servers. Never stored anywhere else.
    capabilities:
        What the endpoint is known to support.
    max_connections:
        Size of the HTTP connection pool (the engine's concurrency).
    uses_max_completion_tokens:
        OpenAI itself deprecates ``max_tokens`` on chat (and reasoning models
        refuse it); compatible servers expect ``max_tokens``.
    headers:
        Sent with every request (``--header``): a gateway's or a host's own key.

    Credentials in ``base_url`` (``user:password@``, ``?api-key=``) are sent
    with every request, basic auth in place of the API key, and never recorded
    (:class:`~biasaudit.secrets.EndpointURL`).
    """

    def __init__(
        self,
        name: str,
        model: str,
        *,
        base_url: str,
        api_key: str | None,
        capabilities: Capabilities,
        max_connections: int = 64,
        uses_max_completion_tokens: bool = False,
        headers: Mapping[str, str] | None = None,
        bearer: bool = True,
    ) -> None:
        self.name, self.model = name, model
        self._endpoint = EndpointURL(base_url)
        self.base_url = self._endpoint.shown
        check_proxy_environment(self.base_url)
        check_certificates(self.base_url)
        self._headers = {**(headers or {}), **self._endpoint.auth_headers()}
        self.capabilities = capabilities
        self._api_key = api_key or _NO_KEY
        remember_secret(self._api_key)
        self._max_connections = max_connections
        self._max_completion_tokens = uses_max_completion_tokens
        self._http: Any = None
        self._batcher: PromptBatcher | None = None
        self._templates: dict[tuple[str, float], Any] = {}
        # False: no "Authorization: Bearer" header (Azure: the key goes in api-key alone).
        self._bearer = bearer

    def __repr__(self) -> str:  # never show the key
        return f"OpenAICompatibleProvider({self.model_id!r}, base_url={self.base_url!r})"

    @property
    def cache_scope(self) -> str:
        return self._endpoint.scope  # the URL without its credentials

    def _new_client(self, http_client: Any) -> Any:
        self._http = http_module()
        return _client_class()(
            api_key=self._api_key,
            base_url=self._endpoint.connect,
            default_headers=self._headers or None,
            default_query=self._endpoint.query or None,
            max_retries=0,  # the engine owns retries (STYLE.md principle 2)
            http_client=http_client,
        )

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        if request.kind == "completion" and self.capabilities.prompt_batch > 1:
            if self._batcher is None:
                self._batcher = PromptBatcher(self.capabilities.prompt_batch, self._complete_many)
            return await self._batcher.submit(request, timeout)
        path, payload = self.request_body(request)
        limit = self._answer_limit(request)
        http_response = await self._attempt(
            self._post(self._sdk(), path, payload, timeout), timeout=timeout, limit=limit
        )
        return self._parse(
            _content(http_response, limit),
            request,
            request_id=http_response.headers.get("x-request-id"),
            content_type=http_response.headers.get("content-type"),
        )

    def _answer_limit(self, request: ModelRequest, prompts: int = 1) -> int:
        """The most bytes an answer to ``request`` may take (reasoning allowance included)."""
        extra = self.capabilities.reasoning_tokens or 0
        return answer_limit(request, extra_tokens=extra, prompts=prompts)

    def request_body(self, request: ModelRequest) -> tuple[str, dict[str, Any]]:
        """The path (below the base URL) and JSON body of one request, as it is sent."""
        payload: dict[str, Any]
        if request.kind == "chat":
            payload = {"model": self.model, "messages": list(request.messages or ())}
            return "/chat/completions", payload | self._chat_params(request)
        payload = {"model": self.model, "prompt": request.prompt}
        return "/completions", payload | _completion_params(request)

    def _parse(
        self,
        body: bytes | dict[str, Any],
        request: ModelRequest,
        *,
        request_id: str | None,
        content_type: str | None = None,
    ) -> ModelResponse:
        """The normalised response to ``request`` of an answer's bytes or parsed JSON.

        Raises
        ------
        MalformedResponseError
            An answer of the wrong shape (see :mod:`._wire`).
        """
        wire = read_wire(OPENAI_BODY, body, content_type=content_type)
        return self._normalised(wire, request, request_id=request_id, quoted=body)

    def _normalised(
        self,
        wire: OpenAIBody,
        request: ModelRequest,
        *,
        request_id: str | None,
        quoted: bytes | dict[str, Any] | None = None,
    ) -> ModelResponse:
        """An answer already read (``quoted`` in errors), normalised; a reasoning model's
        stop sequences applied."""
        try:
            response = _response(wire, request, request_id=request_id)
        except Unreadable as problem:
            raise malformed(str(problem), quoted if quoted is not None else dict(wire)) from None
        stops = request.params.stop
        if stops and self.capabilities.reasoning_tokens is not None:
            return _stopped(response, stops)
        return response

    def batch_api(self) -> BatchAPI | None:
        """OpenAI's Batch API; other OpenAI-compatible hosts have none here."""
        if not self.capabilities.batch:
            return None
        from biasaudit.providers.openai_batch import OpenAIBatchAPI

        return OpenAIBatchAPI(self._sdk, self.request_body, self._parse)

    async def _complete_many(
        self, requests: Sequence[ModelRequest], timeout: float
    ) -> list[ModelResponse | Exception]:
        """Legacy completions of several prompts with the same parameters, in one request."""
        first = requests[0]
        prompts = [r.prompt for r in requests]
        payload: dict[str, Any] = {"model": self.model, "prompt": prompts[0]}
        if len(prompts) > 1:
            payload["prompt"] = prompts
        payload |= _completion_params(first)
        limit = self._answer_limit(first, prompts=len(prompts))
        http_response = await self._attempt(
            self._post(self._sdk(), "/completions", payload, timeout), timeout=timeout, limit=limit
        )
        content = _content(http_response, limit)
        body = read_wire(
            OPENAI_BODY, content, content_type=http_response.headers.get("content-type")
        )
        request_id = http_response.headers.get("x-request-id")
        bodies = split_choices(body, len(requests), first.params.n or 1)
        outcomes: list[ModelResponse | Exception] = []
        for request, part in zip(requests, bodies, strict=True):
            try:
                outcomes.append(self._normalised(part, request, request_id=request_id))
            except Exception as error:  # one prompt's bad answer fails that prompt alone
                outcomes.append(error)
        return outcomes

    async def _post(self, client: Any, path: str, payload: dict[str, Any], timeout: float) -> Any:
        """POST ``payload`` as JSON through the SDK and return the raw HTTP response.

        This is what the SDK's generic ``client.post(path, cast_to=Response,
        body=payload, options={"timeout": timeout})`` (its documented way to make
        custom requests) does: the SDK's ``request`` builds and sends it with the
        SDK's own headers, auth, timeouts and error types, and the typed-parameter
        transform, which costs more CPU than the request itself, is skipped. The
        request options are built once per path and copied per request (building
        them from scratch costs about as much as parsing the answer), and the
        path is joined to the base URL once, as the SDK joins it.
        """
        template = self._templates.get((path, timeout))
        if template is None:
            headers = None if self._bearer else {"Authorization": _omitted()}
            template = _request_options(client, path, timeout, headers)
            if template is None:  # an SDK without the pieces used here
                options: dict[str, Any] = {"timeout": timeout}
                if headers is not None:
                    options["headers"] = headers
                return await client.post(
                    path, cast_to=self._http.Response, body=payload, options=options
                )
            self._templates[(path, timeout)] = template
        options = template.model_copy(update={"json_data": payload})
        return await client.request(self._http.Response, options)

    async def aclose(self) -> None:
        if self._batcher is not None:
            await self._batcher.aclose()
        await super().aclose()

    def _chat_params(self, request: ModelRequest) -> dict[str, Any]:
        p = request.params
        reasoning = self.capabilities.reasoning_tokens
        params = _common_params(request, reasoning=reasoning is not None)
        if p.max_tokens is not None:
            key = "max_completion_tokens" if self._max_completion_tokens else "max_tokens"
            # A reasoning model spends this budget on its hidden reasoning first.
            params[key] = p.max_tokens + (reasoning or 0)
        if p.wants_logprobs:
            params["logprobs"] = True
            if p.top_logprobs:
                params["top_logprobs"] = p.top_logprobs
        return params

    def classify(self, error: BaseException) -> ProviderError:
        import openai

        if isinstance(error, ProviderError):
            return error
        if isinstance(error, openai.APIStatusError):
            message = _error_message(error.body, error.message)
            with_path = _with_api_path(self.base_url) if error.status_code == 404 else None
            if with_path is not None:  # the usual slip: the server's address, not the API's
                message += (
                    " (the base URL has no path: OpenAI-compatible servers serve the API "
                    f"under /v1, as {with_path})"
                )
            return classify_status(
                error.status_code, message, headers=error.response.headers, code=error.code
            )
        if isinstance(error, openai.APIResponseValidationError):
            return malformed(f"an answer the SDK cannot read ({error.message})", b"")
        # Timeouts, resets, refusals; and what the SDK lets through unwrapped: aiohttp's
        # errors for a reply that is not HTTP (an SSH banner, a bad header or chunk).
        if isinstance(error, openai.APIConnectionError) or is_transport_error(error):
            return transport_error(self.base_url or "", error)
        return super().classify(error)


_CLIENT_CLASS: Any = None


def _client_class() -> Any:
    """``openai.AsyncOpenAI``, parsing each absolute request URL once per client.

    The SDK parses the URL of every request again (``_prepare_url``: about a
    fiftieth of the client's CPU per request at 2,000 requests/s). An absolute
    URL's parse does not depend on the client (a relative one's depends on its
    base URL, and is left to the SDK), and the parsed URL is immutable, so the
    same object serves every request to that URL.
    """
    global _CLIENT_CLASS
    if _CLIENT_CLASS is not None:
        return _CLIENT_CLASS
    import openai

    class AsyncOpenAI(openai.AsyncOpenAI):
        def _prepare_url(self, url: str) -> Any:
            if not url.startswith(("http://", "https://")):
                return super()._prepare_url(url)
            memo: dict[str, Any] = self.__dict__.setdefault("_biasaudit_urls", {})
            parsed = memo.get(url)
            if parsed is None:
                parsed = super()._prepare_url(url)
                if len(memo) < _URL_MEMO:
                    memo[url] = parsed
            return parsed

    _CLIENT_CLASS = AsyncOpenAI
    return AsyncOpenAI


def _request_options(
    client: Any, path: str, timeout: float, headers: dict[str, Any] | None = None
) -> Any:
    """The SDK's request options for a JSON POST to ``path``, as its ``post`` builds them
    (with ``headers`` of this request, where given)."""
    try:
        from openai._models import FinalRequestOptions
    except ImportError:
        return None
    base = client.base_url  # the SDK's own join: base URL (ending in "/") + relative path
    url = str(base.copy_with(raw_path=base.raw_path + path.lstrip("/").encode("ascii")))
    options = FinalRequestOptions.construct(
        method="post", url=url, json_data=None, content=None, files=None, timeout=timeout
    )
    return options if headers is None else options.model_copy(update={"headers": headers})


def _omitted() -> Any:
    """The SDK's marker for a header it must not send (its documented ``Omit``)."""
    import openai

    return openai.Omit()


_SAMPLING_FIELDS = ("temperature", "top_p", "n", "seed", "reasoning_effort")
_REASONING_FIELDS = ("n", "seed", "reasoning_effort")  # what a reasoning model takes of them


def _common_params(request: ModelRequest, *, reasoning: bool = False) -> dict[str, Any]:
    """The body's sampling fields.

    A reasoning model refuses ``temperature`` and ``top_p`` (the provider's
    ``check`` lets only their default, 1, through, so leaving them out asks for
    the same) and ``stop`` (applied to its answers instead, :func:`_stopped`).
    """
    p = request.params
    params: dict[str, Any] = {}
    for field in _REASONING_FIELDS if reasoning else _SAMPLING_FIELDS:
        value = getattr(p, field)
        if value is not None:
            params[field] = value
    if p.stop and not reasoning:
        params["stop"] = list(p.stop)
    return params


def _stopped(response: ModelResponse, stops: Sequence[str]) -> ModelResponse:
    """Each answer cut before its first stop sequence, as a server applying ``stop`` cuts it.

    The finish reason of a cut answer becomes ``"stop"``; the token usage is what
    the endpoint billed.
    """
    texts, reasons = [], []
    for text, reason in zip(response.texts, response.finish_reasons, strict=True):
        found = [at for at in map(text.find, filter(None, stops)) if at >= 0]
        texts.append(text[: min(found)] if found else text)
        reasons.append("stop" if found else reason)
    return response.model_copy(update={"texts": tuple(texts), "finish_reasons": tuple(reasons)})


def _completion_params(request: ModelRequest) -> dict[str, Any]:
    p = request.params
    params = _common_params(request)
    if p.max_tokens is not None:
        params["max_tokens"] = p.max_tokens
    if p.wants_logprobs or p.echo:
        # Legacy completions take the number of alternatives; 1 still returns the token's own.
        params["logprobs"] = max(1, p.top_logprobs or 0)
    if p.echo:
        params["echo"] = True
    return params


def _content(http_response: Any, limit: int) -> bytes:
    """The answer's bytes (decoded), refused beyond ``limit``."""
    content: bytes = http_response.content
    check_size(content, limit)
    return content


def _response(body: OpenAIBody, request: ModelRequest, *, request_id: str | None) -> ModelResponse:
    """A chat or completions answer, already read as :class:`OpenAIBody`, normalised.

    Raises :class:`Unreadable` for a choice with no message (chat) or no text
    (completions).
    """
    choices = sorted(body["choices"], key=lambda c: c.get("index") or 0)
    texts: list[str] = []
    finish: list[str | None] = []
    logprobs: list[FirstTokenLogprobs | None] = []
    refusals: list[str] = []
    for choice in choices:
        texts.append(_choice_text(choice, request.kind, refusals))
        reason = choice.get("finish_reason")
        finish.append(reason)
        if reason == "content_filter":
            refusals.append("the endpoint's content filter stopped the answer")
        logprobs.append(_first_token_logprobs(choice.get("logprobs")))
    wanted = request.params.wants_logprobs
    echoed = None
    if request.params.echo:
        echoed = _echoed(choices[0].get("logprobs") if choices else None, request.prompt or "")
        logprobs = [None] * len(choices)  # the first entries are the prompt's, not the answer's
    elif wanted and all(entry is None for entry in logprobs) and any(texts):
        raise LogprobsUnavailableError(
            "the endpoint answered without logprobs although they were requested; "
            "it cannot give logprobs (use sampled replicates instead)"
        )
    usage = body.get("usage") or {}
    return ModelResponse(
        echoed=echoed,
        texts=tuple(texts),
        logprobs=tuple(logprobs) if wanted else None,
        finish_reasons=tuple(finish),
        model_version=body.get("model"),
        refusal="; ".join(refusals) or None,
        system_fingerprint=body.get("system_fingerprint"),
        request_id=request_id or body.get("id"),
        usage=Usage(
            input_tokens=usage.get("prompt_tokens") or 0,
            output_tokens=usage.get("completion_tokens") or 0,
        ),
    )


def _choice_text(choice: ChatChoice, kind: str, refusals: list[str]) -> str:
    """A choice's text; a chat message's refusal is added to ``refusals``."""
    if kind != "chat":
        text = choice.get("text")
        if text is None:
            raise Unreadable("a completions choice with no 'text'")
        return text
    message = choice.get("message")
    if message is None:
        raise Unreadable("a chat choice with no 'message'")
    refusal = message.get("refusal")
    if refusal:
        refusals.append(refusal)
    content = message.get("content")
    if isinstance(content, list):  # text in parts (some servers): the text parts, joined
        return "".join(part.get("text") or "" for part in content if "text" in part["type"])
    return content or ""


def _echoed(block: ChoiceLogprobs | None, prompt: str) -> tuple[EchoedToken, ...]:
    """The prompt's tokens, log-probabilities and offsets from an echoed answer.

    Either logprobs shape: legacy lists (``tokens``, ``token_logprobs``,
    ``text_offset``; offsets rebuilt from the tokens where missing) or
    ``content`` entries. Only the tokens within the prompt are kept.

    Raises
    ------
    LogprobsUnavailableError
        The answer holds no token log-probabilities: the endpoint does not echo.
    Unreadable
        The lists disagree in length.
    """
    tokens: list[str] = []
    logprobs: list[float | None] = []
    offsets: list[int] | None = None
    if block is not None and block.get("content"):
        for entry in block.get("content") or ():
            tokens.append(entry["token"])
            logprobs.append(entry.get("logprob"))
    elif block is not None and block.get("tokens"):
        tokens = list(block.get("tokens") or ())
        logprobs = list(block.get("token_logprobs") or ())
        offsets = block.get("text_offset")
        if len(logprobs) != len(tokens) or (offsets is not None and len(offsets) != len(tokens)):
            raise Unreadable("echoed tokens, logprobs and offsets differ in length")
    if not tokens:
        raise LogprobsUnavailableError(
            "the endpoint did not echo the prompt's token logprobs, so a continuation cannot "
            "be scored (use --next-word completions, chat or samples)"
        )
    if offsets is None:
        offsets = list(itertools.accumulate((len(token) for token in tokens[:-1]), initial=0))
    if not offsets or offsets[0] >= len(prompt):  # only the answer's tokens came back
        raise LogprobsUnavailableError(
            "the endpoint did not echo the prompt's tokens, so a continuation cannot be "
            "scored (use --next-word completions, chat or samples)"
        )
    return tuple(
        EchoedToken(token=token, logprob=logprob, offset=offset)
        for token, logprob, offset in zip(tokens, logprobs, offsets, strict=True)
        if offset < len(prompt)
    )


def _first_token_logprobs(block: ChoiceLogprobs | None) -> FirstTokenLogprobs | None:
    """Normalise either logprobs shape to the first token's alternatives."""
    if block is None:
        return None
    content = block.get("content")
    if content is not None:  # chat shape (and llama.cpp's completions)
        if not content:
            return None
        first = content[0]
        top = [(alt["token"], alt["logprob"]) for alt in first.get("top_logprobs") or ()]
        return _first_token(first["token"], first.get("logprob"), top)
    tokens = block.get("tokens")
    if tokens:  # legacy completions shape
        token_logprobs = block.get("token_logprobs") or [None]
        top_list = block.get("top_logprobs") or [None]
        top = list((top_list[0] or {}).items())
        return _first_token(tokens[0], token_logprobs[0], top)
    return None


def _first_token(
    token: str, logprob: float | None, top: list[tuple[str, float]]
) -> FirstTokenLogprobs:
    top.sort(key=lambda pair: -pair[1])
    own = logprob if logprob is not None else dict(top).get(token)
    return FirstTokenLogprobs(token=token, logprob=own, top=tuple(top))


def _error_message(body: object, fallback: str) -> str:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return fallback


def _with_api_path(base_url: str | None) -> str | None:
    """``base_url`` with ``/v1`` for its path, where it names a server without a path
    (``http://host:8000``); ``None`` where it has a path of its own."""
    from urllib.parse import urlsplit, urlunsplit

    if not base_url:
        return None
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path="/v1")) if parts.path in ("", "/") else None
