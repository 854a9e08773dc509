"""What every audit kind shares: how it describes its tasks, and the request counts
each ``metrics.json`` carries. No kind imports another; they meet here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel

if TYPE_CHECKING:
    from biasaudit.engine.session import RunSession

__all__ = ["RequestCounts", "TaskInfo", "request_counts"]


@dataclass(frozen=True)
class TaskInfo:
    """What ``biasaudit tasks`` shows about one task."""

    name: str
    summary: str
    groups: str
    pools: str
    data: tuple[tuple[str, str], ...]
    prompts: tuple[str, ...]
    usage: str


class RequestCounts(BaseModel):
    """What a run's requests came to (every kind's ``metrics.json``: ``requests``)."""

    requests: int
    sent: int
    cache_hits: int
    failures: int
    refusals: int


def request_counts(session: RunSession) -> RequestCounts:
    """The counts of ``session``'s engine."""
    stats = session.engine.stats
    return RequestCounts(
        requests=stats.total,
        sent=stats.sent,
        cache_hits=stats.cache_hits,
        failures=stats.failures,
        refusals=stats.refusals,
    )


NOTHING_SENT = RequestCounts(requests=0, sent=0, cache_hits=0, failures=0, refusals=0)
"""An imported run's counts: no request was sent."""
