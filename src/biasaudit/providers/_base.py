"""The interface every provider implements, and the shared HTTP-error classification."""

from __future__ import annotations

import email.utils
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from biasaudit.errors import (
    AuthenticationFailedError,
    FatalProviderError,
    LogprobsUnavailableError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitedError,
    RequestRejectedError,
    TransientProviderError,
    UsageError,
)
from biasaudit.providers._types import Capabilities, ModelChatTemplate, ModelRequest, ModelResponse
from biasaudit.secrets import redact

if TYPE_CHECKING:
    from biasaudit.providers._batch_api import BatchAPI

__all__ = ["Provider", "classify_status", "parse_retry_after"]

# Statuses worth another try: request timeout, conflict (lock contention at some
# hosts), rate limits, server errors, Anthropic's 529 "overloaded".
_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})
_QUOTA_MARKERS = ("insufficient_quota", "quota exceeded", "exceeded your current quota", "credit")


class Provider(ABC):
    """A thin adapter from :class:`ModelRequest` to one API.

    Subclasses build the request for their API, send it with their SDK (built
    with ``max_retries=0``: the engine alone retries), and normalise the answer
    into a :class:`ModelResponse`. :meth:`classify` turns whatever the SDK
    raised into one of the :mod:`biasaudit.errors` provider errors, which is
    how the engine decides between retrying, waiting, failing one request and
    stopping the run.
    """

    name: str
    model: str
    base_url: str | None = None
    capabilities: Capabilities = Capabilities()
    simulated: bool = False
    # The package of the provider plugin that built it (None: one of biasaudit's own). An
    # exception of a plugin's own fails the request it was raised for, named; one of
    # biasaudit's is a bug, and surfaces.
    plugin: str | None = None
    # Most requests the endpoint answers at once, where it is known to be few (local
    # servers: one each). The engine keeps no more in flight, so a request's latency and
    # the progress line's "in flight" are the endpoint's, not a queue's. None: no limit.
    answers_at_once: int | None = None
    # The resolve_model() arguments that rebuild this provider in a worker
    # process (never a key: workers read keys from the environment).
    spec: dict[str, Any] | None = None

    @property
    def model_id(self) -> str:
        return f"{self.name}/{self.model}"

    @property
    def cache_scope(self) -> str | None:
        """Besides provider and model, what tells this endpoint's answers apart in the cache.

        The base URL by default: the same model name on two servers may be two
        different models. A provider whose URL changes every run (a local server
        on a free port) returns the model's identity instead.
        """
        return self.base_url

    @abstractmethod
    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        """Send one request and return its normalised response (no retries here)."""

    def classify(self, error: BaseException) -> ProviderError:
        """Map an exception raised by :meth:`complete` to a typed provider error.

        Network-level failures are transient; anything else that is not already a
        :class:`ProviderError` is a bug, and is raised again rather than retried.
        """
        if isinstance(error, ProviderError):
            return error
        if isinstance(error, TimeoutError | ConnectionError):
            return TransientProviderError(redact(f"{type(error).__name__}: {error}"))
        raise error

    def check(self, request: ModelRequest) -> None:
        """Refuse, before sending anything, a request this endpoint cannot answer."""
        caps = self.capabilities
        if request.params.wants_logprobs and caps.logprobs is False:
            raise LogprobsUnavailableError(
                f"{self.model_id} cannot return logprobs; use sampled replicates instead"
            )
        wanted = request.params.top_logprobs or 0
        if caps.max_top_logprobs is not None and wanted > caps.max_top_logprobs:
            raise LogprobsUnavailableError(
                f"{self.model_id} returns at most {caps.max_top_logprobs} top_logprobs; "
                f"a request asked for {wanted}"
            )
        stops = len(request.params.stop or ())
        if caps.max_stop is not None and stops > caps.max_stop:
            raise UsageError(
                f"{self.model_id} takes at most {caps.max_stop} stop sequences; "
                f"a request gives {stops}"
            )
        if request.kind == "completion" and not caps.completions:
            raise RequestRejectedError(f"{self.model_id} has no legacy completions endpoint")
        if caps.reasoning_tokens is not None:
            for name in ("temperature", "top_p"):
                value = getattr(request.params, name)
                if value is not None and value != 1:
                    raise UsageError(
                        f"{self.model_id} is a reasoning model: it samples only at "
                        f"temperature 1 and top_p 1 and refuses other values, and a request "
                        f"asks for {name} {value:g} (greedy decoding, as pairwise comparisons "
                        "use, is not available); ask for 1 (an audit's --temperature 1) or "
                        "leave it unset"
                    )

    def prepare(self) -> None:  # noqa: B027 - optional hook, not abstract
        """Get ready to send before the first request (import an SDK, build its client).

        Sending does this itself when needed; a worker process calls it early,
        while it waits for its requests.
        """

    async def aclose(self) -> None:  # noqa: B027 - optional hook, not abstract
        """Release connections; the default has none."""

    def chat_template(self) -> ModelChatTemplate | None:
        """The model's own chat template where the provider can read it; None (the default)
        where it cannot (a remote server does not say)."""
        return None

    def batch_api(self) -> BatchAPI | None:
        """The provider's batch API (``--batch``), or ``None`` where it has none (the default)."""
        return None

    def run_report(self) -> dict[str, object]:
        """What the provider counted during the run, added to the manifest's endpoint at the end.

        Nothing by default; a replica set reports each replica's counts.
        """
        return {}

    def describe(self) -> dict[str, object]:
        """What the manifest records about the endpoint (never a key)."""
        return {
            "provider": self.name,
            "model": self.model,
            "base_url": self.base_url,
            "simulated": self.simulated,
            "capabilities": self.capabilities.model_dump(),
        }


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the endpoint asked us to wait: ``retry-after-ms``, else ``Retry-After``.

    ``Retry-After`` may be a number of seconds or an HTTP date (RFC 9110 §10.2.3).
    """
    if not headers:
        return None
    millis = _seconds(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    value = headers.get("retry-after")
    if not value:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None  # "soon", garbage: no hint, back off as without one
    return max(0.0, parsed.timestamp() - time.time())


def _seconds(value: str | None) -> float | None:
    """A non-negative, finite number of seconds, or ``None`` for anything else."""
    try:
        seconds = float(value) if value else math.nan
    except ValueError:
        return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def classify_status(
    status: int, message: str, *, headers: Mapping[str, str] | None = None, code: str | None = None
) -> ProviderError:
    """Turn an HTTP error status and its message into the right provider error."""
    message = redact(message)
    lowered = f"{code or ''} {message}".lower()
    if status in (429, 402) and any(marker in lowered for marker in _QUOTA_MARKERS):
        return QuotaExhaustedError(
            f"quota exhausted (HTTP {status}): {message}; waiting will not help", status=status
        )
    if status in (401, 403):
        return AuthenticationFailedError(
            f"the endpoint rejected the API key (HTTP {status}): {message}", status=status
        )
    if status in (429, 529):
        what = "the endpoint is overloaded" if status == 529 else "rate limited"
        return RateLimitedError(
            f"{what} (HTTP {status}): {message}",
            status=status,
            retry_after=parse_retry_after(headers),
        )
    if status in _RETRY_STATUSES:
        return TransientProviderError(
            f"HTTP {status}: {message}", status=status, retry_after=parse_retry_after(headers)
        )
    if status == 400 and "logprob" in lowered:
        return LogprobsUnavailableError(
            f"the endpoint refused the logprobs request (HTTP 400): {message}", status=status
        )
    if status == 404:
        return FatalProviderError(
            f"not found (HTTP 404): {message}; check the model name and base URL", status=status
        )
    return RequestRejectedError(f"HTTP {status}: {message}", status=status)
