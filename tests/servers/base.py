"""Shared machinery of the fake provider servers: lifecycle (background thread
or foreground subprocess), request recording, fault application, the CLI."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import secrets
import signal
import ssl
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping
from types import TracebackType
from typing import IO, NamedTuple, Self

from aiohttp import web

from .faults import Fault, FaultBook, Match
from .responders import RESPONDERS, Choice, JsonDict, Responder, default_responder, request_key

HOST = "127.0.0.1"
_START_TIMEOUT_S = 10.0
# Connections still busy at shutdown (e.g. a handler sleeping in a timeout
# fault) are cut after this long instead of aiohttp's 60 s default.
_SHUTDOWN_GRACE_S = 0.2

_HTML_ERROR = b"<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>\n"

Builder = Callable[[JsonDict, Fault | None], JsonDict]


class RecordedRequest(NamedTuple):
    """One received request; unpacks as (path, headers, body, query)."""

    path: str
    headers: dict[str, str]  # lower-cased names
    body: JsonDict | None  # None for GETs and unparsable bodies
    query: str = ""  # the query string, as sent


class ApiError(Exception):
    """Raised by request builders; rendered in the provider's error shape."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        error_type: str | None = None,
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type
        self.code = code
        self.param = param
        self.headers = dict(headers or {})


def json_response(
    payload: object, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=json.dumps(payload).encode(),
        status=status,
        headers=headers,
        content_type="application/json",
    )


