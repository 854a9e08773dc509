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

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from biasaudit.metrics._crossed import (
    _JSD_BINS,
    _SCORE_FIGURES,
    IMPACT_COLUMNS,
    _Data,
    _data,
    _row,
    _subtask_cells,
    _unit_counts,
)
from biasaudit.metrics._resampling import MIN_UNITS, Resamples
from biasaudit.metrics._unit_scores import (
    _figures,
    _replicate_figures,
    _score_intervals,
    _score_tests,
    _weight_present,
    _weighted_mean,
)
from biasaudit.metrics._unit_selection import _Selection
from biasaudit.metrics._validate import (
    FloatArray,
    as_float_array,
    check_choice,
    check_confidence,
    check_int,
)

__all__ = [
    "AllocationFigures",
    "PairedGap",
    "allocation_figures",
    "headline_replicates",
    "paired_selection_gaps",
]


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


@dataclass(frozen=True, eq=False)
class PairedGap:
    """One group's ΔDP at one k in two runs of the same candidates, and its change.

    Attributes
    ----------
    before, after : float
        The headline ΔDP of run A and of run B, as :func:`allocation_figures` gives them.
    replicates : numpy.ndarray
        The change B - A in each replicate of one shared resample of the units and one
        shared draw of the pools (NaN where a replicate has no rate): the pigeonhole
        bootstrap of a crossed design, or the one factor's.
    names_only, items_only : numpy.ndarray
        A crossed design's: the change's replicates with the names alone resampled, and
        with the items alone (empty otherwise).
    null : numpy.ndarray
        ΔEO's: the change with each candidate's two scores swapped or not at random (its
        spread under "the prompts make no difference"), which floors its SE.
    units : int
        The fewest units behind the gap (the group's or the reference's).
    """

    before: float
    after: float
    replicates: FloatArray
    units: int
    names_only: FloatArray = field(default_factory=lambda: np.empty(0))
    items_only: FloatArray = field(default_factory=lambda: np.empty(0))
    null: FloatArray = field(default_factory=lambda: np.empty(0))

    @property
    def se(self) -> float:
        """The change's standard error (NaN with fewer than 20 replicates).

        One factor: the replicates' spread. Crossed (names x items): the pigeonhole
        bootstrap's variance is about V_names + V_items + V_cell, the name-by-item
        (candidate) term counted three times where the change's variance holds it once
        (Owen, "The pigeonhole bootstrap", Ann. Appl. Stat. 1(2), 2007, §3); once the
        names' and items' own effects cancel in the pairs, that term is most of what is
        left, and the pigeonhole bootstrap's SE was 1.7 times the change's spread
        (bench/bench_paired_selection.py). Each one-way bootstrap gives V_factor +
        V_cell, so V_names + V_items - V_cell, the two-way clustered variance of
        Cameron, Gelbach & Miller ("Robust inference with multiway clustering", J. Bus.
        Econ. Stat. 29(2), 2011), is 2 (V_names-only + V_items-only) - V_pigeonhole; where
        noise makes it smaller than either one-way variance, that one's (it holds its
        factor's share at least). ΔEO's is at least its spread under no difference
        (:attr:`null`).
        """
        both = _variance(self.replicates)
        if self.names_only.size and self.items_only.size:
            names, items = _variance(self.names_only), _variance(self.items_only)
            both = max(2.0 * (names + items) - both, names, items)
        if self.null.size:  # ΔEO: at least its spread under "no difference"
            both = max(both, _variance(self.null))
        return math.sqrt(both)


def _variance(replicates: FloatArray) -> float:
    usable = replicates[~np.isnan(replicates)]
    return float(np.var(usable, ddof=1)) if usable.size >= 20 else math.nan


_PAIRED = ("dp_gap", "eo_gap")
_FLOORED_CHANGES = ("eo_gap",)


