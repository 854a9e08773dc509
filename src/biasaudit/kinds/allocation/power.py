"""``--dry-run --detect D --like RUN``: before spending, the chance this allocation audit
detects a ΔDP of size D at the headline k, and the names per group that reach 80% and
95% power, each with its requests and cost.

The variance comes from a previous run of the task (``--like``: a small pilot run of a
few names per group will do). Two things decide whether a gap of size D is detected:
how wide the interval will be, and how far the estimate strays from the true gap.

- The interval resamples the names and the resumes (the units that vary), so its SE
  has a part that more names shrink and a part from the resumes that they do not:
  ``SE(n)² = A/n + B``.
- A repeated audit shows new names on the same resumes, so the estimate strays by the
  names alone: ``spread(n)² = S/n + M``, measured by a bootstrap of the names with the
  resumes held fixed (M: the noise of a fixed number of simulated pools).

A pointwise run's ``scores.csv`` gives both: its ΔDP is recomputed on the whole run and
on eight random halves of each group's names, with both bootstraps
(:data:`REPLICATES` replicates each), and :func:`biasaudit.metrics.fit_components`
solves each pair of sizes (:class:`biasaudit.metrics.VarianceModel`). A run that cannot
be halved (fewer than 4 names per group, no names in its scores) is scaled by
1/sqrt(names) alone, and the line says so. A pairwise audit plans in pools per subtask
(:func:`pairwise_planned`), the units its intervals resample. Power is the chance that the interval
excludes 0, the event the report calls "beyond noise" (:func:`biasaudit.metrics.
detection_power`). A group is planned for by its own figures; the sizes printed are
those at which every group's gap of size D is detected with the target chance.

``--until`` grows a pointwise resume-screening audit by names per group
(:data:`GROWTH`, see :mod:`biasaudit.kinds._rounds`) and a pairwise audit by pools per
subtask (:data:`PAIRWISE_GROWTH`; :func:`growth` picks); with ``decided`` and a power
plan (``--like``) its rounds follow a group-sequential design sized by that plan
(:func:`design`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from biasaudit.errors import UsageError
from biasaudit.kinds._planning import (
    Planned,
    like_metrics,
    like_pools,
    model_of,
    plan_in_pools,
    power_lines,
    run_pilot,
    stated,
)
from biasaudit.kinds._rounds import Design, Figure, Growth, planned_design, pools_growth
from biasaudit.kinds.allocation.metrics_file import AllocationMetrics
from biasaudit.metrics import VarianceModel
from biasaudit.store.tables import read_csv

__all__ = [
    "CANDIDATES_GROWTH",
    "GROWTH",
    "PAIRWISE_GROWTH",
    "design",
    "growth",
    "pairwise_planned",
    "plan_power",
    "planned",
]


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
        behind = gap_units(found)
        model = model_of(found.dp_gap_ci.get(str(k)), behind, metrics.confidence,
                         interval_units=behind)  # fmt: skip
        if model is not None:
            models[group] = model
    if not models:
        raise UsageError(
            f"--like {like}: no group has a ΔDP interval at k={k} (too few names); run a pilot "
            "with at least 3 names per group"
        )
    halves = _halves(like, metrics, k, models)
    how = (
        "SE² = A/names + B and the estimate's spread, fitted on halves of its names"
        if halves
        else "SE scaled by 1/sqrt(names per group)"
    )
    where = f" at k={k} against {metrics.reference_group}"
    return Planned("|ΔDP|", "names per group", halves or models, metrics.confidence, like.name,
                   where, how)  # fmt: skip


def stated_plan(spec: Any) -> Planned:
    """The plan without a previous run: each name's selection rate at the headline k
    varies as much as a rate can (the name selected always or never), so a group's ΔDP
    has variance ``2 p (1 - p) / names``, p = k over the pool's size."""
    from biasaudit.kinds.candidates.tasks import build_task

    task = build_task(spec)
    size = len(task.groups) if task.pool.kind == "one_per_group" else task.pool.size or 2
    k = min(spec.headline_k, size)
    p = k / size
    groups = [g for g in task.groups if g != task.reference_group]
    why = f"a name selected always or never: SE² = 2p(1-p)/names, p = {k}/{size}"
    where = f" at k={k} against {task.reference_group}"
    return stated("|ΔDP|", "names per group", groups, 2 * p * (1 - p), spec.names_per_group, why,
                  confidence=spec.confidence, where=where)  # fmt: skip


