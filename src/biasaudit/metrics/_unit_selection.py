"""Top-k selection over the units that vary (ΔDP, ΔEO, selection rates, impact ratios):
balanced pools per subtask as the authors' code draws them, the rates' intervals over
the pigeonhole bootstrap, the omnibus permutation test, and the floor of the qualified
candidates' standard errors; the design and its sources are in
:mod:`biasaudit.metrics._units`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from biasaudit.metrics._crossed import (
    _FLOORED,
    _NULL_FLOOR_FROM,
    IMPACT_COLUMNS,
    _Data,
    _interval,
    _row,
)
from biasaudit.metrics._gap_bootstrap import _PAIRWISE_MAX_POOL, _higher_and_tied_members
from biasaudit.metrics._resampling import MIN_UNITS, _first_of
from biasaudit.metrics._selection import _places_table, top_k_shares
from biasaudit.metrics._small_samples import RATIO_MIN_UNITS, critical_value
from biasaudit.metrics._validate import FloatArray

__all__: list[str] = []  # its parts are private: biasaudit.metrics._units uses them

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
