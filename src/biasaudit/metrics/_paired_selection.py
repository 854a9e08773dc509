"""Allocation's selection gaps (ΔDP, ΔEO) in two runs of the same candidates, and their
change, paired: one resample of the units and one draw of the pools for both runs, the
crossed bootstrap's over-count of the name-by-item term taken out, ΔEO floored by its
spread under swapped scores. ``compare`` and mitigation experiments test allocation's
selection gaps with it (bench/bench_paired_selection.py: coverage and width).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike

from biasaudit.metrics._crossed import _data
from biasaudit.metrics._resampling import MIN_UNITS
from biasaudit.metrics._unit_selection import _Selection
from biasaudit.metrics._validate import FloatArray, as_float_array, check_choice, check_int

__all__ = ["PairedGap", "paired_selection_gaps"]


@dataclass(frozen=True, eq=False)
class PairedGap:
    """One group's ΔDP or ΔEO at one k in two runs of the same candidates, and its change.

    Attributes
    ----------
    before, after : float
        The headline figure of run A and of run B, as
        :func:`~biasaudit.metrics.allocation_figures` gives them.
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
        names, items = _variance(self.names_only), _variance(self.items_only)
        if not (math.isnan(both) or math.isnan(names) or math.isnan(items)):
            both = max(2.0 * (names + items) - both, names, items)
        if self.null.size:  # ΔEO: at least its spread under "no difference"
            both = max(both, _variance(self.null))
        return math.sqrt(both)


def _variance(replicates: FloatArray) -> float:
    """The replicates' variance; NaN with fewer than 20 (none drawn: a one-factor design)."""
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
    """ΔDP and ΔEO of every group at each k in two runs that scored the same candidates
    (in the same order: ``scores_a[i]`` and ``scores_b[i]`` are one candidate under A and
    B), with the replicates of their change B - A, paired.

    Each run's ΔDP and ΔEO are computed as :func:`~biasaudit.metrics.allocation_figures`
    computes them with the same arguments and ``seed`` (the same pools, so ``before``
    and ``after`` are those runs' own figures to the bit), and each replicate resamples
    the units once (names within groups, items within subtasks: the pigeonhole
    bootstrap) and draws the pools once, for both runs: the change's spread is that of
    the paired differences, not of two independent audits. Only the scores differ
    between A and B. A crossed design's names and items are also resampled each alone
    (``n_gap_bootstrap`` replicates each), from which :attr:`PairedGap.se` removes what
    the pigeonhole bootstrap counts too often; ΔEO's changes with each candidate's two
    scores swapped at random (as many) floor its SE.

    Returns
    -------
    {(figure, group, k): PairedGap}
        ``figure`` ``dp_gap`` or ``eo_gap``. No replicates (an empty array) where a group
        has fewer than :data:`MIN_UNITS` units.

    Raises
    ------
    ValueError
        The score arrays differ in length, or bad input as
        :func:`~biasaudit.metrics.allocation_figures`.
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
