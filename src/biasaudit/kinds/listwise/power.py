"""``--dry-run --detect D --like RUN`` for listwise audits: the chance of detecting a
|ΔDP| of D at the headline k, and the pools per subtask that reach 80% and 95% power
(each group's ΔDP interval in the previous run gives its SE, which shrinks with the
square root of the pools: each pool brings new names); see :mod:`biasaudit.kinds._planning`.
``--until`` grows a listwise audit by pools per subtask, drawn nested (:data:`GROWTH`,
:mod:`biasaudit.kinds._rounds`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from biasaudit.errors import UsageError
from biasaudit.kinds._planning import Planned, like_metrics, like_pools, model_of, plan_in_pools
from biasaudit.kinds._rounds import Design, Figure, planned_design, pools_growth
from biasaudit.kinds.listwise.metrics_file import ListwiseMetrics

__all__ = ["GROWTH", "design", "plan_power", "planned"]


def planned(spec: Any, k: int) -> Planned:
    """Each group's ΔDP at ``k`` in the spec's ``--like`` run as a plan's figures, over
    its pools per subtask.

    Raises
    ------
    UsageError
        No ``--like``, not a listwise run, or no group with an interval at ``k``.
    """
    like, metrics = like_metrics(spec, "listwise", ListwiseMetrics, "a listwise run")
    pools = like_pools(like)
    models = {}
    for gap in metrics.gaps:
        model = model_of(gap.ci, pools, metrics.confidence, interval_units=metrics.interval_units)
        if gap.k == k and model is not None:
            models[gap.group] = model
    if not models:
        raise UsageError(
            f"--like {like}: no group has a ΔDP interval at k={k} from a listwise audit's "
            "pools; run a pilot of a few pools per subtask"
        )
    where = f" at k={k} against {metrics.reference_group}"
    return Planned("|ΔDP|", "pools per subtask", models, metrics.confidence, like.name, where)


def plan_power(spec: Any, cost_at: Callable[[Any], tuple[int, float | None]]) -> list[str]:
    """The power lines of a listwise spec's ``detect`` (none where it is unset).

    Raises
    ------
    UsageError
        ``like`` unusable. With ``pilot``, a pilot of fewer pools (drawn nested) is run
        first and planned from; without either, the plan rests on stated defaults.
    """
    if spec.detect is None:
        return []
    from biasaudit.kinds.listwise.run import run

    return plan_in_pools(spec, cost_at, GROWTH, run, planned)


def _gaps(metrics: ListwiseMetrics, spec: Any) -> dict[str, Figure]:
    """Each group's ΔDP at the headline k, over the round's pools per subtask."""
    return {
        gap.group: Figure(gap.dp_gap, gap.ci, spec.pools, interval_units=metrics.interval_units)
        for gap in metrics.gaps
        if gap.k == spec.headline_k
    }


def design(spec: Any, confidence: float) -> Design | None:
    """A group-sequential design for ``decided`` where the power analysis can size one
    (``--like``): :func:`biasaudit.kinds._rounds.planned_design` over pools per subtask;
    None otherwise (the confidence sequence is used)."""
    if spec.until != "decided" or spec.like is None:
        return None
    plan = planned(spec, spec.headline_k)
    return planned_design(spec, plan.models, spec.pools, spec.max_pools, confidence)


GROWTH = pools_growth(_gaps, design)
