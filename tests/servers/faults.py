"""Fault descriptions and the thread-safe book the servers draw them from."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

FaultKind = Literal[
    "status", "timeout", "drop", "malformed", "non_json", "empty", "reshape", "raw", "trickle"
]
# What a `reshape` fault makes of the normal body: a new JSON value, or the bytes to send.
Reshape = Callable[[dict[str, Any]], object]
Match = Callable[[dict[str, Any]], bool] | str | None

_DEFAULT_STATUS: Mapping[str, int] = {"status": 500, "non_json": 502}


@dataclass(frozen=True, slots=True)
class Fault:
    """One misbehaviour of the server for one request.

    kind:
      status    - `status` with a provider-shaped error body; `message`, `error_type`,
                  `code` fill it; `retry_after` (s) / `retry_after_ms` set the
                  Retry-After / retry-after-ms headers.
      timeout   - sleep `seconds` before answering normally (client-side timeouts).
      drop      - close the TCP connection without writing a response.
      malformed - 200, application/json, a truncated (invalid) JSON body.
      non_json  - `status` (default 502; 200 also useful) with an HTML body.
      empty     - 200 with a valid completion whose text is "" (null content /
                  no content blocks if `null_content`).
      reshape   - 200 (or `status`) with `reshape(normal body)`: a JSON value
                  (dumped with NaN allowed) or the bytes or text to send as is;
                  `chunked` sends it without a Content-Length, in 64 KiB chunks.
      raw       - write `raw` on the socket instead of an HTTP response, then close
                  (an SSH banner, a bad header line, a bare HTTP/0.9 body...).
      trickle   - send a 200's headers, then the body one byte every `seconds`.
    `headers` are added to any response the fault produces.
    """

    kind: FaultKind = "status"
    status: int | None = None
    message: str | None = None
    error_type: str | None = None
    code: str | None = None
    retry_after: float | None = None
    retry_after_ms: int | None = None
    seconds: float = 0.0
    null_content: bool = False
    headers: Mapping[str, str] | None = None
    reshape: Reshape | None = None
    raw: bytes = b""
    chunked: bool = False

    def __post_init__(self) -> None:
        if self.kind not in get_args(FaultKind):
            raise ValueError(f"unknown fault kind {self.kind!r}")

    @property
    def http_status(self) -> int:
        return self.status if self.status is not None else _DEFAULT_STATUS.get(self.kind, 200)

    def response_headers(self) -> dict[str, str]:
        out = dict(self.headers or {})
        if self.retry_after is not None:
            out["Retry-After"] = f"{self.retry_after:g}"
        if self.retry_after_ms is not None:
            out["retry-after-ms"] = str(self.retry_after_ms)
        return out

    # Shorthands for the common cases, so tests read as intent.
    @classmethod
    def http(cls, status: int, **kw: Any) -> Fault:
        return cls("status", status, **kw)

    @classmethod
    def rate_limit(
        cls, retry_after: float | None = None, retry_after_ms: int | None = None
    ) -> Fault:
        return cls("status", 429, retry_after=retry_after, retry_after_ms=retry_after_ms)

    @classmethod
    def quota(cls) -> Fault:
        # OpenAI reports an exhausted balance as a 429 that must not be retried.
        return cls(
            "status",
            429,
            message="You exceeded your current quota, please check your plan and billing details.",
            error_type="insufficient_quota",
            code="insufficient_quota",
        )

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        return cls("status", status)

    @classmethod
    def overloaded(cls) -> Fault:
        return cls("status", 529, error_type="overloaded_error", message="Overloaded")

    @classmethod
    def timeout(cls, seconds: float) -> Fault:
        return cls("timeout", seconds=seconds)

    @classmethod
    def drop(cls) -> Fault:
        return cls("drop")

    @classmethod
    def malformed(cls) -> Fault:
        return cls("malformed")

    @classmethod
    def non_json(cls, status: int = 502) -> Fault:
        return cls("non_json", status)

    @classmethod
    def empty(cls, null_content: bool = False) -> Fault:
        return cls("empty", null_content=null_content)

    @classmethod
    def reshaped(cls, reshape: Reshape, *, status: int | None = None, **kw: Any) -> Fault:
        return cls("reshape", status, reshape=reshape, **kw)

    @classmethod
    def body(cls, payload: object, *, status: int | None = None, **kw: Any) -> Fault:
        """A fixed body, whatever was asked: a JSON value, or bytes / text as is."""
        return cls("reshape", status, reshape=lambda _normal: payload, **kw)

    @classmethod
    def not_http(cls, raw: bytes) -> Fault:
        return cls("raw", raw=raw)

    @classmethod
    def trickle(cls, seconds_per_byte: float) -> Fault:
        return cls("trickle", seconds=seconds_per_byte)


@dataclass(slots=True)
class _Armed:
    fault: Fault
    remaining: int  # < 0: unlimited
    match: Match

    def matches(self, body: dict[str, Any], raw: bytes) -> bool:
        if self.match is None:
            return True
        if isinstance(self.match, str):
            # Raw text as sent, plus an unescaped dump so non-ASCII needles match too.
            text = raw.decode("utf-8", "replace")
            return self.match in text or self.match in json.dumps(body, ensure_ascii=False)
        return bool(self.match(body))


class FaultBook:
    """One-shot faults (FIFO, each with a use count) checked before persistent ones."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[_Armed] = deque()
        self._persistent: list[_Armed] = []

    def inject(self, fault: Fault, times: int = 1, match: Match = None) -> None:
        if times < 1:
            raise ValueError("times must be >= 1")
        with self._lock:
            self._queue.append(_Armed(fault, times, match))

    def fail_all(self, fault: Fault, match: Match = None) -> None:
        with self._lock:
            self._persistent.append(_Armed(fault, -1, match))

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self._persistent.clear()

    def pending(self) -> int:
        """Uses left on one-shot faults (persistent ones are not counted)."""
        with self._lock:
            return sum(a.remaining for a in self._queue)

    def take(self, body: dict[str, Any], raw: bytes) -> Fault | None:
        if not self._queue and not self._persistent:
            return None  # lock-free fast path for the benchmark case
        with self._lock:
            for armed in self._queue:
                if armed.matches(body, raw):
                    armed.remaining -= 1
                    if armed.remaining == 0:
                        self._queue.remove(armed)
                    return armed.fault
            for armed in self._persistent:
                if armed.matches(body, raw):
                    return armed.fault
        return None
