"""The requests a decisions run would send (``--dry-run``, ``--max-cost``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from biasaudit.kinds.decisions.spec import DecisionsSpec
from biasaudit.kinds.decisions.task import build_decisions_task, plan_decisions
from biasaudit.providers import ModelRequest, Provider

__all__ = ["plan_requests", "shown_names"]


def plan_requests(spec: Any, provider: Provider) -> Iterator[ModelRequest]:
    """The requests a run of ``spec`` would send to ``provider``, made as they are read
    (nothing is sent)."""
    assert isinstance(spec, DecisionsSpec)
    return plan_decisions(build_decisions_task(spec), spec, provider).iter_requests()


def shown_names(spec: Any) -> tuple[str, ...]:
    """The persons' names an audit of ``spec`` shows the model (its implicit fill)."""
    assert isinstance(spec, DecisionsSpec)
    return tuple(dict.fromkeys(p.name for p in build_decisions_task(spec).persons if p.name))
