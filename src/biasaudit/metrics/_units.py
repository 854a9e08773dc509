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

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
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
from biasaudit.metrics._validate import FloatArray, check_choice, check_confidence, check_int

__all__ = [
    "AllocationFigures",
    "allocation_figures",
    "headline_replicates",
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
