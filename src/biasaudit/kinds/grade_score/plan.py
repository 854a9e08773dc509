"""The requests a Grade Score run would send (``--dry-run``, ``--max-cost``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from biasaudit.kinds.grade_score.spec import GradeScoreSpec
from biasaudit.kinds.grade_score.task import build_grade_score_task, plan_grade_score
from biasaudit.providers import ModelRequest, Provider

__all__ = ["plan_requests"]


def plan_requests(spec: Any, provider: Provider) -> Iterator[ModelRequest]:
    """The requests a run of ``spec`` would send to ``provider``, made as they are read
    (nothing is sent)."""
    assert isinstance(spec, GradeScoreSpec)
    return plan_grade_score(build_grade_score_task(spec), spec).iter_requests()
