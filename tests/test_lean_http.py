"""The SDKs' HTTP client with biasaudit's shorter paths behaves as the SDK's own client.

``providers._sdk._lean_client_class`` subclasses ``openai.DefaultAioHttpClient``
and overrides ``build_request``/``send``. Every test here runs the same request
through both clients against a real loopback server (and a forward proxy, and a
closed port) and compares what comes out: requests, responses, redirects,
timeouts, cookies, content decoding, exceptions and the SDK's error types.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from aiohttp import web

from biasaudit.providers._sdk import _aiohttp_client, _aiohttp_headers, _lean_client_class

URL = "http://127.0.0.1:9/v1/chat/completions"
SDK_HEADERS = [
    ("Accept", "application/json"),
    ("Content-Type", "application/json"),
    ("User-Agent", "AsyncOpenAI/Python 3"),
    ("X-Stainless-Lang", "python"),
    ("Authorization", "Bearer k"),
    ("x-stainless-retry-count", "0"),
    ("x-stainless-read-timeout", "60.0"),
]


def lean() -> Any:
    return _lean_client_class()()


def plain() -> Any:
    return openai.DefaultAioHttpClient()


def test_the_lean_client_is_used_for_the_sdks() -> None:
    client = _aiohttp_client(8)
    assert type(client) is _lean_client_class()
    assert isinstance(client, openai.DefaultAioHttpClient)
    assert client._lean


def same_request(a: httpx2.Request, b: httpx2.Request) -> None:
    assert (a.method, a.url, a.headers.raw, a.extensions) == (
        b.method,
        b.url,
        b.headers.raw,
        b.extensions,
    )
    assert a.content == b.content
    assert type(a.stream) is type(b.stream)


@pytest.mark.parametrize(
    "headers",
    [
        SDK_HEADERS,
        [("Host", "other:1"), ("content-length", "7"), ("X", "a")],
        [("Transfer-Encoding", "chunked")],
        [("connection", "close"), ("X-A", "1"), ("x-a", "2"), ("ACCEPT", "text/plain")],
        [],
    ],
)
@pytest.mark.parametrize("method", ["post", "PUT", "get"])
def test_build_request_builds_what_httpx2_builds(
    headers: list[tuple[str, str]], method: str
) -> None:
    a, b = lean(), plain()
    for _ in range(2):  # the second time from the remembered merge
        for timeout in (60.0, httpx2.Timeout(5.0, connect=1.0), None):
            same_request(
                a.build_request(method, URL, content=b'{"a":1}', headers=headers, timeout=timeout),
                b.build_request(method, URL, content=b'{"a":1}', headers=headers, timeout=timeout),
            )
    a.headers["X-Client"] = "1"
    b.headers["X-Client"] = "1"
    same_request(
        a.build_request(method, URL, content=b"x", headers=headers, timeout=1.0),
        b.build_request(method, URL, content=b"x", headers=headers, timeout=1.0),
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"content": b"", "timeout": 3.0},
        {"content": None, "timeout": 3.0},
        {"content": b"x", "timeout": 3.0, "params": {"q": "1"}},
        {"content": b"x", "timeout": 3.0, "headers": {"A": "b"}},
        {"json": {"a": 1}, "timeout": 3.0},
        {"data": {"a": "1"}, "timeout": 3.0},
        {"content": b"x", "timeout": 3.0, "cookies": {"c": "1"}},
        {"content": b"x", "timeout": 3.0, "extensions": {"sni_hostname": "h"}},
        {"content": b"x"},  # no timeout: the client's
    ],
)
def test_other_requests_take_httpx2s_own_path(kwargs: dict[str, Any]) -> None:
    args = {"headers": [("A", "b")], **kwargs}
    same_request(
        lean().build_request("POST", URL, **args), plain().build_request("POST", URL, **args)
    )


def test_requests_with_client_cookies_or_params_take_httpx2s_own_path() -> None:
    a, b = lean(), plain()
    for client in (a, b):
        client.cookies.set("session", "s1", domain="127.0.0.1")
        client.params = {"k": "v"}
    args = {"content": b"x", "headers": SDK_HEADERS, "timeout": 2.0}
    same_request(a.build_request("POST", URL, **args), b.build_request("POST", URL, **args))


def test_headers_for_aiohttp_are_httpx2s_items() -> None:
    for raw in (
        [(b"Host", b"a"), (b"X-A", b"1"), (b"x-a", b"2"), (b"Content-Type", b"application/json")],
        [(b"K", "é".encode()), (b"L", b"\xff")],
    ):
        headers = httpx2.Headers(raw)
        assert list(_aiohttp_headers(headers).items()) == list(headers.items())


# --- sending, against a loopback server -------------------------------------------------


async def _json(request: web.Request) -> web.Response:
    body = await request.read()
    reply = {"method": request.method, "path": request.path, "body": body.decode()}
    reply["headers"] = dict(request.headers)
    response = web.json_response(reply, headers={"x-request-id": "r-1", "X-Twice": "a"})
    response.headers.add("X-Twice", "b")
    response.set_cookie("seen", "yes")
    return response


async def _gzip(request: web.Request) -> web.Response:
    data = gzip.compress(json.dumps({"ok": True, "text": "é" * 50}).encode())
    return web.Response(
        body=data, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
    )


async def _bad_gzip(request: web.Request) -> web.Response:
    return web.Response(body=b"not gzip at all", headers={"Content-Encoding": "gzip"})


async def _redirect(request: web.Request) -> web.Response:
    raise _redirect_to(int(request.query.get("status", "307")), "/json")


async def _loop(request: web.Request) -> web.Response:
    raise _redirect_to(307, "/loop")


def _redirect_to(status: int, location: str) -> web.HTTPException:
    error = web.HTTPException(headers={"Location": location})
    error.set_status(status)
    return error


async def _slow(request: web.Request) -> web.Response:
    await asyncio.sleep(2)
    return web.Response(text="late")


async def _cut(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Length": "1000"})
    await response.prepare(request)
    await response.write(b"x" * 10)
    assert request.transport is not None
    request.transport.close()
    return response


async def _status(request: web.Request) -> web.Response:
    code = int(request.match_info["code"])
    return web.json_response({"error": {"message": f"status {code}"}}, status=code)


async def _proxy(request: web.Request) -> web.Response:
    # A forward proxy sees the absolute URL of the request it is asked to forward.
    return web.json_response({"proxied": str(request.url), "host": request.headers.get("Host")})


@asynccontextmanager
async def serving(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]] | None = None,
) -> AsyncIterator[str]:
    app = web.Application()
    if handler is not None:
        app.router.add_route("*", "/{tail:.*}", handler)
    else:
        for path, view in (
            ("/json", _json),
            ("/gzip", _gzip),
            ("/bad-gzip", _bad_gzip),
            ("/redirect", _redirect),
            ("/loop", _loop),
            ("/slow", _slow),
            ("/cut", _cut),
            ("/status/{code}", _status),
        ):
            app.router.add_route("*", path, view)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def both(
    base: str, path: str, *, method: str = "POST", timeout: float = 5.0, **client: Any
) -> list[Any]:
    """The outcome of one request through each client: its response, or its exception."""
    outcomes: list[Any] = []
    for make in (_lean_client_class(), openai.DefaultAioHttpClient):
        async with make(**client) as http:
            request = http.build_request(
                method, base + path, content=b'{"q":1}', headers=SDK_HEADERS, timeout=timeout
            )
            try:
                outcomes.append((await http.send(request), dict(http.cookies)))
            except Exception as error:  # compared below
                outcomes.append(error)
    return outcomes


def same_response(outcomes: list[Any]) -> None:
    (a, cookies_a), (b, cookies_b) = outcomes
    assert (a.status_code, a.reason_phrase, a.http_version) == (
        b.status_code,
        b.reason_phrase,
        b.http_version,
    )
    drop = {b"date"}
    assert [h for h in a.headers.raw if h[0].lower() not in drop] == [
        h for h in b.headers.raw if h[0].lower() not in drop
    ]
    assert a.content == b.content
    assert a.text == b.text
    assert a.is_closed and b.is_closed
    assert [r.status_code for r in a.history] == [r.status_code for r in b.history]
    assert str(a.url) == str(b.url) and a.request.method == b.request.method
    assert a.elapsed.total_seconds() > 0
    assert cookies_a == cookies_b


@pytest.mark.parametrize(
    "path", ["/json", "/gzip", "/redirect", "/redirect?status=302", "/redirect?status=303"]
)
def test_send_answers_as_httpx2_does(path: str) -> None:
    async def go() -> None:
        async with serving() as base:
            outcomes = await both(base, path)
        same_response(outcomes)
        response = outcomes[0][0]
        if path == "/json":
            sent = response.json()
            assert sent["body"] == '{"q":1}' and sent["headers"]["Authorization"] == "Bearer k"
            assert response.headers.get_list("x-twice") == ["a", "b"]
            assert outcomes[0][1] == {"seen": "yes"}

    asyncio.run(go())


def test_the_short_path_is_taken_for_plain_requests_only(monkeypatch: pytest.MonkeyPatch) -> None:
    cls = _lean_client_class()
    calls: list[str] = []
    original = cls._send_single_request

    async def counting(self: Any, request: Any) -> Any:
        calls.append(str(request.url))
        return await original(self, request)

    monkeypatch.setattr(cls, "_send_single_request", counting)

    async def go() -> None:
        async with serving() as base, cls() as http:
            for path in ("/json", "/json", "/gzip"):
                request = http.build_request(
                    "POST", base + path, content=b"{}", headers=SDK_HEADERS, timeout=5.0
                )
                await http.send(request)
            assert calls == []
            request = http.build_request("POST", base + "/json", content=b"{}", timeout=5.0)
            streamed = await http.send(request, stream=True)  # streaming: httpx2's path
            assert (await streamed.aread()) and calls == [base + "/json"]
            await streamed.aclose()
            request = http.build_request("POST", base + "/redirect", content=b"{}", timeout=5.0)
            await http.send(request)  # the redirect is followed by httpx2's loop
            assert calls == [base + "/json", base + "/json"]

    asyncio.run(go())


@pytest.mark.parametrize(
    ("path", "timeout"), [("/slow", 0.2), ("/cut", 5.0), ("/bad-gzip", 5.0), ("/loop", 5.0)]
)
def test_send_fails_as_httpx2_does(path: str, timeout: float) -> None:
    async def go() -> None:
        async with serving() as base:
            a, b = await both(base, path, timeout=timeout)
        assert isinstance(a, httpx2.HTTPError) and type(a) is type(b), (a, b)
        assert a.request.url == b.request.url

    asyncio.run(go())


def test_redirects_not_followed_are_returned_as_httpx2_returns_them() -> None:
    async def go() -> None:
        async with serving() as base:
            outcomes = await both(base, "/redirect", follow_redirects=False)
        same_response(outcomes)
        assert outcomes[0][0].status_code == 307
        assert str(outcomes[0][0].next_request.url).endswith("/json")

    asyncio.run(go())


def test_a_refused_connection_fails_as_httpx2_does() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the request

    async def go() -> None:
        a, b = await both(f"http://127.0.0.1:{port}", "/json")
        assert isinstance(a, httpx2.ConnectError | httpx2.ConnectTimeout)
        assert type(a) is type(b)

    asyncio.run(go())


def test_a_closed_client_refuses_to_send() -> None:
    async def go() -> None:
        http = lean()
        await http.aclose()
        request = http.build_request("POST", URL, content=b"x", headers=SDK_HEADERS, timeout=1.0)
        with pytest.raises(RuntimeError, match="closed"):
            await http.send(request)

    asyncio.run(go())


def test_proxies_from_the_environment_are_used(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)

    async def go() -> None:
        async with serving(_proxy) as proxy:
            monkeypatch.setenv("HTTP_PROXY", proxy)
            monkeypatch.setenv("http_proxy", proxy)
            async with _aiohttp_client(4) as http:
                request = http.build_request(
                    "POST",
                    "http://model.invalid/v1/chat/completions",
                    content=b"{}",
                    headers=SDK_HEADERS,
                    timeout=5.0,
                )
                response = await http.send(request)
        assert response.json() == {
            "proxied": "http://model.invalid/v1/chat/completions",
            "host": "model.invalid",
        }

    asyncio.run(go())


def test_this_machines_own_servers_are_reached_directly_past_a_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A proxy set for the whole session (as on many company machines) is not asked for
    a loopback address: through it, 127.0.0.1 would be the proxy's own machine."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)

    async def go() -> None:
        async with serving(_proxy) as proxy, serving() as base:
            monkeypatch.setenv("HTTP_PROXY", proxy)
            monkeypatch.setenv("http_proxy", proxy)
            for url in (base, base.replace("127.0.0.1", "localhost")):
                async with _aiohttp_client(4) as http:
                    request = http.build_request(
                        "POST", f"{url}/json", content=b'{"a": 1}', headers=SDK_HEADERS,
                        timeout=5.0,
                    )  # fmt: skip
                    response = await http.send(request)
                assert "proxied" not in response.json(), (url, response.json())

    asyncio.run(go())


def test_the_sdk_raises_its_own_errors_through_the_lean_client() -> None:
    async def go() -> None:
        async with serving() as base:
            sdk = openai.AsyncOpenAI(
                api_key="k", base_url=base, max_retries=0, http_client=_aiohttp_client(4)
            )
            with pytest.raises(openai.BadRequestError, match="status 400"):
                await sdk.post("/status/400", cast_to=httpx2.Response, body={"a": 1})
            with pytest.raises(openai.RateLimitError):
                await sdk.post("/status/429", cast_to=httpx2.Response, body={"a": 1})
            with pytest.raises(openai.APITimeoutError):
                await sdk.post("/slow", cast_to=httpx2.Response, body={}, options={"timeout": 0.2})
            with pytest.raises(openai.APIConnectionError):
                await sdk.post("/cut", cast_to=httpx2.Response, body={})
            answer = await sdk.post("/json", cast_to=httpx2.Response, body={"a": 1})
            assert json.loads(answer.json()["body"]) == {"a": 1}
            await sdk.close()

    asyncio.run(go())


# --- the command's exit --------------------------------------------------------------


def test_the_command_exits_with_its_code_and_all_its_output(tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "messages": [{"role": "user", "content": f"q {i}"}]}) + "\n"
            for i in range(30)
        )
    )
    command = [sys.executable, "-m", "biasaudit", "fanout", str(prompts), "--model", "sim/biased"]
    done = subprocess.run(
        [*command, "--runs-dir", str(tmp_path / "runs")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "30 answered, 0 failed" in done.stdout and done.stdout.rstrip().splitlines()[
        -1
    ].startswith("run: ")
    missing = subprocess.run(
        [*command[:4], str(tmp_path / "absent.jsonl"), *command[5:]], capture_output=True, text=True
    )
    assert missing.returncode == 2 and "error:" in missing.stderr
