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
from biasaudit.kinds.allocation.metrics import AllocationMetrics
from biasaudit.kinds.common import read_run_metrics
from biasaudit.metrics import VarianceModel
from biasaudit.store.runs import read_manifest

__all__ = ["TARGETS", "group_models", "names_needed", "plan_power", "power_lines"]

TARGETS = (0.8, 0.95)


def group_models(like: Path, k: int) -> tuple[dict[str, VarianceModel], float, str]:
    """Each group's variance model from the run ``like`` (its ΔDP interval at ``k``, its
    names), the run's confidence, and its reference group.

    Raises
    ------
    UsageError
        ``like`` is not an allocation run, or none of its groups has an interval at ``k``.
    """
    from scipy import stats

    manifest = read_manifest(like)
    if manifest.kind != "allocation":
        raise UsageError(f"--like {like}: a {manifest.kind} run, not an allocation run")
    metrics = read_run_metrics(like, AllocationMetrics)
    z = float(stats.norm.ppf(0.5 + metrics.confidence / 2))
    models = {}
    for group, found in metrics.groups.items():
        bounds = found.dp_gap_ci.get(str(k))
        units = found.units or 0
        if bounds is None or units < 2:
            continue
        se = (bounds[1] - bounds[0]) / (2 * z)
        if se > 0:
            models[group] = VarianceModel(se * se * units, 0.0, units)
    if not models:
        raise UsageError(
            f"--like {like}: no group has a ΔDP interval at k={k} (too few names); run a pilot "
            "with at least 3 names per group"
        )
    return models, metrics.confidence, metrics.reference_group


def power_lines(
    like: Path,
    detect: float,
    k: int,
    names_now: int | None,
    cost_at: Callable[[int], tuple[int, float | None]] | None,
) -> list[str]:
    """The dry run's power lines: the chance of detecting |ΔDP| >= ``detect`` at ``k``
    with ``names_now`` names per group (the audit as configured), per group, and the
    names per group for each of :data:`TARGETS`, with ``cost_at(n)`` (requests, cost)."""
    models, confidence, reference = group_models(like, k)
    level = f"{100 * (1 - confidence):g}%"
    lines = [
        f"power to detect |ΔDP| >= {detect:g} at k={k} against {reference} (its interval "
        f"excluding 0; two-sided, {level} level), from {like.name}: SE scaled by "
        "1/sqrt(names per group)"
    ]
    if names_now is not None:
        shown = ", ".join(
            f"{group} {model.power(detect, names_now, confidence=confidence):.0%}"
            for group, model in models.items()
        )
        weakest = min(m.power(detect, names_now, confidence=confidence) for m in models.values())
        lines.append(
            f"  as configured ({names_now} names per group): {weakest:.0%} for the weakest "
            f"group ({shown})"
        )
    for target in TARGETS:
        needed = [m.names_for(detect, target, confidence=confidence) for m in models.values()]
        if any(n is None for n in needed):
            lines.append(f"  {target:.0%} power: no number of names reaches it")
            continue
        names = max(n for n in needed if n is not None)
        text = f"  {target:.0%} power: {names} names per group"
        if cost_at is not None:
            requests, cost = cost_at(names)
            price = "cost unknown" if cost is None else f"${cost:.2f}"
            text += f", {requests} requests to send, {price}"
        lines.append(text)
    return lines


def names_needed(like: Path, detect: float, k: int, target: float) -> int | None:
    """The names per group at which every group reaches ``target`` power (None: none)."""
    models, confidence, _ = group_models(like, k)
    needed = [m.names_for(detect, target, confidence=confidence) for m in models.values()]
    return None if any(n is None for n in needed) else max(n for n in needed if n is not None)


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

    lines += power_lines(Path(spec.like), spec.detect, spec.headline_k, names_now, sized)
    if names_now is None:
        lines.append(
            "  this task's candidates are given in its file: more names per group means more "
            "rows there"
        )
    return lines