HALVES = 8
"""Random halves of each group's names the two parts are fitted on."""
REPLICATES = 800
"""Bootstrap replicates of each refit: the fixed part is a difference of two variances,
and 200 replicates leave it too noisy to plan with."""


def _halves(
    like: Path, metrics: AllocationMetrics, k: int, models: dict[str, VarianceModel]
) -> dict[str, VarianceModel] | None:
    """Each group's model with both parts (module docstring), or None where the run
    cannot be halved. Refitted once per run file and k in a process (a run's scores do
    not change; the refit takes seconds)."""
    path = like / "scores.csv"
    try:
        stamp = path.stat()
    except OSError:
        return None
    key = (str(path.resolve()), k, stamp.st_mtime_ns, stamp.st_size)
    if key not in _REFITS:
        from biasaudit.engine.progress import phase

        with phase(f"refitting {like.name}'s figures on halves of its names"):
            _REFITS[key] = _refit(like, metrics, k, models)
    return _REFITS[key]


_REFITS: dict[tuple[str, int, int, int], dict[str, VarianceModel] | None] = {}


def _refit(
    like: Path, metrics: AllocationMetrics, k: int, models: dict[str, VarianceModel]
) -> dict[str, VarianceModel] | None:
    import numpy as np
    import pandas as pd

    from biasaudit.metrics import allocation_figures, fit_components

    selection = metrics.selection
    path = like / "scores.csv"
    if (metrics.method != "pointwise" or selection is None
            or selection.pool not in ("one_per_group", "random")):  # fmt: skip
        return None
    try:
        scores = read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError):
        return None
    scores = scores[scores["score"].notna()] if "score" in scores.columns else scores.iloc[:0]
    item = next((c for c in scores.columns if c.endswith("_id") and c != "candidate_id"), None)
    wanted = {"group", "subtask", "name", "qualified"}
    if scores.empty or not wanted <= set(scores.columns) or scores["name"].isna().any():
        return None
    names = scores.groupby("group")["name"].unique()
    if names.map(len).min() < 4:
        return None
    rng = np.random.default_rng(0)
    z = _z(metrics.confidence)

    def gaps(rows: pd.DataFrame, seed: int, *, resumes: bool) -> dict[str, float]:
        """Each group's ΔDP SE at k on ``rows`` (pools drawn with ``seed``): its
        interval's, or (``resumes`` False) the names' alone, the resumes held fixed."""
        try:
            figures = allocation_figures(
                rows["score"], rows["group"], reference=metrics.reference_group,
                subtasks=rows["subtask"], qualified=rows["qualified"], names=rows["name"],
                items=rows[item] if item and resumes else None, k_max=k, pool=selection.pool,
                pool_size=selection.pool_size, n_rounds=selection.rounds,
                n_gap_bootstrap=REPLICATES, n_bootstrap=20, n_permutations=20,
                n_omnibus=19, confidence=metrics.confidence, seed=seed,
            )  # fmt: skip
        except ValueError:  # a half without the reference in some subtask: no SE there
            return {}
        table = figures.table
        at_k = table[(table["figure"] == "dp_gap") & table["subtask"].isna() & (table["k"] == k)]
        return {
            str(row.group): (row.high - row.low) / (2 * z)
            for row in at_k.itertuples()
            if np.isfinite(row.low) and np.isfinite(row.high)
        }

    width_now, spread_now = gaps(scores, 0, resumes=True), gaps(scores, 0, resumes=False)
    halves: dict[str, list[float]] = {group: [] for group in models}
    spreads: dict[str, list[float]] = {group: [] for group in models}
    for split in range(HALVES):
        kept: set[str] = set()
        for group_names in names:
            kept.update(rng.choice(group_names, size=len(group_names) // 2, replace=False))
        half = scores[scores["name"].isin(kept)]
        for found, into in ((gaps(half, split, resumes=True), halves),
                            (gaps(half, split, resumes=False), spreads)):  # fmt: skip
            for group in models:
                if group in found:
                    into[group].append(found[group])

    def fit(now: float | None, at_half: list[float], n: int) -> VarianceModel | None:
        if now is None:
            return None
        try:
            return fit_components(now, n, at_half, n // 2)
        except ValueError:  # no usable SE at one of the sizes
            return None

    fitted = {}
    for group, model in models.items():
        width = fit(width_now.get(group), halves[group], model.n_now)
        spread = fit(spread_now.get(group), spreads[group], model.n_now)
        if width is None or spread is None:
            fitted[group] = width or model
            continue
        fitted[group] = VarianceModel(width.names, width.fixed, model.n_now, spread.names,
                                      spread.fixed)  # fmt: skip
    return fitted


def _z(confidence: float) -> float:
    from biasaudit.metrics import critical_value

    return critical_value(confidence)


def plan_power(spec: Any, cost_at: Callable[[Any], tuple[int, float | None]]) -> list[str]:
    """The dry run's power lines for ``spec``'s ``detect`` (``like``, ``headline_k``);
    ``cost_at(spec)`` gives the requests to send and the cost of a spec. None where
    ``detect`` is unset.

    Raises
    ------
    UsageError
        ``detect`` without ``like`` for a task whose candidates come from its file, or
        ``like`` unusable (:func:`planned`). Without ``like`` (and no ``pilot``) the plan
        rests on stated defaults (:func:`stated_plan`).
    """
    lines: list[str] = []
    names_now = getattr(spec, "names_per_group", None)
    if spec.detect is None:
        return lines
    if spec.method == "pairwise":  # in pools per subtask, the units its intervals resample
        from biasaudit.kinds.allocation.run import run

        return plan_in_pools(spec, cost_at, PAIRWISE_GROWTH, run, pairwise_planned)
    if spec.pilot is not None:
        from biasaudit.kinds.allocation.run import run

        like, line = run_pilot(spec, GROWTH, run, cost_at)
        spec = spec.model_copy(update={"like": like})
        lines.append(line)
    if spec.like is None and names_now is None:
        raise UsageError(
            "--detect needs --like RUN: a previous run of this task (a pilot will do) whose "
            "intervals give the variance to plan with; its candidates come from its file"
        )
    sized = None
    beyond: list[str] = []
    if names_now is not None:

        def sized(n: int) -> tuple[int, float | None]:
            try:
                return cost_at(spec.model_copy(update={"names_per_group": n, "detect": None}))
            except UsageError as error:  # more names than the names file holds
                beyond.append(str(error))
                requests, cost = cost_at(spec.model_copy(update={"detect": None}))
                scale = n / max(names_now, 1)
                return math.ceil(requests * scale), None if cost is None else cost * scale

    plan = planned(spec, spec.headline_k) if spec.like is not None else stated_plan(spec)
    lines += power_lines(plan, spec.detect, names_now, sized)
    if beyond:
        lines.append(f"  requests and cost scaled from this audit's: {beyond[0]}")
    if names_now is None:
        lines.append(
            "  this task's candidates are given in its file: more names per group means more "
            "rows there"
        )
    return lines


def design(spec: Any, confidence: float) -> Design | None:
    """A group-sequential design for ``decided`` where the power analysis can size one
    (``--like``): :func:`biasaudit.kinds._rounds.planned_design` over names per group, or
    pools per subtask (pairwise); None otherwise (the confidence sequence is used)."""
    if spec.until != "decided" or spec.like is None:
        return None
    if spec.method == "pairwise":
        plan = pairwise_planned(spec, spec.headline_k)
        return planned_design(spec, plan.models, spec.pools, spec.max_pools, confidence)
    plan = planned(spec, spec.headline_k)
    return planned_design(spec, plan.models, spec.names_per_group, spec.max_names, confidence)


def pairwise_planned(spec: Any, k: int) -> Planned:
    """Each group's ΔDP at ``k`` in a pairwise ``--like`` run, over its pools per subtask
    (the units its intervals resample: more names alone do not narrow them).

    Raises
    ------
    UsageError
        No ``--like``, not a pairwise allocation run, or no group with an interval at
        ``k``.
    """
    like, metrics = like_metrics(spec, "allocation", AllocationMetrics, "an allocation run")
    pools = like_pools(like)
    if metrics.method != "pairwise" or not pools:
        raise UsageError(f"--like {like}: a pairwise plan reads a pairwise run of this task")
    models = {}
    for group, found in metrics.groups.items():
        model = model_of(found.dp_gap_ci.get(str(k)), pools, metrics.confidence)
        if model is not None:
            models[group] = model
    if not models:
        raise UsageError(f"--like {like}: no group has a ΔDP interval at k={k}")
    where = f" at k={k} against {metrics.reference_group}"
    return Planned("|ΔDP|", "pools per subtask", models, metrics.confidence, like.name, where)


def _gaps(metrics: AllocationMetrics, spec: Any) -> dict[str, Figure]:
    """Each group's ΔDP at the headline k, over its names (pointwise) or the round's
    pools per subtask (pairwise)."""
    k = str(spec.headline_k)
    found = {}
    for group, figures in metrics.groups.items():
        bounds, estimate = figures.dp_gap_ci.get(k), figures.dp_gap.get(k)
        if estimate is None:
            continue
        if spec.method == "pairwise":
            found[group] = Figure(estimate, bounds, spec.pools)
        else:
            behind = gap_units(figures)
            found[group] = Figure(estimate, bounds, behind, interval_units=behind)
    return found


def gap_units(figures: Any) -> int:
    """The units behind a group's gap: the fewer of its names and its reference's (the
    Student t of its interval counts them)."""
    own, reference = figures.units or 0, figures.units_reference
    return own if reference is None else min(own, reference)


def growth(spec: Any) -> Growth:
    """How ``spec`` grows in rounds: by names per group (:data:`GROWTH`), by candidates
    per group of a file (:data:`CANDIDATES_GROWTH`: essays, a task of your own), or
    pairwise by pools per subtask (:data:`PAIRWISE_GROWTH`: its pools are drawn from the
    candidates, so more candidates would redraw every pool, and no round could reuse
    the one before)."""
    if spec.method == "pairwise":
        return PAIRWISE_GROWTH
    return GROWTH if "names_per_group" in type(spec).model_fields else CANDIDATES_GROWTH


def _in_file(spec: Any) -> int:
    """The ceiling of a growth by candidates: ``max_candidates``, at most the most any
    group has in the file."""
    from biasaudit.kinds.candidates.tasks import build_task, most_per_group

    whole = most_per_group(build_task(spec.model_copy(update={"candidates_per_group": None})))
    return whole if spec.max_candidates is None else min(spec.max_candidates, whole)


GROWTH = Growth(
    unit="names per group",
    size="names_per_group",
    step="round_names",
    most=lambda spec: spec.max_names,
    ceiling="--max-names",
    figure=lambda spec: f"ΔDP at k={spec.headline_k}",
    read=_gaps,
    nested={"names_drawn": "nested"},
    design=design,
    tasks="resume screening",
)

PAIRWISE_GROWTH = pools_growth(_gaps, design)

CANDIDATES_GROWTH = Growth(
    unit="candidates per group",
    size="candidates_per_group",
    step="round_candidates",
    most=_in_file,
    ceiling="--max-candidates, at most the file's",
    figure=lambda spec: f"ΔDP at k={spec.headline_k}",
    read=_gaps,
)
