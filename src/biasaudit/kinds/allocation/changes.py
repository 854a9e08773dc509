"""Did an allocation audit's figures change between two runs? RABBI and δ per group by a
bootstrap of the units that vary (paired when both runs scored the same candidates);
ΔDP and ΔEO at each k paired the same way where both runs simulated the selection with
the same pools (:func:`biasaudit.metrics.paired_selection_gaps`; ΔEO's SE at least its
spread with each candidate's two scores swapped at random, as the runs' own ΔEO is
floored by the omnibus test's relabellings), else by the normal approximation from each
run's interval; see :mod:`biasaudit.reports.compare`."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from biasaudit.errors import UsageError
from biasaudit.kinds.allocation.metrics_file import SCORES_COLUMNS, fewest_units
from biasaudit.kinds.common import RunPair, smoke_test_notes
from biasaudit.metrics import (
    FEW_UNITS,
    P_FLOOR,
    ChangeTest,
    Resamples,
    critical_value,
    headline_replicates,
    normal_sf,
    normal_test,
    paired_selection_gaps,
    two_sided,
    two_sided_p,
    within_rounding,
)
from biasaudit.metrics._validate import FloatArray
from biasaudit.store.tables import read_run_table

__all__ = ["change_tests"]


def change_tests(pair: RunPair) -> list[ChangeTest]:
    """One test of "no change" per group and figure, B - A."""
    reference = pair.metrics_a.reference_group
    if pair.metrics_b.reference_group != reference:
        raise UsageError("compare: the runs have different reference groups")
    fewest = {"A": fewest_units(pair.metrics_a.groups), "B": fewest_units(pair.metrics_b.groups)}
    pair.notes.extend(smoke_test_notes(fewest, "units", FEW_UNITS))
    scores_a, scores_b = _scores(pair.path_a), _scores(pair.path_b)
    paired = _same_candidates(scores_a, scores_b)
    if not paired:
        pair.notes.append("the runs scored different candidates: bootstraps are independent")
    tests: list[ChangeTest] = _score_tests(
        scores_a,
        scores_b,
        reference,
        paired,
        int(pair.rng.integers(2**31)),
        pair.bootstrap,
        pair.notes,
    )
    paired_gaps = _paired_gaps(pair, scores_a, scores_b) if paired else {}
    for group in pair.metrics_a.groups:
        if group not in pair.metrics_b.groups:
            continue
        figures_a, figures_b = pair.metrics_a.groups[group], pair.metrics_b.groups[group]
        for gap in ("dp_gap", "eo_gap"):
            values_a, values_b = getattr(figures_a, gap), getattr(figures_b, gap)
            cis_a, cis_b = getattr(figures_a, f"{gap}_ci"), getattr(figures_b, f"{gap}_ci")
            for k in values_a:
                test = paired_gaps.get((gap, group, k))
                if test is None:
                    test = normal_test(f"{gap} k={k}", group, values_a.get(k), cis_a.get(k),
                                       values_b.get(k), cis_b.get(k),
                                       pair.metrics_a.confidence)  # fmt: skip
                if test is not None:
                    tests.append(test)
    return tests


def _selection_design(path: Path, metrics: Any) -> tuple[Any, ...] | None:
    """What fixes a run's simulated pools (None: no simulated selection, as pairwise)."""
    selection = metrics.selection
    if selection is None or selection.pool not in ("one_per_group", "random"):
        return None
    try:
        spec = json.loads((path / "spec.json").read_text(encoding="utf-8"))
        seed = int(spec["seed"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (selection.pool, selection.pool_size, selection.rounds, selection.bootstrap,
            metrics.k_max, seed)  # fmt: skip


def _paired_gaps(
    pair: RunPair, scores_a: pd.DataFrame, scores_b: pd.DataFrame
) -> dict[tuple[str, str, str], ChangeTest]:
    """ΔDP's and ΔEO's change at each k, paired (:func:`biasaudit.metrics.paired_selection_gaps`),
    where both runs drew the same pools from the same candidates; a group whose figures
    are not reproduced to the bit is tested from the intervals (a note says so)."""
    design = _selection_design(pair.path_a, pair.metrics_a)
    if design is None or design != _selection_design(pair.path_b, pair.metrics_b):
        return {}
    pool, pool_size, rounds, bootstrap, k_max, seed = design
    if bootstrap is None:
        return {}
    frame = scores_a
    if pool == "one_per_group":  # as the run: pools of the groups in every subtask
        present = frame.groupby("subtask")["group"].unique()
        kept = [g for g in frame["group"].unique() if all(g in p for p in present)]
        frame = frame[frame["group"].isin(kept)]
    order = frame["candidate_id"].astype(str)
    after = scores_b.set_index(scores_b["candidate_id"].astype(str)).loc[order, "score"]
    names = frame["name"] if "name" in frame.columns and frame["name"].notna().all() else None
    items = next((frame[c] for c in ("resume_id", "essay_id", "item") if c in frame.columns),
                 None)  # fmt: skip
    qualified = frame["qualified"] if "qualified" in frame.columns else None
    try:
        found = paired_selection_gaps(
            frame["score"], after.to_numpy(), frame["group"],
            reference=pair.metrics_a.reference_group, subtasks=frame["subtask"],
            qualified=qualified, names=names, items=items, k_max=k_max, pool=pool,
            pool_size=pool_size, n_rounds=rounds, n_gap_bootstrap=bootstrap, seed=seed,
        )  # fmt: skip
    except ValueError as error:
        pair.notes.append(f"ΔDP not paired ({error}): tested from each run's interval")
        return {}
    confidence = pair.metrics_a.confidence
    method = f"paired bootstrap over units ({bootstrap}), same pools, names x items two-way: t"
    tests: dict[tuple[str, str, str], ChangeTest] = {}
    unmatched = set()
    for (figure, group, k), gap in found.items():
        figures_a, figures_b = pair.metrics_a.groups.get(group), pair.metrics_b.groups.get(group)
        if figures_a is None or figures_b is None:
            continue
        recorded = (getattr(figures_a, figure).get(str(k)), getattr(figures_b, figure).get(str(k)))
        if recorded[0] is None:
            continue
        if recorded[1] is None or not all(
            within_rounding(mine - theirs, theirs)
            for mine, theirs in zip((gap.before, gap.after), recorded, strict=True)
        ):
            unmatched.add(str(group))
            continue
        diff, se = gap.after - gap.before, gap.se
        if math.isnan(se):
            continue
        half = critical_value(confidence, gap.units) * se
        p = 1.0 if se == 0 and diff == 0 else (P_FLOOR if se == 0 else
                                               two_sided_p(diff / se, gap.units))  # fmt: skip
        tests[(figure, str(group), str(k))] = ChangeTest(
            f"{figure} k={k}", str(group), gap.before, gap.after, diff,
            (diff - half, diff + half), p, method + (_FLOORED if figure == "eo_gap" else ""),
        )  # fmt: skip
    if unmatched:
        pair.notes.append(
            f"ΔDP and ΔEO of {', '.join(sorted(unmatched))} not reproduced from scores.csv: "
            "tested from each run's interval"
        )
    return tests


_FLOORED = "; SE floored by swapped scores"


def _scores(path: Path) -> pd.DataFrame:
    frame = read_run_table(path / "scores.csv", SCORES_COLUMNS)
    return frame[frame["score"].notna()]


def _same_candidates(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    ids_a, ids_b = a["candidate_id"].astype(str), b["candidate_id"].astype(str)
    return ids_a.is_unique and ids_b.is_unique and set(ids_a) == set(ids_b)


def _score_tests(
    scores_a: pd.DataFrame,
    scores_b: pd.DataFrame,
    reference: str,
    paired: bool,
    seed: int,
    bootstrap: int,
    notes: list[str],
) -> list[ChangeTest]:
    """RABBI and δ of every group, B - A, with intervals over the units that vary.

    Both runs are resampled as their own figures are (names within groups and
    items within subtasks, each headline the candidate-weighted mean of the
    subtasks); paired runs share one resample of their common candidates.
    """
    a_found, weights = _replicates(scores_a, reference, bootstrap, seed, None)
    if paired:
        order = scores_a["candidate_id"].astype(str)
        scores_b = scores_b.set_index(scores_b["candidate_id"].astype(str)).loc[order]
        b_found, _ = _replicates(
            scores_b.reset_index(drop=True), reference, bootstrap, seed, weights
        )
    else:
        b_found, _ = _replicates(scores_b, reference, bootstrap, seed + 1, None)
    method = (
        f"{'paired' if paired else 'independent'} bootstrap over units ({bootstrap}): "
        "normal interval on its standard error"
    )
    missing = sorted(set(scores_a["group"]) - set(a_found) - {reference})
    if missing:
        notes.append(
            f"too few names (or items) for a test of RABBI and δ: {', '.join(map(str, missing))}"
        )
    tests = []
    for group, figures in a_found.items():
        for name, (before, before_draws) in figures.items():
            if group not in b_found:
                continue
            after, after_draws = b_found[group][name]
            spread = after_draws - before_draws
            spread = spread[~np.isnan(spread)]
            if spread.size < 20:
                continue
            # The normal interval and a z-test on the bootstrap standard error, as the
            # figures' own intervals: replicates of RABBI sit off-centre when few units
            # are resampled, so their quantiles can miss the difference itself; and
            # counting replicates past 0 would floor p at 2 / (B + 1), which no
            # multiple-test adjustment could pass.
            diff, se = after - before, float(spread.std(ddof=1))
            half = critical_value(0.95) * se
            p = two_sided(diff, se, normal_sf)
            tests.append(
                ChangeTest(
                    name, str(group), before, after, diff, (diff - half, diff + half), p, method,
                )
            )  # fmt: skip
    return tests


def _replicates(
    scores: pd.DataFrame,
    reference: str,
    bootstrap: int,
    seed: int,
    resamples: Resamples | None,
) -> tuple[dict[Any, dict[str, tuple[float, FloatArray]]], Resamples]:
    names = scores["name"] if "name" in scores.columns and scores["name"].notna().all() else None
    items = next(
        (scores[c] for c in ("resume_id", "essay_id", "item") if c in scores.columns), None
    )
    return headline_replicates(
        scores["score"], scores["group"], reference=reference, subtasks=scores["subtask"],
        names=names, items=items, n_bootstrap=bootstrap, seed=seed, resamples=resamples,
    )  # fmt: skip
