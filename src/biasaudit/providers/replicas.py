"""Several replicas of one self-hosted model, behind one provider.

``--base-url`` given more than once (or ``base_urls:`` in a spec) names
servers that all serve the same model, e.g. one vLLM per GPU node. Each
request goes to the replica with the fewest requests outstanding (ties taken
in turn), so a slow replica gets less work without any tuning.

A replica that fails is taken out and tried again later, a circuit breaker per
replica:

- **closed** (in use): a refused connection takes it out at once;
  ``failure_threshold`` server errors or timeouts in a row take it out too.
  Rate limits (429) leave it in: the server is up, and the engine slows down.
- **open** (taken out) for a cool-down of ``cooldown`` seconds, doubled each
  time it fails again, up to ``max_cooldown``.
- **half-open**: once the cool-down is over, one request is sent to it; an
  answer puts it back in use, a failure takes it out for a longer cool-down.

This provider never resends anything itself: a request that failed on one
replica is raised to the engine as a transient error, and the engine's retry
(with its backoff) goes to another replica. Only when every replica is taken
out does the error say so (unreachable, when every one of them refused).

**Cache key.** All replicas serve one model, so an answer must not depend on
which replica gave it: answers are cached under the *first* base URL given, as
if that server had answered alone. A run against the first server alone, or
with replicas added, removed or reordered behind it, reuses them.

Runs in one process (``spec`` is ``None``): the health of each replica and its
counts (in the manifest, ``endpoint.replicas``) live in this object.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from biasaudit.errors import (
    ConfigurationError,
    EndpointUnreachableError,
    ProviderError,
    RateLimitedError,
    TransientProviderError,
)
from biasaudit.providers._base import Provider
from biasaudit.providers._types import ModelRequest, ModelResponse

__all__ = ["ReplicaSetProvider", "ReplicaState"]

ReplicaState = Literal["closed", "open", "half-open"]


@dataclass
class _Replica:
    """One replica's provider, health and counts."""

    provider: Provider
    state: ReplicaState = "closed"
    outstanding: int = 0
    sent: int = 0
    answered: int = 0
    failed: int = 0
    ejections: int = 0
    failures_in_row: int = 0
    refused: bool = False  # the last failure was a refused connection
    reopens_at: float = 0.0
    cooldown: float = 0.0
    last_error: str | None = None

    @property
    def url(self) -> str:
        return self.provider.base_url or ""

    def counts(self) -> dict[str, object]:
        return {
            "base_url": self.url,
            "sent": self.sent,
            "answered": self.answered,
            "failed": self.failed,
            "taken_out": self.ejections,
            "state": self.state,
            "last_error": self.last_error,
        }


