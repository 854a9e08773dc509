"""The engine's types apart from the engine, so that the batch runner and the worker
processes use them without importing the engine (which imports them back).

:class:`EngineSettings` (how requests are sent), :class:`RequestResult` (what one
request came to) and :class:`EngineStats` (what a run counted).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Protocol, TypedDict, cast

from biasaudit.providers import ModelRequest, ModelResponse

__all__ = [
    "BOUNDS",
    "MAX_TIMEOUT_S",
    "EngineSettings",
    "EngineStats",
    "FanOut",
    "Pairs",
    "RequestResult",
    "format_duration",
    "format_rate",
]

Pairs = list[tuple[ModelRequest, str]]
"""Requests to send, each with its cache key."""

MAX_TIMEOUT_S = 86_400.0


class Bounds(TypedDict, total=False):
    """The bounds of one setting, in pydantic's words."""

    ge: float
    gt: float
    le: float


BOUNDS: dict[str, Bounds] = {
    "concurrency": {"ge": 1, "le": 4096},
    "rpm": {"gt": 0.0, "le": 1e7},
    "tpm": {"gt": 0.0, "le": 1e10},
    "max_retries": {"ge": 0, "le": 100},
    "timeout": {"gt": 0.0, "le": MAX_TIMEOUT_S},
    "workers": {"ge": 1, "le": 64},
    "batch_poll": {"gt": 0.0, "le": 3600.0},
    "batch_max_requests": {"ge": 1},
}
"""The bounds of each engine setting, declared once: :class:`EngineSettings` checks them
for library callers, and the run options (:class:`~biasaudit.engine.options.RunOptions`)
hand them to pydantic, which names the field at fault in a spec or on the command line.
Keys are pydantic's: ``ge``, ``gt``, ``le``."""
_CHECKS: dict[str, tuple[Callable[[float, float], bool], str]] = {
    "ge": (lambda value, bound: value >= bound, "at least"),
    "gt": (lambda value, bound: value > bound, "greater than"),
    "le": (lambda value, bound: value <= bound, "at most"),
}


@dataclass(frozen=True)
class EngineSettings:
    """How hard to push one endpoint. None of these enters a cache key.

    Attributes
    ----------
    concurrency:
        Most requests in flight at once (the ceiling of the adaptive limit).
    rpm:
        Most requests started per minute, or ``None`` for no cap.
    tpm:
        Most tokens sent per minute (each request counted before it is sent: its
        prompt and the most its answer may take), or ``None`` for no cap.
    max_retries:
        Retries after the first attempt of one request.
    timeout:
        Seconds one attempt may take, from sending to the last byte of the answer.
    backoff_initial, backoff_max:
        Full-jitter exponential backoff between attempts, in seconds.
    max_retry_after:
        Longest ``Retry-After`` waited before a retry; an endpoint that asks for
        longer stops the run (:class:`~biasaudit.errors.WaitTooLongError`).
    replay:
        Serve everything from the cache and never open a connection.
    read_cache:
        ``False`` asks the endpoint afresh (re-audits) but still stores the answers.
    workers:
        Processes to share the uncached requests among, this one included
        (each with its share of ``concurrency``, ``rpm`` and ``tpm``; the children come
        from :mod:`biasaudit.engine.worker_pool`). One process drives one core; beyond
        a few hundred requests a second the SDKs' request building, not the
        endpoint, is the limit, and more workers lift it. Runs of fewer than
        ``MIN_REQUESTS_PER_WORKER`` requests per worker stay in-process.
    batch:
        Send the uncached requests through the provider's batch API
        (:mod:`biasaudit.engine.batch`): half price, answers within 24 h, resumable.
    batch_poll, batch_poll_max:
        Seconds before the first status check of a batch; the wait doubles
        after each check, up to ``batch_poll_max``.
    batch_max_requests, batch_max_bytes:
        Lower the provider's limits per batch (``None``: the provider's own).
    """

    concurrency: int = 16
    rpm: float | None = None
    tpm: float | None = None
    max_retries: int = 6
    timeout: float = 60.0
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    max_retry_after: float = 300.0
    replay: bool = False
    read_cache: bool = True
    workers: int = 1
    batch: bool = False
    batch_poll: float = 5.0
    batch_poll_max: float = 60.0
    batch_max_requests: int | None = None
    batch_max_bytes: int | None = None

    def __post_init__(self) -> None:
        for name, bounds in BOUNDS.items():
            value = getattr(self, name)
            if value is None:
                continue
            for kind, bound in cast("dict[str, float]", bounds).items():
                holds, words = _CHECKS[kind]
                if not holds(value, bound):  # NaN holds no bound
                    raise ValueError(f"{name} must be {words} {bound:g}, got {value!r}")

    def for_worker(self, workers: int) -> EngineSettings:
        """The share of these limits that one of ``workers`` processes gets."""
        return replace(
            self,
            concurrency=max(1, math.ceil(self.concurrency / workers)),
            rpm=self.rpm / workers if self.rpm else None,
            tpm=self.tpm / workers if self.tpm else None,
            workers=1,
            read_cache=False,  # the parent has already served what the cache holds
            replay=False,
            batch=False,  # workers only ever send directly
        )


