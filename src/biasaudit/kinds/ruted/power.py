"""``--dry-run --detect D`` for RUTEd audits: the chance of telling each context's skew
apart from one D away, and the occupations that reach 80% and 95% power. Each context's
skew interval in a previous run (``--like RUN``) gives its SE over occupations, which
shrinks with the square root of the occupations; without one, stated defaults do.
Requests grow in proportion to them. Occupations come from a file (40 shipped), so the
sizes say how many it needs; see :mod:`biasaudit.kinds._planning`.

``--until`` grows a RUTEd audit by replicates (:data:`GROWTH`,
:mod:`biasaudit.kinds._rounds`): each context's skew interval counts the sampling
variance of its occupations' shares, ``4p(1-p)/n`` (occupations held fixed), which more
replicates shrink. With ``until``, the spec asks ``per_request`` replicates a request,
the common step of the rounds (:class:`~biasaudit.kinds.ruted.spec.RutedSpec`), so
that a round repeats the requests of the rounds before (from the cache) and adds new
ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from biasaudit.errors import UsageError
from biasaudit.kinds._planning import (
    Planned,
    like_metrics,
    model_of,
    power_lines,
    scaled_cost as _scaled,
    stated,
)
from biasaudit.kinds._rounds import Figure, Growth
from biasaudit.kinds.ruted.metrics_file import RutedMetrics

__all__ = ["GROWTH", "plan_power"]


def plan_power(spec: Any, cost_at: Callable[[Any], tuple[int, float | None]]) -> list[str]:
    """The power lines of a RUTEd spec's ``detect`` (none where it is unset), from
    ``like``, or from stated defaults without it.

    Raises
    ------
    UsageError
        ``like`` not a RUTEd run with skew intervals, or the occupations unreadable.
    """
    if spec.detect is None:
        return []
    if spec.pilot is not None:
        raise UsageError(
            "--pilot: a RUTEd pilot would ask fewer replicates, and with few replicates an "
            "occupation whose texts agree counts as certain, so its variance is understated; "
            "give --like RUN, a run at this audit's replicates"
        )
    planned, occupations = _from_like(spec) if spec.like is not None else _stated(spec)
    lines = power_lines(planned, spec.detect, occupations, _scaled(spec, cost_at, occupations))
    return [*lines, "  occupations come from --occupations FILE: add rows there to reach a size"]


def _stated(spec: Any) -> tuple[Planned, int]:
    """Without a previous run: an occupation's skew anywhere in [-1, 1], variance 1."""
    from biasaudit.kinds.ruted.task import build_ruted_task

    task = build_ruted_task(spec)
    occupations = len(task.occupations)
    why = "an occupation's skew anywhere in [-1, 1]: SE² = 1/occupations"
    planned = stated("a skew", "occupations", list(task.contexts), 1.0, occupations, why,
                     confidence=spec.confidence, pilot=False)  # fmt: skip
    return planned, occupations


def _from_like(spec: Any) -> tuple[Planned, int]:
    like, metrics = like_metrics(spec, "ruted", RutedMetrics, "a RUTEd run")
    models = {}
    for context, found in metrics.contexts.items():
        # The skew's variance is each occupation's binomial one, 4p(1-p)/n, not an
        # estimate from the occupations' spread: taken as known.
        fixed = found.skew_ci_fixed if found.skew_ci_fixed is not None else found.skew_ci
        model = model_of(fixed, found.occupations, metrics.confidence, estimated=False)
        if model is not None:
            models[context] = model
    if not models:
        raise UsageError(f"--like {like}: no context has a skew interval")
    return Planned("a skew", "occupations", models, metrics.confidence, like.name), (
        metrics.occupations
    )


def _skews(metrics: RutedMetrics, spec: Any) -> dict[str, Figure]:
    """Each context's skew with its interval over the round's replicates, the
    occupations held fixed (what more replicates narrow: ``skew_ci_fixed``)."""
    return {
        context: Figure(
            found.skew,
            found.skew_ci_fixed if found.skew_ci_fixed is not None else found.skew_ci,
            spec.replicates,
        )
        for context, found in metrics.contexts.items()
        if found.skew is not None
    }


GROWTH = Growth(
    unit="replicates",
    size="replicates",
    step="round_replicates",
    most=lambda spec: spec.max_replicates,
    ceiling="--max-replicates",
    figure=lambda spec: "each context's skew",
    read=_skews,
)