class FakeProviderServer(ABC):
    """Base of OpenAIServer / AnthropicServer. Not started by construction:
    call start() (or use as a context manager) for a background-thread server,
    or `await serve(...)` to run it on the current loop."""

    request_id_header = "x-request-id"
    tls: ssl.SSLContext | None = None  # HTTPS with this context (a subclass sets it)

    def __init__(
        self,
        *,
        latency: float = 0.0,
        responder: Responder | None = None,
        model: str = "test-model",
        require_api_key: str | None = None,
        record: bool = True,
        log_path: str | None = None,
    ) -> None:
        self.latency = latency  # read per request, so tests may change it live
        self.responder: Responder = responder or default_responder
        self.model = model
        self.require_api_key = require_api_key
        self.record = record
        self.log_path = log_path
        self.port: int | None = None
        self._faults = FaultBook()
        self._requests: list[RecordedRequest] = []
        self._requests_lock = threading.Condition()
        self._log_file: IO[str] | None = None
        self._ids = itertools.count(1)
        self._id_prefix = secrets.token_hex(4)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._start_error: BaseException | None = None

    # ----------------------------------------------------------- addresses
    @property
    def root_url(self) -> str:
        if self.port is None:
            raise RuntimeError("server not started")
        return f"{'https' if self.tls is not None else 'http'}://{HOST}:{self.port}"

    @property
    @abstractmethod
    def base_url(self) -> str:
        """What to pass as the SDK client's base_url."""

    # ----------------------------------------------------------- lifecycle
    def start(self, port: int = 0) -> Self:
        """Serve from a daemon thread with its own loop. `port=0` lets the OS pick;
        pass the old `self.port` after stop() to bring a server back on the same URL."""
        if self._thread is not None:
            raise RuntimeError("server already started")
        self._start_error = None
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._thread_main, args=(ready, port), name=type(self).__name__, daemon=True
        )
        self._thread.start()
        if not ready.wait(_START_TIMEOUT_S):
            raise RuntimeError(f"{type(self).__name__} did not start in {_START_TIMEOUT_S}s")
        if self._start_error is not None:
            self._thread.join()
            self._thread = None
            raise RuntimeError("server failed to start") from self._start_error
        return self

    def stop(self) -> None:
        thread, loop, stop_event = self._thread, self._loop, self._stop_event
        if thread is None or loop is None or stop_event is None:
            return
        loop.call_soon_threadsafe(stop_event.set)
        thread.join(_START_TIMEOUT_S)
        self._thread = self._loop = self._stop_event = None

    def __enter__(self) -> Self:
        # Allows both `with Server() as s` and `with s.start(port=...)`.
        return self if self._thread is not None else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _thread_main(self, ready: threading.Event, port: int) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._stop_event = asyncio.Event()
            loop.run_until_complete(
                self.serve(HOST, port, self._stop_event, on_ready=lambda _port: ready.set())
            )
        except BaseException as exc:  # reported to start(); a thread can't raise
            self._start_error = exc
        finally:
            ready.set()
            _cancel_leftover_tasks(loop)
            loop.close()

    async def serve(
        self,
        host: str,
        port: int,
        stop: asyncio.Event,
        on_ready: Callable[[int], None] | None = None,
    ) -> None:
        """Serve on the running loop until `stop` is set."""
        runner = web.AppRunner(self.make_app(), access_log=None, shutdown_timeout=_SHUTDOWN_GRACE_S)
        await runner.setup()
        if self.log_path:
            self._log_file = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115
        try:
            site = web.TCPSite(runner, host, port, backlog=2048, ssl_context=self.tls)
            await site.start()
            self.port = runner.addresses[0][1]
            if on_ready is not None:
                on_ready(self.port)
            await stop.wait()
        finally:
            await runner.cleanup()
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None

    def make_app(self) -> web.Application:
        # Big enough for batch files (OpenAI: up to 200 MB); aiohttp's default is 1 MiB.
        app = web.Application(client_max_size=256 * 2**20)
        app.add_routes(self.routes())
        app.router.add_get("/health", self._health)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        return app

    # ----------------------------------------------------------- recording
    @property
    def requests(self) -> list[RecordedRequest]:
        """Snapshot of every recorded request, oldest first."""
        with self._requests_lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        with self._requests_lock:
            return len(self._requests)

    def count_by(self, key_fn: Callable[[RecordedRequest], Hashable]) -> Counter[Hashable]:
        """E.g. `count_by(lambda r: r.path)` or by the prompt's name."""
        return Counter(key_fn(r) for r in self.requests)

    def bodies(self, path: str | None = None) -> list[JsonDict]:
        return [r.body for r in self.requests if r.body is not None and path in (None, r.path)]

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> bool:
        """Block until at least n requests were recorded; False on timeout."""
        with self._requests_lock:
            return self._requests_lock.wait_for(lambda: len(self._requests) >= n, timeout)

    def reset(self) -> None:
        """Forget recorded requests and every fault (queued and persistent)."""
        with self._requests_lock:
            self._requests.clear()
        self._faults.clear()

    # ----------------------------------------------------------- faults
    def inject(self, fault: Fault, times: int = 1, match: Match = None) -> None:
        """Apply `fault` to the next `times` matching requests (FIFO across injections).
        `match`: callable(body) -> bool, or a substring of the JSON body."""
        self._faults.inject(fault, times, match)

    def fail_all(self, fault: Fault, match: Match = None) -> None:
        """Apply `fault` to every matching request (after one-shot faults) until cleared."""
        self._faults.fail_all(fault, match)

    def clear_faults(self) -> None:
        self._faults.clear()

    @property
    def pending_faults(self) -> int:
        """Uses left on one-shot faults."""
        return self._faults.pending()

    # ----------------------------------------------------------- subclass API
    @abstractmethod
    def routes(self) -> Iterable[web.AbstractRouteDef]: ...

    @abstractmethod
    def error_payload(self, err: ApiError) -> JsonDict:
        """The provider's JSON error body."""

    @abstractmethod
    def authorized(self, headers: Mapping[str, str]) -> bool: ...

    @abstractmethod
    def auth_error(self) -> ApiError: ...

    def choices(self, body: JsonDict, path: str, n: int, fault: Fault | None) -> list[Choice]:
        """n choices from the responder (cycled/cut), or empty ones for an `empty` fault."""
        if fault is not None and fault.kind == "empty":
            return [Choice("")] * n
        try:
            got = list(self.responder(body, path))
        except Exception as exc:  # surface responder bugs to the test, not as a hang
            raise ApiError(500, f"responder raised {exc!r}") from exc
        if not got:
            raise ApiError(500, "responder returned no choices")
        return [got[i % len(got)] for i in range(n)]

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{self._id_prefix}{next(self._ids):012x}"

    # ----------------------------------------------------------- request pipeline
    async def handle(self, request: web.Request, build: Builder) -> web.StreamResponse:
        """Common path of every POST endpoint: record, auth, fault, latency, answer."""
        raw = await request.read()
        body = _parse_object(raw)
        self._note(request, body)
        headers = {self.request_id_header: self.new_id("req_")}
        try:
            if self.require_api_key is not None and not self.authorized(request.headers):
                raise self.auth_error()
            if body is None:
                raise ApiError(400, "We could not parse the JSON body of your request.")
            fault = self._faults.take(body, raw)
            if self.latency > 0:
                await asyncio.sleep(self.latency)
            if fault is None or fault.kind == "empty":
                return json_response(build(body, fault), headers=headers)
            headers.update(fault.response_headers())
            return await self._apply_fault(request, fault, lambda: build(body, None), headers)
        except ApiError as err:
            headers.update(err.headers)
            return json_response(self.error_payload(err), err.status, headers)

    async def _apply_fault(
        self,
        request: web.Request,
        fault: Fault,
        build: Callable[[], JsonDict],
        headers: dict[str, str],
    ) -> web.StreamResponse:
        if fault.kind == "status":
            msg = fault.message or f"Injected fault: HTTP {fault.http_status}"
            raise ApiError(fault.http_status, msg, error_type=fault.error_type, code=fault.code)
        if fault.kind == "timeout":
            await asyncio.sleep(fault.seconds)
            return json_response(build(), headers=headers)
        if fault.kind == "drop":
            if request.transport is not None:
                request.transport.close()
            # Nothing reaches the client; aiohttp discards writes to a closed transport.
            return web.Response(status=204)
        if fault.kind == "malformed":
            text = json.dumps(build())
            return web.Response(
                body=text[: len(text) // 2].encode(),
                headers=headers,
                content_type="application/json",
            )
        if fault.kind == "reshape":
            assert fault.reshape is not None
            body = _encoded(fault.reshape(build()))
            if fault.chunked:
                return await _chunked(request, body, fault.http_status, headers)
            return web.Response(
                body=body,
                status=fault.http_status,
                headers=headers,
                content_type="application/json",
            )
        if fault.kind == "raw":
            if request.transport is not None:
                request.transport.write(fault.raw)
                request.transport.close()
            return web.Response(status=204)  # discarded: the transport is closed
        if fault.kind == "trickle":
            return await _trickle(request, json.dumps(build()).encode(), fault.seconds, headers)
        # non_json: what a proxy in front of the provider sends.
        return web.Response(
            body=_HTML_ERROR, status=fault.http_status, headers=headers, content_type="text/html"
        )

    def _note(self, request: web.Request, body: JsonDict | None) -> None:
        if self._log_file is not None:
            # json.dumps keeps the id on one line whatever the prompt holds.
            key = json.dumps(request_key(body, request.path), ensure_ascii=False)
            self._log_file.write(f"{request.path}\t{key}\n")
            self._log_file.flush()  # must survive a SIGKILL of either side
        if self.record:
            headers = {k.lower(): v for k, v in request.headers.items()}
            with self._requests_lock:
                record = RecordedRequest(request.path, headers, body, request.query_string)
                self._requests.append(record)
                self._requests_lock.notify_all()

    async def _health(self, _request: web.Request) -> web.Response:
        return json_response({"status": "ok"})

    async def _not_found(self, request: web.Request) -> web.Response:
        err = ApiError(404, f"Unknown request URL: {request.method} {request.path}.")
        return json_response(self.error_payload(err), 404)

    def timestamp(self) -> int:
        return int(time.time())


def _encoded(value: object) -> bytes:
    """A reshaped body: bytes and text as they are, anything else as JSON (NaN allowed)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value).encode()


async def _chunked(
    request: web.Request, body: bytes, status: int, headers: dict[str, str]
) -> web.StreamResponse:
    """``body`` with chunked transfer encoding: the client learns its size only by reading it."""
    response = web.StreamResponse(status=status, headers=headers)
    response.content_type = "application/json"
    response.enable_chunked_encoding()
    await response.prepare(request)
    try:
        for start in range(0, len(body), 65536):
            await response.write(body[start : start + 65536])
        await response.write_eof()
    except (ConnectionError, RuntimeError):  # the client stopped reading: what the test wants
        pass
    return response


async def _trickle(
    request: web.Request, body: bytes, seconds: float, headers: dict[str, str]
) -> web.StreamResponse:
    """Headers at once, then the body one byte every ``seconds``, as a stalled upstream sends."""
    response = web.StreamResponse(status=200, headers=headers)
    response.content_type = "application/json"
    response.content_length = len(body)
    await response.prepare(request)
    try:
        for i in range(len(body)):
            await response.write(body[i : i + 1])
            await asyncio.sleep(seconds)
    except (ConnectionError, RuntimeError):  # the client gave up: what the test wants
        pass
    return response


def _parse_object(raw: bytes) -> JsonDict | None:
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _cancel_leftover_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel and reap whatever is still pending (handlers stuck in fault sleeps)
    so closing the loop emits no 'Task was destroyed' noise."""
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())