@dataclass
class RequestResult:
    """The outcome of one input request.

    Exactly one of ``response`` (possibly with a ``refusal``) and ``error`` tells
    what happened; ``error_type`` names the :mod:`biasaudit.errors` class. A
    refusal is the model's answer to the prompt: cached, replayed and counted
    like any answer, but not ``ok`` (it holds no answer to read).
    """

    request: ModelRequest
    key: str
    response: ModelResponse | None = None
    error: str | None = None
    error_type: str | None = None
    cached: bool = False
    attempts: int = 0
    latency_s: float | None = None
    waited_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.response is not None and self.response.refusal is None


@dataclass
class EngineStats:
    """Live counters of one engine run (read by progress displays and manifests)."""

    total: int = 0
    done: int = 0
    sent: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    refusals: int = 0
    rate_limited: int = 0
    in_flight: int = 0
    concurrency_limit: int = 0
    lowest_concurrency_limit: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    batched: int = 0
    batch_status: str = ""
    waiting: int = 0  # requests another process has in flight, waited for
    model_versions: Counter[str] = field(default_factory=Counter)
    system_fingerprints: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)

    def count_response(self, response: ModelResponse) -> None:
        if response.model_version:
            self.model_versions[response.model_version] += 1
        if response.system_fingerprint:
            self.system_fingerprints[response.system_fingerprint] += 1


def format_rate(rate: float) -> str:
    """Requests a second, with the digits a slow endpoint needs (``0.43 req/s``)."""
    if rate <= 0:
        return "0 req/s"
    if rate < 10:
        return f"{rate:.2g} req/s"
    return f"{rate:.0f} req/s"


def format_duration(seconds: float) -> str:
    """``45s``, ``12m05s``, ``3h20m``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class FanOut(Protocol):
    """One way of sending requests that the cache did not answer (the engine picks one
    per run, as httpx picks a transport): from this process
    (:class:`~biasaudit.engine.sending.InProcess`), shared with worker processes
    (:class:`~biasaudit.engine.strategies.WorkerProcesses`), through the provider's
    batch API (:class:`~biasaudit.engine.strategies.Batched`), or under leases in a
    cache other processes share (:class:`~biasaudit.engine.strategies.Leased`, around
    one of the first two).

    :meth:`send` yields one result per request, as each arrives, each answer already
    in the cache; when the endpoint or the budget stops the run it yields the answers
    in flight, then raises :class:`~biasaudit.errors.RunAbortedError`.
    """

    def send(self, todo: Pairs) -> AsyncIterator[RequestResult]: ...
