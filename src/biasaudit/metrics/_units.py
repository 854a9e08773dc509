"""Allocation figures with intervals and tests over the units that vary.

A resume-screening candidate is a (name, resume) pair: the name is the
treatment, each name has its own effect, and every name is shown with every
resume. Candidates that share a name (or a resume) are not independent
draws, so an interval that resamples candidates treats three names as if
they were hundreds of independent people. Here the units are:

- **names**, resampled within their group (the factor a group effect is a
  claim about), and
- **items** (resumes, essays), resampled within their subtask and
  qualification level, and within their group where each item belongs to
  one group (essays): the second, crossed factor.

Without names the items are the only unit (an essay is a candidate).

**Intervals** take their standard error from the *pigeonhole bootstrap* for
crossed designs (Owen, "The pigeonhole bootstrap", Ann. Appl. Stat. 1(2),
2007): each replicate resamples the names and the items independently with
replacement, and a candidate counts as often as its name times its item was
drawn. Each stratum of n units is resampled n - 1 times (McCarthy & Snowden,
"The bootstrap and finite population sampling", 1985; Rao & Wu, JASA 83,
1988), which removes the bootstrap's (n - 1)/n shrinkage of the variance, a
large error when a group has few names. The interval is the estimate
± z·SE, clipped to the figure's range (see :func:`_interval`). Resampling
candidates instead understates the error badly once names differ.

**Tests** are permutation tests over the same units (Good, "Permutation,
Parametric and Bootstrap Tests of Hypotheses", 3rd ed., 2005, ch. 3): under
"group makes no difference", the names of the group and of the reference
are exchangeable, so the group labels of the names are shuffled (items,
which carry no group, stay as they are; without names, items are shuffled
within their subtask). Every enumeration is exact when the names allow
fewer arrangements than the permutations asked for.

**The headline is one aggregation of the subtasks.** Every figure (RABBI, δ,
JSD, EMD, ΔDP, ΔEO, selection rates) is computed within each subtask, as
the papers compute them (Chen, Ji & Evans, "The Mismeasure of Man and
Models", 2024, §4), and the headline is their mean weighted by the
subtask's candidates of the group and the reference (its qualified ones for
the ``qualified`` figures and ΔEO). Every replicate and permutation
aggregates the same way, so the headline's interval and p-value belong to it.

**Selection** (ΔDP, ΔEO) draws balanced pools, as the authors' code does: a
group's candidates are shuffled and taken in turn, reshuffled once all
appeared, so every candidate appears equally often (random pools: chunks of
shuffled candidates). That halves the selection noise of independent draws
at the same number of rounds.

**The qualified candidates' figures (their selection rates, ΔEO) have a standard
error no smaller than their spread over the omnibus test's relabellings** (the same
shuffles of the units' group labels, each selection run again): what the figure
varies by when the group's units are any of the audit's. Near a rate of 1 the
bootstrap alone fails as Wald's interval does at n/n: with a posting's two qualified
resumes nearly every qualified candidate is selected at k = 4 or 5 of a pool of 8, a
group whose names were all selected has replicates that are all 1, and ΔEO's
intervals excluded 0 in 9-22% of audits of a model with no bias at k = 3-5, its table
flagging 9-15% of them (bench/bench_verdicts.py); with the floor, 1-4% and none. The
floor is the figure's standard error under "the group makes no difference", so an
interval that excludes 0 is a test near its level by construction. Where a group does
differ, the relabellings mix its units into every group and the floor widens its
interval: ΔEO's power to find a shift of -1 logit with 20 names fell from 0.82 to
0.80. ΔDP's own intervals hold their level without it, and the same floor cut their
power there from 0.83 to 0.37, so they keep the bootstrap's alone, as do the score
figures (RABBI, δ, JSD, EMD).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from biasaudit.metrics._allocation import (
    _cumulative,
    _sorted_positions,
    _weighted_emd,
    _weighted_jsd,
    _weighted_sign_sums,
)
from biasaudit.metrics._gap_bootstrap import _PAIRWISE_MAX_POOL, _higher_and_tied_members
from biasaudit.metrics._resampling import (
    _BLOCK_CELLS,
    LITTLE_FROM,
    MIN_UNITS,
    Resamples,
    Units,
    _first_of,
)
from biasaudit.metrics._selection import _places_table, top_k_shares
from biasaudit.metrics._small_samples import P_FLOOR, RATIO_MIN_UNITS, critical_value, two_sided_p
from biasaudit.metrics._validate import (
    FloatArray,
    as_float_array,
    as_label_array,
    check_choice,
    check_confidence,
    check_int,
)

__all__ = [
    "FEW_UNITS",
    "AllocationFigures",
    "allocation_figures",
    "headline_replicates",
]

# Fewer than this: the interval is reported, with a warning that it rests on few units
# (Student t intervals from so few clusters are honest but wide: nothing is flagged).
FEW_UNITS = 8
_SCORE_FIGURES = ("rabbi", "avg_gap", "jsd", "emd")
_JSD_BINS = 10
# Relabellings of the omnibus test from which their spread floors the SEs of _FLOORED.
_NULL_FLOOR_FROM = 19
# The figures of the qualified candidates, whose rates sit near 1 (see the module's notes).
_FLOORED = ("true_positive_rate", "eo_gap")


@dataclass(frozen=True, eq=False)
class AllocationFigures:
    """Every allocation figure, per group, subtask and k, in long form.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per (figure, scope, group, subtask, k) with ``estimate``,
        ``low``, ``high`` (None where too few units), ``p`` (tests only) and
        ``n`` (candidates), ``units`` (names, or items). ``subtask`` is
        ``None`` for the headline; ``k`` is 0 for figures without one.
        Figures: ``rabbi``, ``avg_gap``, ``jsd``, ``emd`` (scope ``all`` or
        ``qualified``), ``selection_rate``, ``true_positive_rate`` (every
        group, the reference too), ``dp_gap``, ``eo_gap``.
    omnibus : pandas.DataFrame
        Per k: ``p`` of the permutation test that no group's selection rate
        differs (statistic: the candidate-weighted variance of the groups'
        headline selection rates), and ``statistic``.
    impact : pandas.DataFrame
        Impact ratios (the four-fifths rule) per (category, value, k): ``rate``
        (the value's groups' headline selection rates, weighted by their
        candidates), ``ratio`` (over the most selected value's), ``low``,
        ``high`` (none where a group has too few units), ``n`` (candidates),
        ``flagged`` (below 0.8) and ``beyond_noise`` (the interval below 0.8).
        ``category`` is each of ``categories`` and ``group`` (the groups
        themselves).
    units : dict
        Units (names, or items) per group.
    unit_kind : str
        ``'names x items'``, ``'names'``, ``'items'`` or ``'candidates'`` (:class:`Units`).
    pools : dict
        How the selection pools were drawn: ``draw``, ``rounds``, ``pool``,
        ``pool_size``, ``subtasks``.
    n_bootstrap, n_permutations : int
    confidence : float
    little_bootstrap : bool
        Whether the units were many enough (:data:`LITTLE_FROM`) for a bag of little
        bootstraps and the tests on the permutation law's moments.
    """

    table: pd.DataFrame
    omnibus: pd.DataFrame
    impact: pd.DataFrame
    units: dict[Hashable, int]
    unit_kind: str
    pools: dict[str, Any]
    n_bootstrap: int
    n_permutations: int
    confidence: float
    little_bootstrap: bool = False


@dataclass(frozen=True)
class _Data:
    values: FloatArray
    groups: NDArray[np.intp]
    group_ids: pd.Index
    subtasks: NDArray[np.intp]
    subtask_ids: pd.Index
    qualified: NDArray[np.intp]  # 1 qualified, 0 not, -1 not rated
    units: Units
    reference: int


def allocation_figures(
    scores: ArrayLike,
    groups: ArrayLike,
    *,
    reference: Hashable,
    subtasks: ArrayLike | None = None,
    qualified: ArrayLike | None = None,
    names: ArrayLike | None = None,
    items: ArrayLike | None = None,
    k_max: int = 5,
    pool: str = "one_per_group",
    pool_size: int | None = None,
    n_rounds: int = 1800,
    value_range: tuple[float, float] | None = None,
    n_bootstrap: int = 1000,
    n_gap_bootstrap: int = 200,
    n_permutations: int = 2000,
    n_omnibus: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
    selection: bool = True,
    categories: Mapping[str, Mapping[Any, str]] | None = None,
) -> AllocationFigures:
    r"""RABBI, δ, JSD, EMD, ΔDP and ΔEO of every group, with intervals and tests over units.

    See the module docstring for the units, the pigeonhole bootstrap, the
    permutation tests and the aggregation of subtasks. Per subtask s and
    group g against the reference r (Chen, Ji & Evans, 2024):

    - RABBI :math:`= P(x_g > x_r) - P(x_g < x_r)` over all pairs;
    - δ :math:`= \bar x_g - \bar x_r`; JSD (bits, ``value_range`` in 10 bins)
      and EMD of the score distributions;
    - ΔDP\ :sub:`k` :math:`= P(\text{selected} \mid g) - P(\text{selected} \mid r)`
      and ΔEO\ :sub:`k` the same among qualified candidates, from top-k
      selection in ``n_rounds`` balanced pools per subtask.

    Parameters
    ----------
    scores, groups :
        One score (finite) and group per candidate.
    reference :
        The reference group.
    subtasks :
        The subtask (job, essay prompt) of each candidate; one if omitted.
    qualified :
        Per candidate True, False or None (not rated): ΔEO and the
        ``qualified`` figures use the rated qualified ones.
    names, items :
        The name and the item (resume, essay) of each candidate; see the
        module docstring.
    k_max, pool, pool_size, n_rounds :
        Top-k selection: k = 1..k_max, ``one_per_group`` pools (one
        candidate of each group) or ``random`` pools of ``pool_size``.
    value_range :
        Range of the scores, for the JSD bins (default: the scores' own).
    n_bootstrap :
        Replicates behind the intervals of the score figures (at least 20).
    n_gap_bootstrap :
        Replicates behind the selection intervals (each redraws every pool).
    n_permutations :
        Random permutations of the tests of RABBI and δ (fewer, exactly, when
        all can be listed).
    n_omnibus :
        Permutations of the omnibus test of selection rates (each reruns the
        selection).
    confidence :
        Level of the intervals.
    seed :
        Seeds the pools, the resamples and the permutations.
    selection :
        False: the score figures only (pools given elsewhere, as pairwise).

    Returns
    -------
    AllocationFigures

    Raises
    ------
    ValueError
        On bad input: NaN scores, an unknown reference or pool, no candidate
        of the reference.
    """
    check_int(k_max, "k_max", minimum=1)
    check_int(n_rounds, "n_rounds", minimum=1)
    check_int(n_bootstrap, "n_bootstrap", minimum=20)
    check_int(n_gap_bootstrap, "n_gap_bootstrap", minimum=20)
    check_int(n_permutations, "n_permutations", minimum=20)
    check_int(n_omnibus, "n_omnibus", minimum=19)
    check_choice(pool, "pool", ("one_per_group", "random"))
    confidence = check_confidence(confidence)
    data = _data(scores, groups, reference, subtasks, qualified, names, items)
    if pool == "random":
        pool_size = check_int(pool_size, "pool_size", minimum=1)
    else:
        pool_size = len(data.group_ids)
    k_max = min(k_max, pool_size)
    low, high = value_range if value_range is not None else (data.values.min(), data.values.max())
    edges = np.linspace(low, high if high > low else low + 1.0, _JSD_BINS + 1)
    seeds = np.random.SeedSequence(seed).spawn(4)
    rows: list[dict[str, Any]] = []
    # Every group and scope sees the same resamples of the units.
    resamples = data.units.resample(np.random.default_rng(seeds[0]), n_bootstrap)
    for scope in ("all", "qualified"):
        rows += _score_rows(data, scope, edges, resamples, n_permutations, confidence, seeds)
    selector = _Selection(data, pool, pool_size, n_rounds, k_max)
    omnibus = pd.DataFrame(columns=["k", "statistic", "p", "permutations"])
    impact = pd.DataFrame(columns=IMPACT_COLUMNS)
    if selection:
        estimates, replicates = selector.rates(n_gap_bootstrap, seeds)
        # The omnibus's relabellings come first: their rates floor the intervals' SEs.
        omnibus = selector.omnibus(n_omnibus, np.random.default_rng(seeds[3]))
        rows += selector.rows(estimates, replicates, confidence)
        impact = selector.impact(estimates, replicates, categories or {}, confidence)
    table = pd.DataFrame(rows, columns=_COLUMNS)
    return AllocationFigures(
        table=table,
        omnibus=omnibus,
        impact=impact,
        units={
            data.group_ids[g]: int(np.unique(data.units.units[data.groups == g]).size)
            for g in range(len(data.group_ids))
        },
        unit_kind=data.units.kind,
        pools={
            "draw": "balanced",
            "rounds": n_rounds,
            "pool": pool,
            "pool_size": pool_size,
            "subtasks": len(data.subtask_ids),
        },
        n_bootstrap=n_bootstrap,
        n_permutations=n_permutations,
        confidence=confidence,
        little_bootstrap=bool(resamples.subsets),
    )


IMPACT_COLUMNS = ["category", "value", "k", "rate", "rate_low", "rate_high", "ratio", "low",
                  "high", "n", "flagged", "beyond_noise"]  # fmt: skip
_COLUMNS = [
    "figure",
    "scope",
    "group",
    "subtask",
    "k",
    "estimate",
    "low",
    "high",
    "p",
    "n",
    "units",
]


def _data(
    scores: ArrayLike,
    groups: ArrayLike,
    reference: Hashable,
    subtasks: ArrayLike | None,
    qualified: ArrayLike | None,
    names: ArrayLike | None,
    items: ArrayLike | None,
) -> _Data:
    values = as_float_array(scores, "scores", finite=True)
    group_codes, group_ids = pd.factorize(as_label_array(groups, "groups"))
    if values.size != group_codes.size:
        raise ValueError("scores and groups differ in length")
    if reference not in group_ids:
        listed = ", ".join(repr(g) for g in group_ids)
        raise ValueError(f"reference must be one of the groups {listed}; got {reference!r}")
    if subtasks is None:
        subtask_codes, subtask_ids = np.zeros(values.size, dtype=np.intp), pd.Index([None])
    else:
        subtask_codes, subtask_ids = pd.factorize(as_label_array(subtasks, "subtasks"))
    flags = np.full(values.size, -1, dtype=np.intp)
    if qualified is not None:
        given = pd.Series(np.asarray(qualified, dtype=object))
        rated = given.notna().to_numpy()
        flags[rated] = given[rated].astype(bool).to_numpy().astype(np.intp)
    for name, column in (("subtasks", subtasks), ("qualified", qualified)):
        if column is not None and len(np.asarray(column, dtype=object)) != values.size:
            raise ValueError(f"{name} and scores differ in length")
    group_codes = group_codes.astype(np.intp)
    subtask_codes = subtask_codes.astype(np.intp)
    return _Data(
        values=values,
        groups=group_codes,
        group_ids=pd.Index(group_ids),
        subtasks=subtask_codes,
        subtask_ids=pd.Index(subtask_ids),
        qualified=flags,
        units=Units.of(group_codes, subtask_codes, flags, names, items),
        reference=int(pd.Index(group_ids).get_loc(reference)),
    )


def headline_replicates(
    scores: ArrayLike,
    groups: ArrayLike,
    *,
    reference: Hashable,
    subtasks: ArrayLike | None = None,
    names: ArrayLike | None = None,
    items: ArrayLike | None = None,
    n_bootstrap: int = 1000,
    seed: int = 0,
    resamples: Resamples | None = None,
) -> tuple[dict[Hashable, dict[str, tuple[float, FloatArray]]], Resamples]:
    """The headline RABBI and δ of every group, and their bootstrap replicates over units.

    As :func:`allocation_figures` computes them (per subtask, then the
    candidate-weighted mean), for comparing two runs: ``resamples`` reuses
    another run's resamples of the same candidates, in the same order, which
    pairs the replicates; by default they are drawn here.

    Returns
    -------
    ({group: {"rabbi": (estimate, replicates), "avg_gap": ...}}, resamples)
        Groups with fewer than :data:`MIN_UNITS` units (or their reference)
        are left out.
    """
    data = _data(scores, groups, reference, subtasks, None, names, items)
    if resamples is None:
        check_int(n_bootstrap, "n_bootstrap", minimum=20)
        resamples = data.units.resample(np.random.default_rng(seed), n_bootstrap)
    elif resamples.units.units.size != data.values.size:
        raise ValueError("resamples must be of as many candidates as the scores")
    edges = np.linspace(0.0, 1.0, _JSD_BINS + 1)  # JSD is not asked for; any bins do
    found: dict[Hashable, dict[str, tuple[float, FloatArray]]] = {}
    for group in range(len(data.group_ids)):
        if group == data.reference:
            continue
        pair = (data.groups == group) | (data.groups == data.reference)
        cells = _subtask_cells(data, pair, group)
        if not cells or min(_unit_counts(data, pair, group)) < MIN_UNITS:
            continue  # too few units to resample: no replicates, no test
        sizes = np.array([cell.n for cell in cells.values()], dtype=float)
        figures: dict[str, tuple[float, FloatArray]] = {}
        per_subtask = {
            s: _replicate_figures(data.values, c, edges, resamples) for s, c in cells.items()
        }
        for figure in ("rabbi", "avg_gap"):
            estimate = _weighted_mean(
                [_figures(data.values, c, edges)[figure] for c in cells.values()], sizes
            )
            stacked = np.stack([per_subtask[s][figure] for s in cells], axis=1)
            replicates = np.nansum(stacked * sizes, axis=1) / _weight_present(stacked, sizes)
            figures[figure] = (estimate, replicates)
        found[data.group_ids[group]] = figures
    return found, resamples


def _replicate_figures(
    values: FloatArray, cell: _Cell, edges: FloatArray, resamples: Resamples
) -> dict[str, FloatArray]:
    """The score figures of one cell in every replicate; NaN where a replicate left the
    group or the reference without a candidate.

    Little bootstraps give each subset's replicates centred on the mean of all of them:
    their spread is then the pooled spread within the subsets (Kleiner et al. 2014)."""
    if resamples.subsets:
        return _little_figures(values, cell, edges, resamples)
    w_a, w_b = resamples.of(cell.group), resamples.of(cell.reference)
    usable = (w_a.sum(axis=1) > 0) & (w_b.sum(axis=1) > 0)
    w_a[~usable], w_b[~usable] = 1.0, 1.0  # computed, then dropped
    found = _weighted_figures(values, cell, edges, w_a, w_b)
    return {figure: np.where(usable, column, np.nan) for figure, column in found.items()}


def _little_figures(
    values: FloatArray, cell: _Cell, edges: FloatArray, resamples: Resamples
) -> dict[str, FloatArray]:
    unit_of = resamples.units.units
    size = int(unit_of.max()) + 1
    parts: dict[str, list[FloatArray]] = {figure: [] for figure in _SCORE_FIGURES}
    means: dict[str, list[float]] = {figure: [] for figure in _SCORE_FIGURES}
    for subset in resamples.subsets:
        count = subset.weights.shape[0]
        column_a = subset.where(unit_of[cell.group], size)
        column_b = subset.where(unit_of[cell.reference], size)
        held_a, held_b = column_a >= 0, column_b >= 0
        if not held_a.any() or not held_b.any():  # the subset holds none of one side
            for figure in _SCORE_FIGURES:
                parts[figure].append(np.full(count, np.nan))
            continue
        part = _Cell(cell.group[held_a], cell.reference[held_b])
        w_a = subset.weights[:, column_a[held_a]].astype(np.float64)
        w_b = subset.weights[:, column_b[held_b]].astype(np.float64)
        usable = (w_a.sum(axis=1) > 0) & (w_b.sum(axis=1) > 0)
        w_a[~usable], w_b[~usable] = 1.0, 1.0  # computed, then dropped
        for figure, column in _weighted_figures(values, part, edges, w_a, w_b).items():
            kept = np.where(usable, column, np.nan)
            if usable.any():
                means[figure].append(float(np.nanmean(kept)))
                kept = kept - means[figure][-1]
            parts[figure].append(kept)
    # Centred within their subsets, around the subsets' grand mean.
    return {
        figure: np.concatenate(parts[figure]) + (np.mean(means[figure]) if means[figure] else 0.0)
        for figure in _SCORE_FIGURES
    }


# --- score figures: RABBI, δ, JSD, EMD ------------------------------------------------


def _score_rows(
    data: _Data,
    scope: str,
    edges: FloatArray,
    resamples: Resamples,
    n_permutations: int,
    confidence: float,
    seeds: Sequence[np.random.SeedSequence],
) -> list[dict[str, Any]]:
    keep = np.ones(data.values.size, dtype=bool) if scope == "all" else data.qualified == 1
    if not keep.any():
        return []
    rows: list[dict[str, Any]] = []
    ref = data.reference
    for group in range(len(data.group_ids)):
        if group == ref:
            continue
        pair = keep & ((data.groups == group) | (data.groups == ref))
        cells = _subtask_cells(data, pair, group)
        if not cells:
            continue
        units = _unit_counts(data, pair, group)
        estimates = {s: _figures(data.values, cell, edges) for s, cell in cells.items()}
        weights = np.array([cell.n for cell in cells.values()], dtype=float)
        headline = {
            f: _weighted_mean([estimates[s][f] for s in cells], weights) for f in _SCORE_FIGURES
        }
        bounds: dict[Any, dict[str, tuple[float, float] | None]] = {}
        if min(units) >= MIN_UNITS:
            bounds = _score_intervals(
                data, cells, edges, weights, estimates, headline, confidence, resamples,
                min(units),
            )  # fmt: skip
        tests = {}
        if min(units) >= MIN_UNITS:
            tests = _score_tests(
                data, cells, pair, group, weights, n_permutations,
                np.random.default_rng(seeds[1].spawn(1)[0]),
            )  # fmt: skip
        for subtask, figures in [(None, headline), *estimates.items()]:
            n = sum(c.n for c in cells.values()) if subtask is None else cells[subtask].n
            for figure in _SCORE_FIGURES:
                interval = bounds.get(subtask, {}).get(figure)
                rows.append(
                    _row(
                        figure, scope, data.group_ids[group],
                        None if subtask is None else data.subtask_ids[subtask], 0,
                        figures[figure], interval,
                        tests.get(subtask, {}).get(figure), n, units[0],
                    )
                )  # fmt: skip
    return rows


def _row(
    figure: str,
    scope: str,
    group: Hashable,
    subtask: Hashable,
    k: int,
    estimate: float,
    interval: tuple[float, float] | None,
    p: float | None,
    n: int,
    units: int,
) -> dict[str, Any]:
    return {
        "figure": figure,
        "scope": scope,
        "group": group,
        "subtask": subtask,
        "k": k,
        "estimate": float(estimate),
        "low": None if interval is None else float(interval[0]),
        "high": None if interval is None else float(interval[1]),
        "p": p,
        "n": int(n),
        "units": int(units),
    }


@dataclass(frozen=True)
class _Cell:
    """The candidates of one group and the reference in one subtask."""

    group: NDArray[np.intp]  # positions of the group's candidates
    reference: NDArray[np.intp]

    @property
    def n(self) -> int:
        return int(self.group.size + self.reference.size)


def _subtask_cells(data: _Data, pair: NDArray[np.bool_], group: int) -> dict[int, _Cell]:
    cells = {}
    for subtask in range(len(data.subtask_ids)):
        here = pair & (data.subtasks == subtask)
        of_group = np.flatnonzero(here & (data.groups == group))
        of_reference = np.flatnonzero(here & (data.groups == data.reference))
        if of_group.size and of_reference.size:
            cells[subtask] = _Cell(of_group, of_reference)
    return cells


def _unit_counts(data: _Data, pair: NDArray[np.bool_], group: int) -> tuple[int, int]:
    units = data.units.units
    return (
        int(np.unique(units[pair & (data.groups == group)]).size),
        int(np.unique(units[pair & (data.groups == data.reference)]).size),
    )


def _weighted_mean(values: Sequence[float], weights: FloatArray) -> float:
    return float(np.dot(values, weights) / weights.sum())


def _figures(values: FloatArray, cell: _Cell, edges: FloatArray) -> dict[str, float]:
    ones_a, ones_b = np.ones((1, cell.group.size)), np.ones((1, cell.reference.size))
    found = _weighted_figures(values, cell, edges, ones_a, ones_b)
    return {figure: float(found[figure][0]) for figure in _SCORE_FIGURES}


def _weighted_figures(
    values: FloatArray,
    cell: _Cell,
    edges: FloatArray,
    weights_a: NDArray[Any],
    weights_b: NDArray[Any],
) -> dict[str, FloatArray]:
    """The four score figures for every row of weights (a replicate, or all ones)."""
    a, b = values[cell.group], values[cell.reference]
    order_b = np.argsort(b, kind="stable")
    b_sorted, w_b = b[order_b], weights_b[:, order_b]
    total_a, total_b = weights_a.sum(axis=1), w_b.sum(axis=1)
    cumulative_b = _cumulative(w_b)
    below, at_or_below = _sorted_positions(a, b_sorted)
    signs = _weighted_sign_sums(below, at_or_below, weights_a, cumulative_b)
    found = {
        "rabbi": signs / (total_a * total_b),
        "avg_gap": weights_a @ a / total_a - w_b @ b_sorted / total_b,
    }
    found["jsd"] = _weighted_jsd(a, weights_a, total_a, b_sorted, w_b, total_b, edges)
    found["emd"] = _weighted_emd(a, weights_a, total_a, b_sorted, cumulative_b, total_b)
    return found


def _score_intervals(
    data: _Data,
    cells: dict[int, _Cell],
    edges: FloatArray,
    weights: FloatArray,
    estimates: dict[int, dict[str, float]],
    headline: dict[str, float],
    confidence: float,
    resamples: Resamples,
    units: int,
) -> dict[Any, dict[str, tuple[float, float] | None]]:
    """Intervals of the score figures per subtask and of the headline, over ``units``
    (the fewer of the group's and the reference's)."""
    largest = max(cell.n for cell in cells.values())
    replicates: dict[int, dict[str, list[FloatArray]]] = {s: {} for s in cells}
    for rows in resamples.blocks(largest):
        for subtask, cell in cells.items():
            for figure, values in _replicate_figures(data.values, cell, edges, rows).items():
                replicates[subtask].setdefault(figure, []).append(values)
    stacked = {
        s: {f: np.concatenate(parts) for f, parts in figures.items()}
        for s, figures in replicates.items()
    }
    result: dict[Any, dict[str, tuple[float, float] | None]] = {}
    for figure in _SCORE_FIGURES:
        per_subtask = np.stack([stacked[s][figure] for s in cells], axis=1)
        for s, column in zip(cells, per_subtask.T, strict=True):
            result.setdefault(s, {})[figure] = _interval(
                estimates[s][figure], column, confidence, figure, units
            )
        result.setdefault(None, {})[figure] = _interval(
            headline[figure],
            np.nansum(per_subtask * weights, axis=1) / _weight_present(per_subtask, weights),
            confidence,
            figure,
            units,
        )
    return result


def _weight_present(per_subtask: FloatArray, weights: FloatArray) -> FloatArray:
    """The weights of the subtasks a replicate could compute (a resample may empty one)."""
    found: FloatArray = (~np.isnan(per_subtask)) @ weights
    return np.where(found > 0, found, np.nan)


# The range each figure can take: intervals are clipped to it.
_RANGES = {
    "rabbi": (-1.0, 1.0),
    "avg_gap": (-math.inf, math.inf),
    "jsd": (0.0, 1.0),
    "emd": (0.0, math.inf),
    "selection_rate": (0.0, 1.0),
    "true_positive_rate": (0.0, 1.0),
    "dp_gap": (-1.0, 1.0),
    "eo_gap": (-1.0, 1.0),
}


def _interval(
    estimate: float,
    replicates: FloatArray,
    confidence: float,
    figure: str,
    units: int,
    *,
    floor: float = 0.0,
) -> tuple[float, float] | None:
    """The estimate ± t times the replicates' standard deviation, within the figure's range.

    t is Student's with ``units - 1`` degrees of freedom, the fewest units
    behind the figure (:mod:`biasaudit.metrics._small_samples`).

    The normal ("standard") bootstrap interval (Efron & Tibshirani, "An
    Introduction to the Bootstrap", 1993, §13.2), not the percentile one: a
    resample of few items changes how the comparisons between items mix, so
    replicates of rank and selection figures can sit off-centre, and a
    percentile interval would then miss its own estimate.

    ``floor``: the least standard error the figure is given (the qualified candidates'
    selection figures: their spread over the omnibus test's relabellings,
    :meth:`_Selection._rows`).
    """
    usable = replicates[~np.isnan(replicates)]
    if usable.size < 20 or math.isnan(estimate):
        return None
    spread = critical_value(confidence, units) * max(float(np.std(usable, ddof=1)), floor)
    low, high = _RANGES[figure]
    return max(low, estimate - spread), min(high, estimate + spread)


def _score_tests(
    data: _Data,
    cells: dict[int, _Cell],
    pair: NDArray[np.bool_],
    group: int,
    weights: FloatArray,
    n_permutations: int,
    rng: np.random.Generator,
) -> dict[Any, dict[str, float | None]]:
    """Permutation p-values of RABBI and δ: the group labels of the units are shuffled.

    From :data:`LITTLE_FROM` units, each one candidate (a one-way design), the
    p-value is read from the permutation distribution's exact mean and variance
    (:func:`_moment_tests`) instead of random relabellings."""
    unit_of = data.units.units
    units, inverse = np.unique(unit_of[pair], return_inverse=True)
    in_group = np.zeros(units.size, dtype=bool)
    in_group[inverse[data.groups[pair] == group]] = True
    n_subtasks = len(cells)
    rank_sums = np.zeros((units.size, n_subtasks))
    score_sums = np.zeros((units.size, n_subtasks))
    counts = np.zeros((units.size, n_subtasks))
    position = np.full(data.values.size, -1, dtype=np.intp)
    position[np.flatnonzero(pair)] = inverse
    for column, cell in enumerate(cells.values()):
        members = np.concatenate([cell.group, cell.reference])
        ranks = pd.Series(data.values[members]).rank(method="average").to_numpy()
        np.add.at(rank_sums[:, column], position[members], ranks)
        np.add.at(score_sums[:, column], position[members], data.values[members])
        np.add.at(counts[:, column], position[members], 1.0)
    if data.units.names is None and units.size >= LITTLE_FROM and counts.sum() == units.size:
        return _moment_tests(in_group, rank_sums, score_sums, counts, cells, weights)
    strata = data.units.permutation_strata(units)
    total = counts.sum(axis=0)
    statistics: dict[str, list[FloatArray]] = {"rabbi": [], "avg_gap": []}
    exact = False
    for arrangements, listed in _arrangements(in_group, strata, n_permutations, rng):
        exact = listed
        n_a = arrangements @ counts
        n_b = total - n_a
        with np.errstate(divide="ignore", invalid="ignore"):
            rabbi = 2 * (arrangements @ rank_sums - n_a * (n_a + 1) / 2) / (n_a * n_b) - 1
            score_a = arrangements @ score_sums
            gap = score_a / n_a - (score_sums.sum(axis=0) - score_a) / n_b
        statistics["rabbi"].append(rabbi)
        statistics["avg_gap"].append(gap)
    result: dict[Any, dict[str, float | None]] = {}
    for figure, blocks in statistics.items():
        values = np.concatenate(blocks)
        observed, permuted = values[0], values[1:]
        for column, subtask in enumerate(cells):
            result.setdefault(subtask, {})[figure] = _p_two_sided(
                observed[column], permuted[:, column], exact
            )
        headline = np.nansum(values * weights, axis=1) / _weight_present(values, weights)
        result.setdefault(None, {})[figure] = _p_two_sided(headline[0], headline[1:], exact)
    return result


def _moment_tests(
    in_group: NDArray[np.bool_],
    rank_sums: FloatArray,
    score_sums: FloatArray,
    counts: FloatArray,
    cells: dict[int, _Cell],
    weights: FloatArray,
) -> dict[Any, dict[str, float | None]]:
    """Two-sided p of RABBI and δ on the normal law with the permutation distribution's
    exact mean and variance, units (one candidate each) shuffled within their subtask.

    In a subtask of N = a + b candidates, the group's sum of n_a of N values x drawn
    without replacement has mean a·x̄ and variance a·b·S²/N (S² with N - 1), so
    RABBI = 2(R_a - a(a+1)/2)/(ab) - 1 on the ranks has mean 0 and variance
    4·S²_rank/(a·b·N), and δ has mean 0 and variance N·S²/(a·b); subtasks are
    shuffled independently, so the headline's variance is the weighted sum. At
    this many units the permutation law is normal (Hoeffding's combinatorial
    central limit theorem, Ann. Math. Stat. 22, 1951; Lehmann, "Nonparametrics",
    1975, §1.3 for the ranks with ties), closer than 2,000 random relabellings
    could tell.
    """
    result: dict[Any, dict[str, float | None]] = {}
    for figure, sums in (("rabbi", rank_sums), ("avg_gap", score_sums)):
        observed, variances = [], []
        for column in range(len(cells)):
            here = counts[:, column] > 0
            x = sums[here, column]
            mine = in_group[here]
            a, b = int(mine.sum()), int((~mine).sum())
            n = a + b
            spread = float(np.var(x, ddof=1)) if n > 1 else 0.0
            if figure == "rabbi":
                value = 2 * (float(x[mine].sum()) - a * (a + 1) / 2) / (a * b) - 1
                variance = 4 * spread / (a * b * n)
            else:
                value = float(x[mine].mean() - x[~mine].mean())
                variance = n * spread / (a * b)
            observed.append(value)
            variances.append(variance)
        for column, subtask in enumerate(cells):
            result.setdefault(subtask, {})[figure] = _normal_p(observed[column], variances[column])
        total = float(weights.sum())
        headline = float(np.dot(observed, weights)) / total
        variance = float(np.dot(np.square(weights), variances)) / total**2
        result.setdefault(None, {})[figure] = _normal_p(headline, variance)
    return result


def _normal_p(observed: float, variance: float) -> float | None:
    if math.isnan(observed):
        return None
    if variance <= 0:
        return 1.0 if abs(observed) < 1e-12 else P_FLOOR
    return two_sided_p(observed / math.sqrt(variance))


def _arrangements(
    in_group: NDArray[np.bool_],
    strata: NDArray[np.intp],
    n_permutations: int,
    rng: np.random.Generator,
) -> Iterator[tuple[FloatArray, bool]]:
    """The observed labelling (first row), then every relabelling (when they number at most
    ``n_permutations`` and there is one stratum: exact) or ``n_permutations`` random ones,
    in blocks of rows of at most about :data:`_BLOCK_CELLS` cells; with whether exact."""
    n, chosen = in_group.size, int(in_group.sum())
    observed = in_group.astype(float)[None, :]
    if np.unique(strata).size == 1 and math.comb(n, chosen) <= n_permutations:
        rows = np.zeros((math.comb(n, chosen), n))
        for row, picked in enumerate(itertools.combinations(range(n), chosen)):
            rows[row, list(picked)] = 1.0
        yield np.vstack([observed, rows]), True
        return
    yield observed, False
    block = max(1, _BLOCK_CELLS // max(n, 1))
    members_of = [np.flatnonzero(strata == stratum) for stratum in np.unique(strata)]
    for start in range(0, n_permutations, block):
        rows = np.repeat(observed, min(block, n_permutations - start), axis=0)
        for members in members_of:
            rows[:, members] = rng.permuted(rows[:, members], axis=1)
        yield rows, False


def _p_two_sided(observed: float, permuted: FloatArray, exact: bool) -> float | None:
    """Share of relabellings at least as far from 0 as the observed one. An exact list
    holds the observed labelling; random ones count it once more, so p > 0 either way."""
    usable = permuted[~np.isnan(permuted)]
    if math.isnan(observed) or usable.size == 0:
        return None
    extreme = np.count_nonzero(np.abs(usable) >= abs(observed) - 1e-12)
    if exact:
        return float(extreme / usable.size)
    return float((extreme + 1) / (usable.size + 1))


# --- selection: ΔDP, ΔEO, selection rates --------------------------------------------

_RATES = ("selection_rate", "true_positive_rate")


class _Selection:
    """Top-k selection in balanced pools, per subtask, for a set of candidate weights."""

    def __init__(self, data: _Data, pool: str, pool_size: int, n_rounds: int, k_max: int) -> None:
        self.data, self.pool, self.pool_size = data, pool, pool_size
        self.n_rounds, self.k_max = n_rounds, k_max
        self.n_groups = len(data.group_ids)
        # Dense ranks order (and tie) the candidates exactly as their scores do.
        self.ranks: NDArray[np.intp] = np.unique(data.values, return_inverse=True)[1]
        self._in_subtask = [data.subtasks == s for s in range(len(data.subtask_ids))]
        self._members: dict[tuple[int, int], NDArray[np.intp]] = {}  # of the own groups
        self._counts: dict[str, FloatArray] = {}
        self._units: dict[int, int] = {}
        # Cells and bins per subtask (one per group: the same every draw).
        self._bins_of: dict[int, tuple[NDArray[np.intp], NDArray[np.intp]]] = {}
        self._places: FloatArray | None = None  # shares per (higher, tied) of a pool
        # The rates of each relabelling of the omnibus test (:meth:`omnibus`): the null
        # spread that floors the selection intervals' SEs (:meth:`_rows`).
        self._null: list[dict[str, FloatArray]] = []

    def _drawn(
        self,
        weights: NDArray[np.int64],
        rng: np.random.Generator,
        groups: NDArray[np.intp] | None,
    ) -> Iterator[tuple[int, NDArray[np.intp], NDArray[np.bool_], FloatArray, FloatArray]]:
        """Per subtask that fills a pool: the subtask, its pools shaped (pool, member),
        which members are rated qualified, shaped (member, pool), and the members'
        shares of the k places with and without the others (:meth:`_shares`)."""
        data = self.data
        groups = data.groups if groups is None else groups
        own = groups is data.groups
        for subtask in range(len(data.subtask_ids)):
            pools = self._pools(subtask, weights, groups, rng, own)
            if pools is not None:
                qualified = data.qualified[pools.T] == 1
                yield subtask, pools, qualified, *self._shares(pools, qualified)

    def _tallied_rates(
        self,
        weights: NDArray[np.int64],
        rng: np.random.Generator,
        groups: NDArray[np.intp] | None = None,
    ) -> dict[str, FloatArray]:
        """Per (subtask, group, k): selection rate and true positive rate (NaN where none
        was shown) of one selection, tallied per (subtask, group) as the pools are read:
        nothing per candidate, whatever their number.

        Every (cell, k) sums its members' shares pool by pool, in the order the pools were
        drawn (``bincount`` adds in the order it reads). One-per-group pools hold a cell
        once each, so they are read member by member, as the shares lie; random pools,
        which may hold a group twice, pool by pool. True positive rates count the
        qualified alone: the others weigh 0, and adding 0.0 to a sum of shares (never
        negative) leaves it as it was. So the sums are the same to the bit as a count
        over the qualified members of each pool in turn."""
        data = self.data
        groups = data.groups if groups is None else groups
        cells = len(data.subtask_ids) * self.n_groups
        keys = data.subtasks * self.n_groups + groups
        k_max = self.k_max
        won = {figure: np.zeros(cells * k_max) for figure in _RATES}
        seen = {figure: np.zeros(cells) for figure in _RATES}
        for subtask, pools, qualified, shares, only in self._drawn(weights, rng, groups):
            members = pools.T
            if self.pool != "one_per_group":  # read pool by pool
                members, qualified = pools, qualified.T
                shares, only = shares.transpose(1, 0, 2), only.transpose(1, 0, 2)
            cell_of, bins = self._bins(subtask, keys, members)
            seen["selection_rate"] += np.bincount(cell_of, minlength=cells)
            seen["true_positive_rate"] += np.bincount(cell_of, qualified.ravel(), minlength=cells)
            won["selection_rate"] += np.bincount(bins, shares.ravel(), minlength=cells * k_max)
            won["true_positive_rate"] += np.bincount(bins, only.ravel(), minlength=cells * k_max)
        out = {}
        for figure in _RATES:
            with np.errstate(divide="ignore", invalid="ignore"):
                rates = won[figure].reshape(cells, k_max) / seen[figure][:, None]
            out[figure] = rates.reshape(len(data.subtask_ids), self.n_groups, self.k_max)
        return out

    def _bins(
        self, subtask: int, keys: NDArray[np.intp], members: NDArray[np.intp]
    ) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """The (subtask, group) cell of each of ``members`` (raveled), and the (cell, k)
        bin of each of their shares. One-per-group pools put group g in column g, so a
        subtask's cells and bins are the same every draw, whatever the labels: built once."""
        own = self.pool == "one_per_group"
        found = self._bins_of.get(subtask) if own else None
        if found is None:
            cell_of = keys[members].ravel()
            found = cell_of, (cell_of[:, None] * self.k_max + np.arange(self.k_max)).ravel()
            if own:
                self._bins_of[subtask] = found
        return found

    def _shares(
        self, pools: NDArray[np.intp], qualified: NDArray[np.bool_]
    ) -> tuple[FloatArray, FloatArray]:
        """Each member's share of the k places, shaped (member, pool, k); and the same
        with 0 for members not rated ``qualified`` (true positives count the qualified)."""
        if pools.shape[1] > _PAIRWISE_MAX_POOL:
            shares = top_k_shares(self.data.values[pools], k_max=self.k_max)
            shares = np.ascontiguousarray(shares.transpose(1, 0, 2))
            return shares, shares * qualified[..., None]
        # Small pools: compare members pair by pair on integer ranks (as the gap bootstrap),
        # and read each (higher, tied)'s shares from a table of them, whose last row is 0.
        higher, tied = _higher_and_tied_members(self.ranks[pools].T)
        size = pools.shape[1]  # the pool size, the same every draw
        table = self._places
        if table is None:
            table = _places_table(size, k_max=self.k_max).reshape(size * size, self.k_max)
            table = self._places = np.vstack([table, np.zeros(self.k_max)])
        rows = higher.astype(np.intp) * size + tied - 1
        only_qualified = np.where(qualified, rows, size * size)
        return np.take(table, rows, axis=0), np.take(table, only_qualified, axis=0)

    def _pools(
        self,
        subtask: int,
        weights: NDArray[np.int64],
        groups: NDArray[np.intp],
        rng: np.random.Generator,
        own: bool,
    ) -> NDArray[np.intp] | None:
        """Pools of candidate positions, shaped (rounds, pool size), or None if none fills.
        ``own``: ``groups`` are the candidates' own labels (their members are kept)."""
        rounds = self.n_rounds
        here = self._in_subtask[subtask]
        if self.pool == "random":
            members = _expanded(np.flatnonzero(here), weights)
            per_shuffle = members.size // self.pool_size
            if per_shuffle == 0:
                return None
            return _shuffled_in_turn(
                members, rounds * self.pool_size, rng, per_shuffle * self.pool_size
            ).reshape(-1, self.pool_size)
        columns = []
        for group in range(self.n_groups):
            found = self._members.get((subtask, group)) if own else None
            if found is None:
                found = np.flatnonzero(here & (groups == group))
                if own:
                    self._members[(subtask, group)] = found
            members = _expanded(found, weights)
            if members.size == 0:
                return None
            columns.append(_shuffled_in_turn(members, rounds, rng, members.size))
        return np.stack(columns, axis=1)

    def rates(
        self, n_bootstrap: int, seeds: Sequence[np.random.SeedSequence]
    ) -> tuple[dict[str, FloatArray], list[dict[str, FloatArray]]]:
        """The rates per (subtask, group, k), and those of each resample of the units
        (none where a group has too few units)."""
        data = self.data
        ones = np.ones(data.values.size, dtype=np.int64)
        estimates = self._tallied_rates(ones, np.random.default_rng(seeds[2]))
        few = min(self._units_per_group().values()) < MIN_UNITS
        replicate_rates = []
        if not few:
            rng = np.random.default_rng(seeds[2].spawn(1)[0])
            for _ in range(n_bootstrap):
                weights = data.units.weights(rng, 1)[0].astype(np.int64)
                replicate_rates.append(self._tallied_rates(weights, rng))
        return estimates, replicate_rates

    def impact(
        self,
        estimates: dict[str, FloatArray],
        replicates: list[dict[str, FloatArray]],
        categories: Mapping[str, Mapping[Any, str]],
        confidence: float,
    ) -> pd.DataFrame:
        """Impact ratios per k: each category value's headline selection rate (its
        groups' rates weighted by their candidates) over the most selected value's, with
        the interval of the whole statistic over the resamples, on the log scale
        (29 CFR 1607.4(D); see :mod:`biasaudit.metrics._listwise`)."""
        data = self.data
        size = self._weights("selection_rate").sum(axis=0)  # candidates per group
        headline = self._aggregate("selection_rate", estimates["selection_rate"])
        reps = (
            self._aggregate("selection_rate", np.stack([r["selection_rate"] for r in replicates]))
            if replicates
            else None
        )
        per_group = self._units_per_group()
        rows = []
        labelled = {**{c: dict(v) for c, v in categories.items()},
                    "group": {g: str(g) for g in data.group_ids}}  # fmt: skip
        for category, value_of in labelled.items():
            values = sorted({value_of[g] for g in data.group_ids if g in value_of})
            if len(values) < 2:
                continue
            members = {v: [i for i, g in enumerate(data.group_ids) if value_of.get(g) == v]
                       for v in values}  # fmt: skip

            def pooled(rates: FloatArray, members: dict[str, list[int]] = members) -> FloatArray:
                # (..., group, k) -> (..., value, k): candidate-weighted mean of its groups.
                found = []
                for groups in members.values():
                    weight = size[groups][:, None]
                    found.append((rates[..., groups, :] * weight).sum(axis=-2) / weight.sum())
                return np.stack(found, axis=-2)

            # Student's t over the fewest units behind a value of the category (its
            # groups' together); a ratio of rates from fewer than RATIO_MIN_UNITS names
            # is too skewed for any interval.
            fewest = min(sum(per_group[g] for g in groups) for groups in members.values())
            z = critical_value(confidence, fewest)
            rate = pooled(headline)
            ratio = rate / rate.max(axis=0, keepdims=True)
            rep_ratio = rep_rate = None
            if reps is not None:
                rep_rate = pooled(reps)
                with np.errstate(divide="ignore", invalid="ignore"):
                    rep_ratio = rep_rate / rep_rate.max(axis=-2, keepdims=True)
            for v, value in enumerate(values):
                n = int(size[members[value]].sum())
                for k in range(self.k_max):
                    low = high = rate_low = rate_high = math.nan
                    estimate = float(ratio[v, k])
                    if rep_rate is not None:  # the rate's own interval: estimate ± z SE
                        spread = z * float(np.std(rep_rate[:, v, k], ddof=1))
                        rate_low = max(0.0, float(rate[v, k]) - spread)
                        rate_high = min(1.0, float(rate[v, k]) + spread)
                    if rep_ratio is not None and fewest >= RATIO_MIN_UNITS:
                        # On the log scale (a resample that selects none of the value
                        # counts as half a selection), joined with the interval on the
                        # ratio's own scale, both centred on the estimate, as
                        # metrics.listwise_figures and the Local Law 144 summary do. Not
                        # on the estimate less the replicates' mean bias: resampling each
                        # stratum of items n - 1 times changes the strata's shares (one
                        # of two qualified resumes against three of four others), which
                        # moves the replicates of a ratio read from the top of the pools
                        # by more than its sampling bias, and in either direction. In
                        # worlds with a planted gap the "corrected" intervals missed the
                        # truth from below in 6-39% of worlds, these in 2-34%; with no
                        # gap, both in 5-10% (bench/bench_impact_coverage.py).
                        floor = 0.5 / max(n, 1) / max(float(rate[:, k].max()), 1e-12)
                        column = rep_ratio[:, v, k]
                        column = column[~np.isnan(column)]
                        if column.size >= 20:
                            logged = np.log(np.maximum(column, floor))
                            spread = z * float(np.std(logged, ddof=1))
                            centre = math.log(max(estimate, floor))
                            linear = z * float(np.std(column, ddof=1))
                            low = min(math.exp(centre - spread), max(0.0, estimate - linear))
                            high = min(1.0, max(math.exp(centre + spread), estimate + linear))
                    rows.append(
                        {"category": category, "value": value, "k": k + 1,
                         "rate": float(rate[v, k]), "rate_low": rate_low, "rate_high": rate_high,
                         "ratio": estimate, "low": low, "high": high,
                         "n": n, "flagged": bool(estimate < 0.8),
                         "beyond_noise": bool(not math.isnan(high) and high < 0.8)}
                    )  # fmt: skip
        return pd.DataFrame(rows, columns=IMPACT_COLUMNS)

    def rows(
        self,
        estimates: dict[str, FloatArray],
        replicate_rates: list[dict[str, FloatArray]],
        confidence: float,
    ) -> list[dict[str, Any]]:
        """The long table's rows of the selection figures."""
        return self._rows(estimates, replicate_rates, confidence)

    def _units_per_group(self) -> dict[int, int]:
        if not self._units:
            units = self.data.units.units
            for g in range(self.n_groups):
                self._units[g] = int(np.unique(units[self.data.groups == g]).size)
        return dict(self._units)

    def _weights(self, figure: str) -> FloatArray:
        """Per (subtask, group): its candidates and the reference's (qualified ones for EO)."""
        if figure not in self._counts:
            data = self.data
            mask = np.ones(data.values.size, dtype=bool)
            if figure in ("true_positive_rate", "eo_gap"):
                mask = data.qualified == 1
            shape = (len(data.subtask_ids), self.n_groups)
            keys = data.subtasks[mask] * self.n_groups + data.groups[mask]
            counts: FloatArray = np.bincount(keys, minlength=shape[0] * shape[1]).astype(float)
            counts = counts.reshape(shape)
            if figure in ("dp_gap", "eo_gap"):
                counts = counts + counts[:, [data.reference]]
            self._counts[figure] = counts
        return self._counts[figure].copy()

    def _aggregate(self, figure: str, per_subtask: FloatArray) -> FloatArray:
        """Headline per (group, k) of a (..., subtask, group, k) array: weighted subtask mean."""
        weights = self._weights(figure)[:, :, None]
        present = ~np.isnan(per_subtask)
        total = np.where(present, weights, 0.0).sum(axis=-3)
        with np.errstate(divide="ignore", invalid="ignore"):
            found: FloatArray = np.nansum(per_subtask * weights, axis=-3) / total
        return found

    def _figures(self, rates: dict[str, FloatArray]) -> dict[str, FloatArray]:
        ref = self.data.reference
        found = dict(rates)
        found["dp_gap"] = rates["selection_rate"] - rates["selection_rate"][..., [ref], :]
        found["eo_gap"] = rates["true_positive_rate"] - rates["true_positive_rate"][..., [ref], :]
        return found

    def _rows(
        self,
        estimates: dict[str, FloatArray],
        replicates: list[dict[str, FloatArray]],
        confidence: float,
    ) -> list[dict[str, Any]]:
        data = self.data
        figures = self._figures(estimates)
        stacked = {
            f: np.stack([self._figures(r)[f] for r in replicates]) if replicates else None
            for f in figures
        }
        null = {
            f: np.stack([self._figures(r)[f] for r in self._null])
            if len(self._null) >= _NULL_FLOOR_FROM and f in _FLOORED
            else None
            for f in figures
        }
        units = self._units_per_group()
        rows = []
        for figure, per_subtask in figures.items():
            weights = self._weights(figure)
            headline = self._aggregate(figure, per_subtask)
            reps, nulls = stacked[figure], null[figure]
            headline_reps = None if reps is None else self._aggregate(figure, reps)
            headline_null = None if nulls is None else self._aggregate(figure, nulls)
            for group in range(self.n_groups):
                if figure in ("dp_gap", "eo_gap") and group == data.reference:
                    continue
                if np.isnan(headline[group]).all():
                    continue
                behind = units[group]
                if figure in ("dp_gap", "eo_gap"):
                    behind = min(behind, units[data.reference])
                for k in range(self.k_max):
                    for subtask in [None, *range(len(data.subtask_ids))]:
                        if subtask is None:
                            value = headline[group, k]
                            column = None if headline_reps is None else headline_reps[:, group, k]
                            floor = _spread_of(headline_null, (slice(None), group, k))
                            n = weights[:, group].sum()
                        else:
                            value = per_subtask[subtask, group, k]
                            column = None if reps is None else reps[:, subtask, group, k]
                            floor = _spread_of(nulls, (slice(None), subtask, group, k))
                            n = weights[subtask, group]
                        if np.isnan(value):
                            continue
                        rows.append(
                            _row(
                                figure, "all", data.group_ids[group],
                                None if subtask is None else data.subtask_ids[subtask],
                                k + 1, value,
                                None
                                if column is None
                                else _interval(value, column, confidence, figure, behind,
                                               floor=floor),
                                None, int(n), units[group],
                            )
                        )  # fmt: skip
        return rows

    # -- the omnibus test --------------------------------------------------------------

    def omnibus(self, n_permutations: int, rng: np.random.Generator) -> pd.DataFrame:
        """Per k, the permutation test that the groups' selection rates do not differ.

        The units' group labels are shuffled and the whole selection is run
        again on each relabelling: a candidate's selection depends on whom its
        pools hold, so outcomes cannot be relabelled after the fact.
        """
        columns = ["k", "statistic", "p", "permutations"]
        if min(self._units_per_group().values()) < MIN_UNITS:
            return pd.DataFrame(columns=columns)
        data = self.data
        units, inverse = np.unique(data.units.units, return_inverse=True)
        labels = _first_of(inverse, data.groups)
        strata = data.units.permutation_strata(units)
        ones = np.ones(data.values.size, dtype=np.int64)
        statistic = np.zeros((n_permutations + 1, self.k_max))
        self._null = []
        for row in range(n_permutations + 1):
            groups = data.groups if row == 0 else labels[inverse]
            tallied = self._tallied_rates(ones, rng, groups)
            if row:
                self._null.append(tallied)
            statistic[row] = self._spread(tallied["selection_rate"])
            labels = self._shuffled(labels, strata, 1, rng)[0]
        rows = []
        for k in range(self.k_max):
            observed, permuted = statistic[0, k], statistic[1:, k]
            extreme = np.count_nonzero(permuted >= observed - 1e-12)
            rows.append(
                {
                    "k": k + 1,
                    "statistic": float(observed),
                    "p": float((extreme + 1) / (permuted.size + 1)),
                    "permutations": n_permutations,
                }
            )
        return pd.DataFrame(rows, columns=columns)

    def _spread(self, rates: FloatArray) -> FloatArray:
        """Candidate-weighted variance of the groups' headline selection rates, per k."""
        headline = self._aggregate("selection_rate", rates)  # (group, k)
        size = self._weights("selection_rate").sum(axis=0)[:, None]
        overall = (headline * size).sum(axis=0) / size.sum()
        found: FloatArray = ((headline - overall) ** 2 * size).sum(axis=0) / size.sum()
        return found

    @staticmethod
    def _shuffled(
        labels: NDArray[np.intp], strata: NDArray[np.intp], n: int, rng: np.random.Generator
    ) -> NDArray[np.intp]:
        rows = np.repeat(labels[None, :], n, axis=0)
        for stratum in np.unique(strata):
            members = np.flatnonzero(strata == stratum)
            rows[:, members] = rng.permuted(rows[:, members], axis=1)
        return rows


def _spread_of(null: FloatArray | None, at: tuple[Any, ...]) -> float:
    """The standard deviation of a figure over the omnibus test's relabellings (0 where
    there are none, or too few finite ones)."""
    if null is None:
        return 0.0
    column = null[at]
    column = column[~np.isnan(column)]
    return float(np.std(column, ddof=1)) if column.size >= _NULL_FLOOR_FROM else 0.0


def _shuffled_in_turn(
    members: NDArray[np.intp], count: int, rng: np.random.Generator, used: int
) -> NDArray[np.intp]:
    """``count`` of ``members`` taken in turn from shuffles of them (the first ``used`` of
    each shuffle), reshuffled once a shuffle is used up: the balanced draw.

    Where one shuffle covers ``count`` and ``members`` are many times more, the first
    ``count`` of a shuffle are a sample without replacement, drawn as such (in
    O(count), not a sort of every member)."""
    if count * 8 <= used and members.size >= 10_000:
        return members[rng.choice(members.size, size=count, replace=False)]
    shuffles = -(-count // used)
    keys = rng.random((shuffles, members.size)).argsort(axis=1)
    found: NDArray[np.intp] = members[keys[:, :used]].ravel()[:count]
    return found


def _expanded(positions: NDArray[np.intp], weights: NDArray[np.int64]) -> NDArray[np.intp]:
    """Each position as often as its weight."""
    found: NDArray[np.intp] = np.repeat(positions, weights[positions])
    return found