class ReplicaSetProvider(Provider):
    """Spread requests over ``replicas`` of one model; see the module docstring.

    Parameters
    ----------
    replicas:
        One provider per server, all for the same ``provider/model``; the first
        one's base URL is the cache scope.
    failure_threshold:
        Server errors or timeouts in a row that take a replica out.
    cooldown, max_cooldown:
        Seconds a replica stays out the first time, and at most.
    clock:
        Monotonic seconds (tests pass a fake one).
    """

    def __init__(
        self,
        replicas: Sequence[Provider],
        *,
        failure_threshold: int = 3,
        cooldown: float = 5.0,
        max_cooldown: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if len(replicas) < 2:
            raise ValueError("a replica set needs at least two replicas")
        first = replicas[0]
        if any(r.model_id != first.model_id for r in replicas):
            raise ValueError("every replica must serve the same provider/model")
        self.name, self.model, self.base_url = first.name, first.model, first.base_url
        self.capabilities, self.simulated = first.capabilities, first.simulated
        self.spec = None  # health and counts live in this process
        self._replicas = [_Replica(r) for r in replicas]
        self._threshold = max(1, failure_threshold)
        self._cooldown, self._max_cooldown = cooldown, max(cooldown, max_cooldown)
        self._clock = clock
        self._turn = itertools.count()

    def __repr__(self) -> str:
        urls = ", ".join(r.url for r in self._replicas)
        return f"ReplicaSetProvider({self.model_id!r}, [{urls}])"

    @property
    def cache_scope(self) -> str | None:
        return self._replicas[0].provider.cache_scope

    @property
    def replicas(self) -> list[dict[str, object]]:
        """Each replica's base URL, state and counts, in the order given."""
        return [r.counts() for r in self._replicas]

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        replica = self._pick()
        replica.outstanding += 1
        replica.sent += 1
        try:
            response = await replica.provider.complete(request, timeout=timeout)
        except (asyncio.CancelledError, KeyboardInterrupt):
            if replica.state == "half-open":  # the probe never finished: probe again
                replica.state = "open"
            raise
        except BaseException as raw:
            error = replica.provider.classify(raw)  # a bug is raised again, as it is
            replica.failed += 1
            self._failed(replica, error)
            raise self._for_engine(replica, error) from raw
        else:
            replica.answered += 1
            self._answered(replica)
            return response
        finally:
            replica.outstanding -= 1

    def classify(self, error: BaseException) -> ProviderError:
        return self._replicas[0].provider.classify(error)

    async def aclose(self) -> None:
        for replica in self._replicas:
            await replica.provider.aclose()

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "base_urls": [r.url for r in self._replicas]}

    def run_report(self) -> dict[str, object]:
        return {"replicas": self.replicas}

    def _pick(self) -> _Replica:
        """The usable replica with the fewest outstanding requests (ties in turn)."""
        now = self._clock()
        usable = [r for r in self._replicas if self._usable(r, now)]
        if not usable:
            raise self._none_usable(now)
        start = next(self._turn) % len(usable)
        rotated = usable[start:] + usable[:start]
        chosen = min(rotated, key=lambda r: r.outstanding)
        if chosen.state == "open":  # its cool-down is over: this request probes it
            chosen.state = "half-open"
        return chosen

    @staticmethod
    def _usable(replica: _Replica, now: float) -> bool:
        if replica.state == "closed":
            return True
        if replica.state == "half-open":
            return False  # its one probe is in flight
        return now >= replica.reopens_at

    def _answered(self, replica: _Replica) -> None:
        replica.failures_in_row, replica.refused = 0, False
        if replica.state == "half-open":
            replica.state, replica.cooldown = "closed", 0.0

    def _failed(self, replica: _Replica, error: ProviderError) -> None:
        if isinstance(error, RateLimitedError) or not isinstance(
            error, TransientProviderError | EndpointUnreachableError
        ):
            self._answered(replica)  # it answered: rate limits and rejections are not ill health
            return
        replica.last_error = str(error)
        replica.refused = isinstance(error, EndpointUnreachableError)
        if replica.state == "open":
            return  # sent before it was taken out; already counted
        replica.failures_in_row += 1
        # A refused connection or a failed probe needs no second opinion.
        at_once = replica.refused or replica.state == "half-open"
        if at_once or replica.failures_in_row >= self._threshold:
            self._take_out(replica)

    def _take_out(self, replica: _Replica) -> None:
        if replica.cooldown:
            replica.cooldown = min(self._max_cooldown, replica.cooldown * 2)
        else:
            replica.cooldown = self._cooldown
        replica.state, replica.ejections = "open", replica.ejections + 1
        replica.reopens_at = self._clock() + replica.cooldown

    def _for_engine(self, replica: _Replica, error: ProviderError) -> ProviderError:
        """A failure of one replica is transient while another can take the retry."""
        if not isinstance(error, EndpointUnreachableError):
            return error
        now = self._clock()
        if any(self._usable(r, now) or r.state == "half-open" for r in self._replicas):
            return TransientProviderError(f"replica {replica.url} is unreachable; taken out")
        return self._none_usable(now)

    def _none_usable(self, now: float) -> ProviderError:
        urls = ", ".join(r.url for r in self._replicas)
        if all(r.refused for r in self._replicas):
            return EndpointUnreachableError(
                f"cannot reach any of the {len(self._replicas)} replicas ({urls})"
            )
        wait = min(r.reopens_at for r in self._replicas if r.state == "open") - now
        return TransientProviderError(
            f"every replica is taken out after failures ({urls}); "
            f"the first is tried again in {max(0.0, wait):.1f}s",
            retry_after=max(0.05, wait),
        )


def build_replica_set(urls: Sequence[str], build: Callable[[str], Provider]) -> Provider:
    """One provider for ``urls``: the server itself when one is given, else a replica set.

    Raises
    ------
    ConfigurationError
        No URL, a URL given twice, or a provider that is not an
        OpenAI-compatible server (hosted APIs, ``sim/`` and ``local/`` have one endpoint).
    """
    urls = [url.rstrip("/") for url in urls]
    if not urls:
        raise ConfigurationError("--base-url was given an empty list")
    repeated = sorted({url for url in urls if urls.count(url) > 1})
    if repeated:
        raise ConfigurationError(f"--base-url {repeated[0]} is given more than once")
    providers = [build(url) for url in urls]
    if len(providers) == 1:
        return providers[0]
    from biasaudit.providers.openai_compatible import OpenAICompatibleProvider

    if not all(isinstance(p, OpenAICompatibleProvider) for p in providers):
        raise ConfigurationError(
            f"several --base-url are for replicas of a self-hosted OpenAI-compatible "
            f"server; {providers[0].model_id} has one endpoint"
        )
    return ReplicaSetProvider(providers)
