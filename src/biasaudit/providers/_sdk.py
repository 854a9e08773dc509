"""What the two SDK-backed providers share: their HTTP client, lifecycle and network errors."""

from __future__ import annotations

import asyncio
import datetime
import errno
import logging
import os
import socket
import time
from collections.abc import Awaitable
from contextlib import suppress
from typing import Any, TypeVar

from biasaudit.errors import (
    EndpointUnreachableError,
    ProviderError,
    TransientProviderError,
    UsageError,
)
from biasaudit.providers._base import Provider
from biasaudit.providers._wire import ANSWER_LIMIT, malformed
from biasaudit.secrets import redact

__all__ = [
    "SDKProvider",
    "check_certificates",
    "check_proxy_environment",
    "http_module",
    "is_transport_error",
    "transport_error",
]

T = TypeVar("T")


class SDKProvider(Provider):
    """A provider that talks through an official SDK client, built on first use.

    Subclasses implement :meth:`_new_client`; this class keeps the client,
    hands the SDK an aiohttp transport pooled for the engine's concurrency, and
    closes it in :meth:`aclose`.
    """

    _client: Any = None
    _max_connections: int = 64

    def _new_client(self, http_client: Any) -> Any:
        raise NotImplementedError

    def _sdk(self) -> Any:
        if self._client is None:
            self._client = self._new_client(
                _aiohttp_client(self._max_connections, loopback=_is_loopback(self.base_url or ""))
            )
        return self._client

    def prepare(self) -> None:
        self._sdk()

    async def _attempt(self, call: Awaitable[T], *, timeout: float, limit: int) -> T:
        """Await one HTTP attempt: all of it within ``timeout`` s, at most ``limit`` bytes read.

        The SDKs' own timeout bounds each read, so a server that sends a byte a
        second never trips it; ``--timeout`` is a deadline for the whole attempt.
        The HTTP client stops reading an answer larger than ``limit``
        (:data:`._wire.ANSWER_LIMIT`).
        """
        token = ANSWER_LIMIT.set(limit)
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                return await call
        except TimeoutError:
            if not deadline.expired():
                raise
            raise TransientProviderError(
                redact(f"no complete answer from {self.base_url} within {timeout:g} s (--timeout)")
            ) from None
        finally:
            ANSWER_LIMIT.reset(token)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def http_module() -> Any:
    """The HTTP library the installed SDKs are built on (httpx2, or httpx before it)."""
    try:
        import httpx2

        return httpx2
    except ImportError:  # SDK releases before the move to httpx2
        import httpx

        return httpx


def _aiohttp_client(max_connections: int, *, loopback: bool = False) -> Any:
    """The SDK's aiohttp transport, pooled for our concurrency.

    Measured here it serves about twice the requests per second of the SDK's
    default httpx transport at 128 concurrent requests (bench/RESULTS.md). The
    client is the SDK's own ``DefaultAioHttpClient`` with a leaner
    ``build_request``/``send`` for the SDK's plain JSON posts (see
    :func:`_lean_client_class`).
    """
    limits = http_module().Limits(
        max_connections=max_connections, max_keepalive_connections=max_connections
    )
    import openai  # both SDKs ship the same client classes; openai's is always installed

    # A server on this machine never goes through a proxy: where a proxy variable is one
    # the client could not parse, it reads none of the environment for such a server
    # (SSL_CERT_FILE then goes unread too), so that the variable cannot stop it.
    malformed = loopback and any(
        _proxy_problem(value) for scheme, value in _proxies().items() if scheme != "no"
    )
    options: dict[str, Any] = {"trust_env": False} if malformed else {"mounts": _loopback_direct()}
    try:
        return _lean_client_class()(limits=limits, **options)
    except RuntimeError:  # installed without the aiohttp extra
        return openai.DefaultAsyncHttpxClient(limits=limits, **options)


# This machine's own names and addresses: never sent through a proxy.
_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def _is_loopback(base_url: str) -> bool:
    import urllib.parse

    return (urllib.parse.urlsplit(base_url).hostname or "") in _LOOPBACK


_PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")


