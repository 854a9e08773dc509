"""The score figures (RABBI, δ, JSD, EMD) over the units that vary: per subtask, weighted
into the headline, with pigeonhole-bootstrap intervals and permutation tests of the
names' (or items') group labels; the design and its sources are in
:mod:`biasaudit.metrics._units`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from biasaudit.metrics._crossed import _SCORE_FIGURES, _Cell, _Data, _interval
from biasaudit.metrics._distances import _weighted_emd, _weighted_jsd
from biasaudit.metrics._rank_biserial import _cumulative, _sorted_positions, _weighted_sign_sums
from biasaudit.metrics._resampling import _BLOCK_CELLS, LITTLE_FROM, Resamples
from biasaudit.metrics._small_samples import P_FLOOR, two_sided_p
from biasaudit.metrics._validate import FloatArray

__all__: list[str] = []  # its parts are private: biasaudit.metrics._units uses them


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