# ----------------------------------------------------------------- subprocess CLI
def cli_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Fake provider server for tests.")
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=0, help="0 = let the OS choose")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument("--model", default="test-model")
    parser.add_argument("--require-api-key", default=None)
    parser.add_argument("--log", default=None, help="append one line per request to FILE")
    parser.add_argument(
        "--batch-delay", type=float, default=0.0, help="seconds before a batch is answered"
    )
    parser.add_argument("--responder", choices=sorted(RESPONDERS), default="default")
    return parser


def run_cli(server: FakeProviderServer, host: str, port: int) -> None:
    """Serve in the foreground until SIGTERM/SIGINT; announce `PORT <n>` on stdout."""
    server.record = False  # a long benchmark must not grow memory; use --log instead
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(_serve_until_signalled(server, host, port))


async def _serve_until_signalled(server: FakeProviderServer, host: str, port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.serve(host, port, stop, on_ready=_announce_port)


def _announce_port(port: int) -> None:
    sys.stdout.write(f"PORT {port}\n")
    sys.stdout.flush()


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop  # optional speed-up (the `fast` extra)
    except ImportError:
        return None
    return uvloop.new_event_loop


__all__ = [
    "ApiError",
    "FakeProviderServer",
    "RecordedRequest",
    "cli_parser",
    "json_response",
    "run_cli",
]