def check_proxy_environment(base_url: str) -> None:
    """Refuse, before anything is sent, a proxy variable the HTTP client cannot read
    (``HTTP_PROXY='::not a url::'``, a port that is not a number), naming the variable
    and what is wrong with it. A server on this machine is reached without any proxy,
    so for it nothing is checked.

    Raises
    ------
    UsageError
        A proxy variable that is not a proxy's address.
    """

    if _is_loopback(base_url):
        return
    for scheme, value in _proxies().items():
        if scheme == "no" or not value:
            continue
        problem = _proxy_problem(value)
        if problem is not None:
            names = (f"{scheme}_proxy", f"{scheme.upper()}_PROXY")
            named = next((name for name in names if os.environ.get(name) == value), names[1])
            raise UsageError(
                f"{named}={redact(value)!r} {problem}: set it to the proxy's address "
                f"(http://HOST:PORT), or unset it to reach {base_url} directly"
            )


def check_certificates(base_url: str) -> None:
    """Refuse, before anything is sent to an ``https://`` server, an ``SSL_CERT_FILE`` or
    ``SSL_CERT_DIR`` the TLS layer cannot load: the SDKs' transport would report every
    request's failure as a connection error, retried, naming neither the variable nor
    the file.

    Raises
    ------
    UsageError
        The variable names no readable bundle of certificates (or no folder).
    """
    import ssl

    if not base_url.startswith("https://"):
        return
    for name, folder in (("SSL_CERT_FILE", False), ("SSL_CERT_DIR", True)):
        value = os.environ.get(name)
        if not value:
            continue
        fix = (
            f"point {name} at {'a folder' if folder else 'a file'} of PEM certificates, or unset it"
        )
        if folder:
            if not os.path.isdir(value):
                raise UsageError(f"{name}={value!r} is not a folder: {fix}")
            continue
        try:
            ssl.create_default_context().load_verify_locations(cafile=value)
        except FileNotFoundError:
            raise UsageError(f"{name}={value!r}: no such file: {fix}") from None
        except (OSError, ssl.SSLError) as error:
            why = getattr(error, "strerror", None) or getattr(error, "reason", None) or error
            raise UsageError(f"{name}={value!r} cannot be loaded ({why}): {fix}") from None


def _proxies() -> dict[str, str]:
    """The proxy variables of the environment, by scheme, as urllib reads them."""
    import urllib.request

    return {scheme: value for scheme, value in urllib.request.getproxies().items() if value}


def _proxy_problem(value: str) -> str | None:
    """What makes ``value`` no proxy address; None where it is one."""
    import urllib.parse

    parts = urllib.parse.urlsplit(value if "://" in value else f"http://{value}")
    if parts.scheme not in _PROXY_SCHEMES:
        return f"has the scheme {parts.scheme!r}, which is none of {', '.join(_PROXY_SCHEMES)}"
    if not parts.hostname:
        return "names no host"
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when asked
    except ValueError:
        return "has a port that is not a number from 0 to 65535"
    return None


def _loopback_direct() -> dict[str, None] | None:
    """With a proxy in the environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``),
    this machine's own addresses are still reached directly.

    A loopback address sent through a proxy names the proxy's machine, never this one:
    the built-in local model's server, or a vLLM or llama.cpp server at
    ``--base-url http://127.0.0.1:8000/v1``, would be unreachable (or another server
    answered) wherever a proxy is set for the whole session, as on many company
    machines, unless ``NO_PROXY`` lists it. Mounting no transport for a host is the HTTP
    library's own way of sending it direct; other hosts keep the proxy.
    """
    import urllib.request

    if not urllib.request.getproxies():
        return None
    return dict.fromkeys(
        f"all://[{host}]" if ":" in host else f"all://{host}" for host in _LOOPBACK
    )


_LEAN_CLIENT: Any = None
_URL_MEMO = 64  # distinct request URLs remembered per client (an SDK client posts to a few)
_HEADERS_MEMO = 256  # distinct header lists remembered per client (retry counts, timeouts)
_http_log = logging.getLogger("httpx2")  # where httpx2 logs each request


