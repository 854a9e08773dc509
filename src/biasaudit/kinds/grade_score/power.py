"""``--dry-run --detect D`` for Grade Score audits: the chance of telling a Grade Score
(and its entropy and choice scores) apart from one D away, and the items that reach 80%
and 95% power. Each score's interval in a previous run (``--like RUN``) gives its SE
over items, which shrinks with the square root of the items; without one, stated
defaults do. Requests grow in proportion to the items. Items come from a file, so the
sizes say how many items the file needs; see :mod:`biasaudit.kinds._planning`.

``--until precise:H`` grows a Grade Score audit by items drawn from the file (nested:
``item_limit``; :data:`GROWTH`, :mod:`biasaudit.kinds._rounds`) until each score's
interval is within ±H. ``decided`` has no meaning here: a score has no gap of its own
whose sign or size could be settled (a change between two runs is ``biasaudit
compare``'s).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from biasaudit.errors import UsageError
from biasaudit.kinds._planning import Planned, like_metrics, model_of, plan_in_file_units, stated
from biasaudit.kinds._rounds import Figure, FileUnits
from biasaudit.kinds.grade_score.metrics_file import GradeScoreMetrics

__all__ = ["GROWTH", "plan_power"]

SCORES = ("grade_score", "entropy", "choice")


def plan_power(spec: Any, cost_at: Callable[[Any], tuple[int, float | None]]) -> list[str]:
    """The power lines of a Grade Score spec's ``detect`` (none where it is unset), from
    ``like``, or from stated defaults without it.

    Raises
    ------
    UsageError
        ``like`` not a Grade Score run with intervals, or the items file unreadable.
        With ``pilot``, a pilot of fewer items (drawn nested) is run first and planned
        from.
    """
    return plan_in_file_units(
        spec, cost_at, units=ITEMS, growth=GROWTH, audit=_run,
        planned=lambda spec: _from_like(spec) if spec.like is not None else _stated(spec),
    )  # fmt: skip


def _run() -> Callable[[Any], Any]:
    from biasaudit.kinds.grade_score.run import run

    return run


def _items(spec: Any) -> int:
    """The items this audit asks about (``item_limit`` of the file's, or all)."""
    from biasaudit.kinds.grade_score.task import build_grade_score_task

    return len(build_grade_score_task(spec).items)


ITEMS = FileUnits("items", "item_limit", "max_items", _items)


def _stated(spec: Any) -> Planned:
    """Without a previous run: an item's score anywhere in [0, 1], variance 0.25."""
    why = "an item's score anywhere in [0, 1]: SE² = 0.25/items"
    return stated("a change of the score", "items", ["grade score", "entropy", "choice"],
                  0.25, ITEMS.count(spec), why, confidence=spec.confidence)  # fmt: skip


def _from_like(spec: Any) -> Planned:
    like, metrics = like_metrics(spec, "grade-score", GradeScoreMetrics, "a Grade Score run")
    models = {}
    for name in SCORES:
        model = model_of(getattr(metrics, f"{name}_ci"), metrics.items, metrics.confidence,
                         interval_units=metrics.items)  # fmt: skip
        if model is not None:
            models[name.replace("_", " ")] = model
    if not models:
        raise UsageError(f"--like {like}: no score has an interval (too few items)")
    return Planned("a change of the score", "items", models, metrics.confidence, like.name)


def _scores(metrics: GradeScoreMetrics, spec: Any) -> dict[str, Figure]:
    """Each score with its interval, over the items in the means."""
    found = {}
    for name in SCORES:
        estimate, bounds = getattr(metrics, name), getattr(metrics, f"{name}_ci")
        if estimate is not None:
            found[name.replace("_", " ")] = Figure(
                estimate, bounds, metrics.items, (0.0, 1.0), interval_units=metrics.items
            )
    return found


GROWTH = ITEMS.growth(
    "each score",
    _scores,
    undecidable="a Grade Score has no gap of its own to settle (a change between two "
    "runs is biasaudit compare's)",
)
