"""The interface of a provider's batch API, which ``--batch`` sends a run's requests through.

A batch API takes many requests at once, answers them within a window (24 h)
at half the price, and hands the answers back as a file, in any order, each
tagged with the ``custom_id`` it was sent with. biasaudit sends every request
with its cache key as ``custom_id`` (a SHA-256 hex digest: 64 characters of
``[0-9a-f]``, within Anthropic's 64 of ``[A-Za-z0-9_-]``).

The provider builds each entry's body with the same code as a normal request
and reads each answer with the same parser, so a batch answer and a direct
answer to one request are the same :class:`ModelResponse`. The batch runner
(:mod:`biasaudit.engine.batch`) owns splitting, bookkeeping, polling and resume.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Literal

from biasaudit.providers._types import ModelRequest, ModelResponse

__all__ = ["BatchAPI", "BatchEntry", "BatchLimits", "BatchState", "EntryFailure"]

EntryFailure = Literal["errored", "expired", "canceled", "missing"]


@dataclass(frozen=True)
class BatchLimits:
    """Most requests, and most bytes of request lines, one batch may hold."""

    max_requests: int
    max_bytes: int


@dataclass(frozen=True)
class BatchState:
    """What the provider last said about one batch.

    Attributes
    ----------
    batch_id:
        The provider's id of the batch.
    status:
        The provider's own word for its state (``in_progress``, ``ended`` ...).
    ended:
        No entry will change any more: the results can be fetched.
    counts:
        Entries by outcome: ``total``, ``processing``, ``succeeded``,
        ``errored``, ``expired``, ``canceled`` (the provider may give fewer).
    created_at:
        When the provider created the batch (Unix seconds).
    """

    batch_id: str
    status: str
    ended: bool
    counts: dict[str, int] = field(default_factory=dict)
    created_at: float = 0.0


@dataclass(frozen=True)
class BatchEntry:
    """One entry of a batch's results: an answer's body, or why there is none."""

    custom_id: str
    body: dict[str, Any] | None = None
    request_id: str | None = None
    failure: EntryFailure | None = None
    error: str | None = None


class BatchAPI(ABC):
    """One provider's batch endpoints, through its official SDK.

    Attributes
    ----------
    name:
        The provider's name (``openai``, ``anthropic``).
    limits:
        The provider's documented limits per batch.
    on_answer:
        Called with each request and its parsed answer (a budget counts its cost).
    """

    name: str
    limits: BatchLimits
    on_answer: Callable[[ModelRequest, ModelResponse], None] | None = None

    @abstractmethod
    def endpoint(self, request: ModelRequest) -> str:
        """The endpoint the request goes to; one batch holds one endpoint's requests."""

    @abstractmethod
    def line(self, custom_id: str, request: ModelRequest) -> dict[str, Any]:
        """The batch entry of one request, with exactly the body a direct request sends."""

    @abstractmethod
    async def submit(
        self, lines: list[dict[str, Any]], *, endpoint: str, tag: str, timeout: float
    ) -> BatchState:
        """Create a batch of ``lines`` labelled ``tag`` (where the API keeps labels)."""

    @abstractmethod
    async def find(
        self, tag: str, *, size: int, since: float, known: Collection[str], timeout: float
    ) -> BatchState | None:
        """The batch submitted as ``tag`` at or after ``since``, if the provider has one.

        Used after a crash between creating a batch and recording its id.
        ``size`` is its number of entries and ``known`` the ids already
        recorded, for APIs that keep no labels.
        """

    @abstractmethod
    async def poll(self, batch_id: str, *, timeout: float) -> BatchState:
        """The batch's current state."""

    @abstractmethod
    def results(self, state: BatchState, *, timeout: float) -> AsyncIterator[BatchEntry]:
        """Every entry of an ended batch, in the provider's order."""

    @abstractmethod
    def parse(self, entry: BatchEntry, request: ModelRequest) -> ModelResponse:
        """The answer of a successful entry, read as a direct answer is read."""