def _lean_client_class() -> Any:
    """``openai.DefaultAioHttpClient`` with a shorter path for the SDK's JSON posts.

    The SDK builds every request with ``http_client.build_request(...)`` and sends
    it with ``http_client.send(...)``; the client's aiohttp transport does the
    I/O. For a plain request (bytes body; no cookies, query parameters, auth or
    event hooks on the client) this subclass does what httpx2 and the transport
    do, in fewer steps:

    - ``build_request`` parses each request URL once per client and merges the
      client's and the request's headers in one pass (the same headers, in the
      same order, as httpx2).
    - ``send`` of a response that is read whole (``stream=False``) through the
      client's own aiohttp transport, when no proxy is mounted for the URL,
      calls that transport's aiohttp session itself with the transport's
      arguments (timeouts, TLS context, exception mapping to httpx2's), reads
      the body in one call and decodes it as httpx2 does. Cookies, the
      ``httpx2`` request log line and ``elapsed`` are kept. Redirects enter
      httpx2's own redirect loop. Anything else (proxies from the environment,
      streaming, auth, hooks) takes httpx2's own path unchanged.

    Measured here it saves about a fifth of the client's CPU per request
    (bench/RESULTS.md). Falls back to the SDK's class as it is when the HTTP
    library is not httpx2 or lacks the internals used here.
    """
    global _LEAN_CLIENT
    if _LEAN_CLIENT is not None:
        return _LEAN_CLIENT
    import openai

    http = http_module()
    base = openai.DefaultAioHttpClient
    needed = ("_send_single_request", "_send_handling_redirects", "_build_redirect_request",
              "_merge_url", "_set_timeout", "_transport_for_url")  # fmt: skip
    try:
        from aiohttp import ClientSession, ClientTimeout
        from httpx2._client import ClientState
        from httpx2._exceptions import request_context
        from openai._vendor.httpx_aiohttp.transport import AiohttpTransport, map_aiohttp_exceptions
    except ImportError:
        _LEAN_CLIENT = base
        return base
    if http.__name__ != "httpx2" or not all(hasattr(http.AsyncClient, n) for n in needed):
        _LEAN_CLIENT = base
        return base

    Headers, Request, Response, Timeout = http.Headers, http.Request, http.Response, http.Timeout
    ByteStream, RequestNotRead = http.ByteStream, http.RequestNotRead
    use_default = http.USE_CLIENT_DEFAULT

    class LeanAioHttpClient(base):  # type: ignore[misc, valid-type]
        """See :func:`_lean_client_class`."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            # The short paths read these httpx2 internals; without them, httpx2's own paths.
            self._lean = all(
                hasattr(self, name)
                for name in ("_state", "_auth", "_event_hooks", "_default_encoding", "_transport")
            )
            self._lean_urls: dict[str, Any] = {}
            self._lean_headers: dict[Any, tuple[tuple[Any, ...], frozenset[bytes]]] = {}

        def build_request(
            self,
            method: str,
            url: Any,
            *,
            content: Any = None,
            data: Any = None,
            files: Any = None,
            json: Any = None,
            params: Any = None,
            headers: Any = None,
            cookies: Any = None,
            timeout: Any = use_default,
            extensions: Any = None,
        ) -> Any:
            if (
                not self._lean
                or type(url) is not str
                or type(content) is not bytes
                or not content
                or type(headers) is not list
                or timeout is use_default
                or data is not None
                or files is not None
                or json is not None
                or params
                or cookies
                or extensions is not None
                or self.params
                or self.cookies
            ):
                return super().build_request(
                    method, url, content=content, data=data, files=files, json=json,
                    params=params, headers=headers, cookies=cookies, timeout=timeout,
                    extensions=extensions,
                )  # fmt: skip
            merged_url = self._lean_urls.get(url)
            if merged_url is None:
                merged_url = self._merge_url(url)
                if len(self._lean_urls) < _URL_MEMO:
                    self._lean_urls[url] = merged_url
            # The request httpx2 builds: the client's headers updated with the
            # request's (client headers the request does not set, in order, then
            # the request's), "Content-Length" added after them and "Host" before
            # them unless set, the body read.
            # The SDK sends the same few header lists again and again: merge each once.
            try:
                key: Any = (tuple(headers), tuple(self.headers.raw))
                merged = self._lean_headers.get(key)
            except TypeError:  # unhashable header items: merge without remembering
                key, merged = None, None
            if merged is None:
                merged = self._merge_raw_headers(headers)
                if key is not None and len(self._lean_headers) < _HEADERS_MEMO:
                    self._lean_headers[key] = merged
            raw, names = list(merged[0]), merged[1]
            if b"content-length" not in names and b"transfer-encoding" not in names:
                raw.append((b"Content-Length", str(len(content)).encode("ascii")))
            if b"host" not in names and merged_url.host:
                raw.insert(0, (b"Host", merged_url.netloc))
            request = Request(
                method,
                merged_url,
                headers=Headers(raw),
                stream=ByteStream(content),
                extensions={"timeout": Timeout(timeout).as_dict()},
            )
            request.read()
            return request

        def _merge_raw_headers(
            self, headers: list[Any]
        ) -> tuple[tuple[Any, ...], frozenset[bytes]]:
            own = Headers(headers).raw
            names = {key.lower() for key, _ in own}
            raw = [(k, v) for k, v in self.headers.raw if k.lower() not in names] + own
            return tuple(raw), frozenset(key.lower() for key, _ in raw)

        async def send(
            self,
            request: Any,
            *,
            stream: bool = False,
            auth: Any = use_default,
            follow_redirects: Any = use_default,
        ) -> Any:
            if (
                not self._lean
                or auth is not use_default
                or self._auth is not None
                or self._event_hooks["request"]
                or self._event_hooks["response"]
                or request.url.userinfo
            ):
                return await super().send(
                    request, stream=stream, auth=auth, follow_redirects=follow_redirects
                )
            # What httpx2's send does for a request without auth, with its
            # redirect loop entered only when the first response redirects.
            if self._state == ClientState.CLOSED:  # type: ignore[has-type]
                raise RuntimeError("Cannot send a request, as the client has been closed.")
            self._state = ClientState.OPENED
            if follow_redirects is use_default:
                follow_redirects = self.follow_redirects
            self._set_timeout(request)
            response = None
            if not stream:
                response = await self._send_whole(request)
            if response is None:
                response = await self._send_single_request(request)
            try:
                if response.has_redirect_location:
                    response = await self._redirected(request, response, follow_redirects)
                if not stream:
                    await response.aread()
            except BaseException:
                await response.aclose()
                raise
            return response

        async def _send_whole(self, request: Any) -> Any:
            """httpx2's ``_send_single_request`` and a full read, straight through aiohttp.

            Returns ``None``, having sent nothing, where this does not apply.
            """
            transport = self._transport_for_url(request.url)
            if type(transport) is not AiohttpTransport or transport.proxy is not None:
                return None
            try:
                data = request.content
            except RequestNotRead:  # a streamed body
                return None
            if not isinstance(transport.client, ClientSession):
                transport.client = transport.get_client()
            timeout = request.extensions.get("timeout", {})
            limit = ANSWER_LIMIT.get()
            start = time.perf_counter()
            with request_context(request=request):
                with map_aiohttp_exceptions():
                    # The call AiohttpTransport.handle_async_request makes.
                    raw = await transport.client.request(
                        method=request.method,
                        url=str(request.url),
                        headers=_aiohttp_headers(request.headers),
                        data=data or None,
                        allow_redirects=False,
                        auto_decompress=False,
                        compress=False,
                        timeout=ClientTimeout(
                            sock_connect=timeout.get("connect"),
                            sock_read=timeout.get("read"),
                            connect=timeout.get("pool"),
                        ),
                        server_hostname=request.extensions.get("sni_hostname"),
                    ).__aenter__()
                    try:
                        body = (
                            await raw.read() if limit is None else await _read_at_most(raw, limit)
                        )
                    finally:
                        await raw.__aexit__(None, None, None)
                extensions = {"http_version": b"HTTP/1.1"}
                if raw.reason:
                    extensions["reason_phrase"] = raw.reason.encode()
                response = Response(
                    status_code=raw.status,
                    headers=raw.raw_headers,
                    stream=ByteStream(body),
                    request=request,
                    extensions=extensions,
                )
                response.default_encoding = self._default_encoding
                response.read()  # decodes gzip, deflate, ... as httpx2 does
            response.elapsed = datetime.timedelta(seconds=time.perf_counter() - start)
            self.cookies.extract_cookies(response)
            if _http_log.isEnabledFor(logging.INFO):
                _http_log.info(
                    'HTTP Request: %s %s "%s %d %s"', request.method, request.url,
                    response.http_version, response.status_code, response.reason_phrase,
                )  # fmt: skip
            return response

        async def _redirected(self, request: Any, response: Any, follow: bool) -> Any:
            if not follow:
                with suppress(http.RemoteProtocolError):
                    response.next_request = self._build_redirect_request(request, response)
                return response
            next_request = self._build_redirect_request(request, response)
            await response.aread()
            return await self._send_handling_redirects(
                next_request, follow_redirects=True, history=[response]
            )

    _LEAN_CLIENT = LeanAioHttpClient
    return LeanAioHttpClient


def _aiohttp_headers(headers: Any) -> dict[str, str]:
    """What aiohttp makes of an httpx2 ``Headers`` (its ``items()``), built in one pass.

    Lower-case names, repeated names joined with ", ", decoded as httpx2 decodes
    (ASCII headers read the same in every encoding httpx2 may choose).
    """
    raw = headers.raw
    try:
        return _joined(raw, "ascii")
    except UnicodeDecodeError:
        return _joined(raw, headers.encoding)


def _joined(raw: list[tuple[bytes, bytes]], encoding: str) -> dict[str, str]:
    items: dict[str, str] = {}
    for key, value in raw:
        name, text = key.lower().decode(encoding), value.decode(encoding)
        items[name] = f"{items[name]}, {text}" if name in items else text
    return items


async def _read_at_most(raw: Any, limit: int) -> bytes:
    """An aiohttp response's body, refused once it is larger than ``limit`` bytes (as sent)."""
    length = raw.content_length
    if length is not None and length <= limit:
        body: bytes = await raw.read()
        return body
    if length is not None:
        raise malformed(
            f"a body of {length:,} bytes, more than the {limit:,} its request allows", b""
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in raw.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise malformed(
                f"more than the {limit:,} bytes its request allows", chunks[0] if chunks else chunk
            )
        chunks.append(chunk)
    return b"".join(chunks)


def is_transport_error(error: BaseException) -> bool:
    """Whether ``error`` is the HTTP layer's: aiohttp's, httpx's, or the socket's."""
    try:
        import aiohttp
    except ImportError:  # the SDKs' httpx transport only
        aiohttp_errors: tuple[type[BaseException], ...] = ()
    else:
        aiohttp_errors = (aiohttp.ClientError,)
    http_errors = (http_module().TransportError,)
    return isinstance(error, aiohttp_errors + http_errors + (OSError, EOFError))


# Why a connection failed, from the first matching link of the cause chain (the SDKs
# wrap the transport's error, which wraps aiohttp's or the socket's). The SDKs'
# aiohttp transport reports a dropped connection as a connect *timeout*, so the
# chain's own causes are read, not the outermost type.
_NOT_HTTP_TYPES = frozenset(
    {"ClientResponseError", "HttpProcessingError", "BadHttpMessage", "BadStatusLine",
     "InvalidHeader", "LineTooLong", "TransferEncodingError", "ContentLengthError"}
)  # fmt: skip
_RESET_TYPES = ("ServerDisconnectedError", "ClientPayloadError", "ClientOSError")
_TIMEOUT_TYPES = (
    "ServerTimeoutError", "SocketTimeoutError", "ConnectionTimeoutError", "APITimeoutError",
    "TimeoutException", "ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout",
)  # fmt: skip


def transport_error(base_url: str, error: BaseException) -> ProviderError:
    """Tell a server that is not there from one that reset the link, timed out, or spoke no HTTP.

    A provider error found in the chain (an answer the client refused to read
    on) is returned as it is.
    """
    chain: list[BaseException] = []
    link: BaseException | None = error
    while link is not None and len(chain) < 8:
        chain.append(link)
        link = link.__cause__ or link.__context__
    for cause in chain:
        if isinstance(cause, ProviderError):
            return cause
    text = redact(" | ".join(f"{type(e).__name__}: {_one_line(e)}" for e in chain[1:] or chain))
    tls = _tls_refusal(base_url, chain)
    if tls is not None:
        return tls
    names = {type(e).__name__ for e in chain}
    unreachable = next(
        (e for e in chain if isinstance(e, ConnectionRefusedError | socket.gaierror)), None
    )
    if unreachable is not None:  # the innermost reason, not the SDKs' wrappers (a "timeout")
        why, fix = (
            ("connection refused", "check that the server is running and listens on that port")
            if isinstance(unreachable, ConnectionRefusedError)
            else ("host name not found", "check the host name")
        )
        proxy = _proxy_for(base_url)
        if proxy is not None:  # the proxy is what was not reached
            why = f"{why} at the proxy {proxy[0]} (from {proxy[1]})"
            fix = "check the proxy, or list the host in NO_PROXY to reach it directly"
        return EndpointUnreachableError(
            f"cannot reach {base_url}: {why} ({redact(_one_line(unreachable))}); {fix}"
        )
    parse_error = next((e for e in chain if type(e).__name__ in _NOT_HTTP_TYPES), None)
    if parse_error is not None:  # aiohttp's parser: the reply is not HTTP
        detail = _one_line(getattr(parse_error, "message", None) or parse_error)
        return malformed(f"a reply that is not HTTP ({redact(detail)})", b"")
    if names & set(_RESET_TYPES) or any(_is_reset(e) for e in chain):
        return TransientProviderError(f"{base_url} reset the connection or closed it mid-answer")
    if names & set(_TIMEOUT_TYPES) or any(isinstance(e, TimeoutError) for e in chain):
        return TransientProviderError(f"timed out talking to {base_url}")
    return TransientProviderError(f"connection to {base_url} failed ({text})")


def _tls_refusal(base_url: str, chain: list[BaseException]) -> ProviderError | None:
    """A TLS failure no retry can mend, named with its fix; ``None`` for any other.

    The SDKs' aiohttp transport reports these as a connect *timeout*, which would be
    retried for every request of the run: a certificate this machine does not trust (a
    self-signed one, or a company's own authority), and TLS spoken to a server that
    speaks plain HTTP. A handshake cut short stays a transient failure.
    """
    import ssl

    for cause in reversed(chain):  # the ssl module's own error first: aiohttp's wrap it
        if isinstance(cause, ssl.SSLCertVerificationError):
            why = getattr(cause, "verify_message", None) or _one_line(cause)
            return EndpointUnreachableError(
                redact(
                    f"cannot reach {base_url}: its TLS certificate cannot be verified ({why}); "
                    "if an authority of your organisation signed it, point SSL_CERT_FILE at a "
                    "bundle of certificates that holds that authority's"
                )
            )
        if getattr(cause, "reason", None) == "WRONG_VERSION_NUMBER":
            return EndpointUnreachableError(
                redact(
                    f"cannot reach {base_url}: the server does not answer in TLS (wrong version "
                    "number); if it speaks plain HTTP, its address starts http://, not https://"
                )
            )
    return None


def _proxy_for(base_url: str) -> tuple[str, str] | None:
    """The environment's proxy for ``base_url`` (scheme, host and port only: never its
    credentials) and the variable that set it; ``None`` when the host is reached directly
    (no proxy, ``NO_PROXY``, or this machine's own address: :func:`_loopback_direct`)."""
    import urllib.parse
    import urllib.request

    target = urllib.parse.urlsplit(base_url)
    host = target.hostname or ""
    proxies = urllib.request.getproxies()
    if not proxies or host in _LOOPBACK:
        return None
    if urllib.request.proxy_bypass_environment(host, proxies):  # type: ignore[attr-defined]
        return None
    for scheme in (target.scheme, "all"):
        if proxies.get(scheme):
            proxy = urllib.parse.urlsplit(proxies[scheme])
            port = f":{proxy.port}" if proxy.port else ""
            names = (f"{scheme}_proxy", f"{scheme.upper()}_PROXY")  # as urllib reads them
            named = next((name for name in names if os.environ.get(name)), names[1])
            return f"{proxy.scheme}://{proxy.hostname}{port}", named
    return None


def _is_reset(error: BaseException) -> bool:
    return isinstance(error, ConnectionResetError | BrokenPipeError) or (
        isinstance(error, OSError) and error.errno in (errno.ECONNRESET, errno.EPIPE)
    )


def _one_line(error: BaseException) -> str:
    """An exception's message on one line, at most 200 characters."""
    text = " ".join(str(error).split())
    return text if len(text) <= 200 else text[:199] + "…"
