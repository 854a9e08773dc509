"""``--dry-run --detect D --like RUN``: before spending, the chance this allocation audit
detects a ΔDP of size D at the headline k, and the names per group that reach 80% and
95% power, each with its requests and cost.

The variance comes from a previous run of the task (``--like``: a small pilot run of a
few names per group will do): each group's ΔDP interval there gives its SE, and the SE
shrinks with the square root of the names per group (:class:`biasaudit.metrics.
VarianceModel` with no fixed part: every name is shown on the same resumes, so the
resumes' own effects fall on every group alike). Power is that of the event the report
calls "beyond noise", the interval excluding 0 (:func:`biasaudit.metrics.
detection_power`). A group is planned for by its own SE; the sizes printed are those
at which every group's gap of size D is detected with the target chance.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from biasaudit.errors import UsageError
from biasaudit.kinds._planning import Planned, like_metrics, model_of, power_lines
from biasaudit.kinds.allocation.metrics import AllocationMetrics

__all__ = ["plan_power", "planned"]


def planned(spec: Any, k: int) -> Planned:
    """Each group's ΔDP at ``k`` in the spec's ``--like`` run as a plan's figures.

    Raises
    ------
    UsageError
        No ``--like``, not an allocation run, or no group with an interval at ``k``.
    """
    like, metrics = like_metrics(spec, "allocation", AllocationMetrics, "an allocation run")
    models = {}
    for group, found in metrics.groups.items():
        model = model_of(found.dp_gap_ci.get(str(k)), found.units or 0, metrics.confidence)
        if model is not None:
            models[group] = model
    if not models:
        raise UsageError(
            f"--like {like}: no group has a ΔDP interval at k={k} (too few names); run a pilot "
            "with at least 3 names per group"
        )
    where = f" at k={k} against {metrics.reference_group}"
    return Planned("|ΔDP|", "names per group", models, metrics.confidence, like.name, where)


def plan_power(spec: Any, cost_at: Callable[[Any], tuple[int, float | None]]) -> list[str]:
    """The dry run's planning lines of ``spec``: the ceiling of ``until``'s rounds, and the
    power for ``detect`` (``like``, ``headline_k``); ``cost_at(spec)`` gives the requests to
    send and the cost of a spec. None where neither is set.

    Raises
    ------
    UsageError
        ``detect`` without ``like``, or ``like`` unusable (:func:`group_models`).
    """
    lines: list[str] = []
    names_now = getattr(spec, "names_per_group", None)
    if getattr(spec, "until", None) is not None and names_now is not None:
        most = spec.model_copy(update={"names_per_group": spec.max_names, "until": None,
                                       "detect": None, "names_drawn": "nested"})  # fmt: skip
        requests, cost = cost_at(most)
        price = "cost unknown" if cost is None else f"${cost:.2f}"
        lines.append(
            f"--until {spec.until}: the estimate above is the first round; rounds of "
            f"{spec.round_names or names_now} more names per group run until the rule holds, "
            f"at most {spec.max_names} names per group: {requests} requests, {price}"
        )
    if spec.detect is None:
        return lines
    if spec.pilot is not None:
        like, line = _run_pilot(spec, cost_at)
        spec = spec.model_copy(update={"like": like})
        lines.append(line)
    if spec.like is None and spec.until is not None:  # --detect is --until's threshold here
        return [*lines, "power: give --like RUN (a pilot) to plan the names for --detect too"]
    if spec.like is None:
        raise UsageError(
            "--detect needs --like RUN: a previous run of this task (a pilot of a few names "
            "per group will do) whose intervals give the variance to plan with"
        )
    sized = None
    if names_now is not None:

        def sized(n: int) -> tuple[int, float | None]:
            return cost_at(spec.model_copy(update={"names_per_group": n, "detect": None}))

    lines += power_lines(planned(spec, spec.headline_k), spec.detect, names_now, sized)
    if names_now is None:
        lines.append(
            "  this task's candidates are given in its file: more names per group means more "
            "rows there"
        )
    return lines


def _run_pilot(spec: Any, cost_at: Callable[[Any], tuple[int, float | None]]) -> tuple[Path, str]:
    """Run a pilot of about ``spec.pilot`` requests (at least 3 names per group, drawn
    nested, so the audit drawn the same way reuses its answers); its run and a line
    saying what it sent.

    Raises
    ------
    UsageError
        The task does not grow by names (a pilot needs a size to choose).
    """
    from biasaudit.kinds.allocation.run import audit

    if "names_per_group" not in type(spec).model_fields:
        raise UsageError("--pilot chooses names per group: resume screening only; give --like")
    per_name, _ = cost_at(spec.model_copy(update={"names_per_group": 1, "fresh": True,
                                                  "detect": None, "pilot": None}))  # fmt: skip
    names = min(max(3, round(spec.pilot / max(per_name, 1))), spec.names_per_group)
    pilot = spec.model_copy(update={"names_per_group": names, "names_drawn": "nested",
                                    "detect": None, "pilot": None, "until": None,
                                    "like": None})  # fmt: skip
    result = audit(pilot)
    sent = result.manifest.counts.sent
    line = (
        f"pilot: {names} names per group, {sent} requests sent (cached: the audit reuses them "
        f"when its names are drawn the same way, --names-drawn nested): {result.run_dir}"
    )
    return result.run_dir, line