def paired_selection_gaps(
    scores_a: ArrayLike,
    scores_b: ArrayLike,
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
    n_gap_bootstrap: int = 200,
    seed: int = 0,
) -> dict[tuple[str, Hashable, int], PairedGap]:
    """ΔDP and ΔEO of every group at each k in two runs that scored the same candidates (in the
    same order: ``scores_a[i]`` and ``scores_b[i]`` are one candidate under A and B), with
    the replicates of its change B - A, paired.

    Each run's ΔDP is computed as :func:`allocation_figures` computes it with the same
    arguments and ``seed`` (the same pools, so ``before`` and ``after`` are those runs'
    own figures to the bit), and each replicate resamples the units once (names within
    groups, items within subtasks: the pigeonhole bootstrap) and draws the pools once,
    for both runs: the change's spread is that of the paired differences, not of two
    independent audits. Only the scores differ between A and B. A crossed design's
    names and items are also resampled each alone (``n_gap_bootstrap`` replicates
    each), from which :attr:`PairedGap.se` removes what the pigeonhole bootstrap counts
    too often.

    Returns
    -------
    {(figure, group, k): PairedGap}
        ``figure`` ``dp_gap`` or ``eo_gap``. No replicates (an empty array) where a group
        has fewer than :data:`MIN_UNITS` units.

    Raises
    ------
    ValueError
        The score arrays differ in length, or bad input as :func:`allocation_figures`.
    """
    check_int(k_max, "k_max", minimum=1)
    check_int(n_rounds, "n_rounds", minimum=1)
    check_int(n_gap_bootstrap, "n_gap_bootstrap", minimum=20)
    check_choice(pool, "pool", ("one_per_group", "random"))
    data_a = _data(scores_a, groups, reference, subtasks, qualified, names, items)
    values_b = as_float_array(scores_b, "scores_b", finite=True)
    if values_b.size != data_a.values.size:
        raise ValueError("scores_a and scores_b differ in length")
    data_b = replace(data_a, values=values_b)
    if pool == "random":
        size = check_int(pool_size, "pool_size", minimum=1)
    else:
        size = len(data_a.group_ids)
    k_max = min(k_max, size)
    runs = [_Selection(data, pool, size, n_rounds, k_max) for data in (data_a, data_b)]
    # The seeds allocation_figures gives the selection (its third of four).
    seeds = np.random.SeedSequence(seed).spawn(4)
    ones = np.ones(data_a.values.size, dtype=np.int64)
    estimates = [run._tallied_rates(ones, np.random.default_rng(seeds[2])) for run in runs]
    units = runs[0]._units_per_group()
    few = min(units.values()) < MIN_UNITS
    crossed = data_a.units.names is not None and data_a.units.items is not None
    modes = [None, "names", "items"] if crossed else [None]
    rng = np.random.default_rng(seeds[2].spawn(1)[0])

    def headline(run: _Selection, rates: Sequence[dict[str, FloatArray]]) -> dict[str, FloatArray]:
        figures = [run._figures(r) for r in rates]
        return {figure: run._aggregate(figure, np.stack([f[figure] for f in figures]))
                for figure in _PAIRED}  # (draw, group, k) each  # fmt: skip

    def change(pair: Sequence[_Selection], drawn: Sequence[Sequence[dict[str, FloatArray]]]
               ) -> dict[str, FloatArray]:  # fmt: skip
        after_, before_ = headline(pair[1], drawn[1]), headline(pair[0], drawn[0])
        return {figure: after_[figure] - before_[figure] for figure in _PAIRED}

    changes: dict[str | None, dict[str, FloatArray]] = {}
    for only in [] if few else modes:  # the pigeonhole's first, as the run's own intervals
        drawn: list[list[dict[str, FloatArray]]] = [[], []]
        for _ in range(n_gap_bootstrap):
            weights = data_a.units.weights(rng, 1, only)[0].astype(np.int64)
            state = rng.bit_generator.state
            drawn[0].append(runs[0]._tallied_rates(weights, rng))
            rng.bit_generator.state = state  # the same pools for B
            drawn[1].append(runs[1]._tallied_rates(weights, rng))
        changes[only] = change(runs, drawn)
    # ΔEO's floor: its change under "the prompts make no difference", each candidate's two
    # scores swapped or not at random (the runs' own ΔEO is floored alike by the omnibus
    # test's relabellings: near a rate of 1 its bootstrap collapses).
    null: dict[str, FloatArray] = {}
    if not few and (data_a.qualified == 1).any():
        flips = np.random.default_rng(seeds[3].spawn(1)[0])
        swapped: list[dict[str, FloatArray]] = []
        for _ in range(n_gap_bootstrap):
            swap = flips.random(values_b.size) < 0.5
            pair = [
                _Selection(
                    replace(data_a, values=np.where(swap, other, mine)), pool, size, n_rounds, k_max
                )
                for mine, other in ((data_a.values, values_b), (values_b, data_a.values))
            ]
            tallied = [[run._tallied_rates(ones, np.random.default_rng(seeds[2]))] for run in pair]
            swapped.append({f: v[0] for f, v in change(pair, tallied).items()})  # fmt: skip
        null = {figure: np.stack([s[figure] for s in swapped]) for figure in _FLOORED_CHANGES}
    first = [headline(run, [e]) for run, e in zip(runs, estimates, strict=True)]
    found: dict[tuple[str, Hashable, int], PairedGap] = {}
    ref = data_a.reference
    empty = np.empty(0)
    for figure in _PAIRED:
        before, after = first[0][figure][0], first[1][figure][0]
        for group in range(len(data_a.group_ids)):
            if group == ref or np.isnan(before[group]).all():
                continue
            for k in range(k_max):
                spread = {only: by[figure][:, group, k] for only, by in changes.items()}
                floor = null[figure][:, group, k] if figure in null else empty
                found[(figure, data_a.group_ids[group], k + 1)] = PairedGap(
                    float(before[group, k]), float(after[group, k]), spread.get(None, empty),
                    min(units[group], units[ref]), spread.get("names", empty),
                    spread.get("items", empty), floor,
                )  # fmt: skip
    return found


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
