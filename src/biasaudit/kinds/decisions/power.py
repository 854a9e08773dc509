"""``--dry-run --detect D`` for decisions audits: the chance that a discrimination score of
D (on the logit scale) has an interval excluding 0, and the scenarios that reach 80% and
95% power. Each score's interval in a previous run (``--like RUN``) gives its SE over
scenarios, which shrinks with the square root of the scenarios; without one, a stated
default does. Scenarios come from a file, so the sizes say how many it needs; see
:mod:`biasaudit.kinds._planning`.

``--until`` grows a decisions audit by scenarios drawn from the file (nested:
``scenario_limit``; :data:`GROWTH`, :mod:`biasaudit.kinds._rounds`) until every score's
interval is within ±H (``precise:H``) or every score is settled (``decided``: beyond
noise, or within ±D).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from biasaudit.errors import UsageError
from biasaudit.kinds._planning import Planned, like_metrics, model_of, plan_in_file_units, stated
from biasaudit.kinds._rounds import Figure, FileUnits
from biasaudit.kinds.decisions.metrics_file import DecisionsMetrics

__all__ = ["GROWTH", "plan_power"]

# A scenario's own coefficient of one term, spread over scenarios (logit scale): a stated
# default, not measured on any real model (the sim's spread is about 0.1); a pilot or a
# previous run (--pilot, --like) plans from the spread actually seen.
_STATED_SD = 0.5


def plan_power(spec: Any, cost_at: Callable[[Any], tuple[int, float | None]]) -> list[str]:
    """The power lines of a decisions spec's ``detect`` (none where it is unset)."""
    return plan_in_file_units(
        spec, cost_at, units=SCENARIOS, growth=GROWTH, audit=_run,
        planned=lambda spec: _from_like(spec) if spec.like is not None else _stated(spec),
    )  # fmt: skip


def _run() -> Callable[[Any], Any]:
    from biasaudit.kinds.decisions.run import run

    return run


def _scenarios(spec: Any) -> int:
    from biasaudit.kinds.decisions.task import build_decisions_task

    return len(build_decisions_task(spec).scenarios)


SCENARIOS = FileUnits("scenarios", "scenario_limit", "max_scenarios", _scenarios)


def _stated(spec: Any) -> Planned:
    why = f"a scenario's own score spread with SD {_STATED_SD}: SE² = {_STATED_SD**2}/scenarios"
    return stated("a discrimination score", "scenarios", ["each score"], _STATED_SD**2,
                  SCENARIOS.count(spec), why, confidence=spec.confidence)  # fmt: skip


def _from_like(spec: Any) -> Planned:
    from biasaudit.kinds.decisions.table import score_label

    like, metrics = like_metrics(spec, "decisions", DecisionsMetrics, "a decisions run")
    models = {}
    for fill, figures in metrics.fills.items():
        for score in figures.scores:
            model = model_of(score.ci, score.scenarios, metrics.confidence,
                             interval_units=score.scenarios)  # fmt: skip
            if model is not None:
                models[f"{fill} {score_label(score)}"] = model
    if not models:
        raise UsageError(f"--like {like}: no score has an interval (too few scenarios)")
    return Planned("a discrimination score", "scenarios", models, metrics.confidence, like.name)


def _scores(metrics: DecisionsMetrics, spec: Any) -> dict[str, Figure]:
    from biasaudit.kinds.decisions.table import score_label

    found = {}
    for fill, figures in metrics.fills.items():
        for score in figures.scores:
            if score.estimate is not None:
                found[f"{fill} {score_label(score)}"] = Figure(
                    score.estimate, score.ci, score.scenarios, (-20.0, 20.0),
                    interval_units=score.scenarios,
                )  # fmt: skip
    return found


GROWTH = SCENARIOS.growth("every discrimination score", _scores)
