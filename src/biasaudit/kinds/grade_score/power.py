"""``--dry-run --detect D`` for Grade Score audits: the chance of telling a Grade Score
(and its entropy and choice scores) apart from one D away, and the items that reach 80%
and 95% power. Each score's interval in a previous run (``--like RUN``) gives its SE
over items, which shrinks with the square root of the items; without one, stated
defaults do. Requests grow in proportion to the items. Items come from a file, so the
sizes say how many items the file needs; see :mod:`biasaudit.kinds._planning`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from biasaudit.errors import UsageError
from biasaudit.kinds._planning import Planned, like_metrics, model_of, power_lines, stated
from biasaudit.kinds._planning import scaled_cost as _scaled
from biasaudit.kinds.grade_score.run import GradeScoreMetrics

__all__ = ["plan_power"]


def plan_power(spec: Any, cost_at: Callable[[Any], tuple[int, float | None]]) -> list[str]:
    """The power lines of a Grade Score spec's ``detect`` (none where it is unset), from
    ``like``, or from stated defaults without it.

    Raises
    ------
    UsageError
        ``like`` not a Grade Score run with intervals, or the items file unreadable.
    """
    if spec.detect is None:
        return []
    planned, items = _from_like(spec) if spec.like is not None else _stated(spec)
    lines = power_lines(planned, spec.detect, items, _scaled(spec, cost_at, items))
    return [*lines, "  items come from the items file: add items there to reach a size"]


def _stated(spec: Any) -> tuple[Planned, int]:
    """Without a previous run: an item's score anywhere in [0, 1], variance 0.25."""
    from biasaudit.kinds.grade_score.task import build_grade_score_task

    items = len(build_grade_score_task(spec).items)
    why = "an item's score anywhere in [0, 1]: SE² = 0.25/items"
    planned = stated("a change of the score", "items", ["grade score", "entropy", "choice"],
                     0.25, items, why, confidence=spec.confidence)  # fmt: skip
    return planned, items


def _from_like(spec: Any) -> tuple[Planned, int]:
    like, metrics = like_metrics(spec, "grade-score", GradeScoreMetrics, "a Grade Score run")
    models = {}
    for name in ("grade_score", "entropy", "choice"):
        model = model_of(getattr(metrics, f"{name}_ci"), metrics.items, metrics.confidence)
        if model is not None:
            models[name.replace("_", " ")] = model
    if not models:
        raise UsageError(f"--like {like}: no score has an interval (too few items)")
    planned = Planned("a change of the score", "items", models, metrics.confidence, like.name)
    return planned, metrics.items_total
