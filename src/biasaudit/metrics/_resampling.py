"""The units that vary, and resampling them: what every interval over names, items and
pools starts from (allocation, listwise and the Local Law 144 summary of a run).

A candidate is a (name, item) pair: candidates that share a name (or an item) are not
independent draws, so an interval that resamples candidates treats three names as if
they were hundreds of independent people. :class:`Units` says which name and which item
each row belongs to, and its strata: names within their group, items within their
subtask and qualification level (and within their group where each item belongs to
one). :meth:`Units.resample` draws the *pigeonhole bootstrap* for crossed designs
(Owen, "The pigeonhole bootstrap", Ann. Appl. Stat. 1(2), 2007): each replicate
resamples the names and the items independently with replacement, a row counting as
often as its name times its item was drawn. Each stratum of n units is resampled
n - 1 times (McCarthy & Snowden, "The bootstrap and finite population sampling", 1985;
Rao & Wu, JASA 83, 1988), which removes the bootstrap's (n - 1)/n shrinkage of the
variance, a large error when a group has few names. From :data:`LITTLE_FROM` units of a
one-way design it is the bag of little bootstraps (Kleiner, Talwalkar, Sarkar & Jordan,
"A scalable bootstrap for massive data", JRSS B 76(4), 2014).

:class:`MultiwayClusters` is the other design: appearances clustered by names, items
and pools at once (listwise rankings), each kind of cluster resampled on its own and
the one-way variances summed (:mod:`biasaudit.metrics._listwise` says why the sum).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from biasaudit.metrics._validate import as_label_array

__all__ = [
    "LITTLE_FROM",
    "MIN_UNITS",
    "ClusterTerm",
    "MultiwayClusters",
    "Resamples",
    "Units",
    "cluster_draws",
    "clusters_behind_a_group",
]

# A group (or the reference) with fewer units than this gets no interval or
# p-value: a resample of one name is that name.
MIN_UNITS = 2
# Bootstrap replicates of the score figures computed at once (bounds memory).
_BLOCK_CELLS = 4_000_000
# From this many units of a one-way design (candidates, or items without names), the
# bootstrap is the bag of little bootstraps (see :meth:`Units.resample`) and the
# permutation tests read the permutation distribution's exact moments (:func:`_score_tests`).
LITTLE_FROM = 20_000
# A subset holds n ** 0.8 of n units: Kleiner et al. (2014, §3) find 0.6-0.8 enough for
# smooth figures; JSD, a plug-in divergence biased upwards in small samples, needs the
# larger subsets (its standard error is then ~20% wide at 30,000 units, less above).
_LITTLE_GAMMA = 0.8
_LITTLE_REPLICATES = 100  # resamples per subset (ibid.)


@dataclass(frozen=True)
class Units:
    """Which units every candidate belongs to, and how they are resampled.

    Build with :meth:`of`, which picks the design:

    - ``'names x items'``: names that recur (with several items each) are
      resampled within their group and the items, crossed with them, within
      their subtask and qualification level (the pigeonhole bootstrap);
    - ``'names'``: names recur but no items are given: names only;
    - ``'items'``: no names, items given (an essay is a candidate): items
      within their group, subtask and qualification level;
    - ``'candidates'``: every candidate its own unit (names that never recur
      are candidates), within its group, subtask and qualification level.
    """

    kind: str
    names: NDArray[np.intp] | None
    items: NDArray[np.intp] | None
    name_strata: tuple[NDArray[np.intp], ...]
    item_strata: tuple[NDArray[np.intp], ...]
    item_subtask: NDArray[np.intp] | None

    @classmethod
    def of(
        cls,
        groups: NDArray[np.intp],
        subtasks: NDArray[np.intp],
        qualified: NDArray[np.intp],
        names: ArrayLike | None = None,
        items: ArrayLike | None = None,
    ) -> Units:
        """Units of candidates with group, subtask and qualification codes (-1: not rated)."""
        n = groups.size
        name_codes = None
        if names is not None:
            labels = as_label_array(names, "names")
            # A name is a unit within its group: the same string in two groups is two units.
            name_codes = pd.factorize(pd.MultiIndex.from_arrays([groups, labels]))[0]
            name_codes = name_codes.astype(np.intp)
            if int(name_codes.max()) + 1 == n:  # no name recurs: each is one candidate
                name_codes = None
        if name_codes is not None:
            name_strata = tuple(_codes_by(_first_of(name_codes, groups)))
            if items is None:
                return cls("names", name_codes, None, name_strata, (), None)
            item_codes = pd.factorize(as_label_array(items, "items"))[0].astype(np.intp)
            strata = _first_of(item_codes, subtasks) * 3 + _first_of(item_codes, qualified) + 1
            if _nested(item_codes, groups):  # an item of one group only: resampled within it
                strata = strata * (int(groups.max()) + 1) + _first_of(item_codes, groups)
            return cls(
                "names x items", name_codes, item_codes, name_strata,
                tuple(_codes_by(strata)), _first_of(item_codes, subtasks),
            )  # fmt: skip
        kind = "candidates"
        item_codes = np.arange(n, dtype=np.intp)
        if names is None and items is not None:
            kind = "items"
            item_codes = pd.factorize(as_label_array(items, "items"))[0].astype(np.intp)
        subtask_of = _first_of(item_codes, subtasks)
        strata = (subtask_of * 3 + _first_of(item_codes, qualified) + 1) * (
            int(groups.max()) + 1
        ) + _first_of(item_codes, groups)
        return cls(kind, None, item_codes, (), tuple(_codes_by(strata)), subtask_of)

    @property
    def units(self) -> NDArray[np.intp]:
        """The unit of each candidate that group labels belong to: its name, else its item."""
        found = self.names if self.names is not None else self.items
        assert found is not None
        return found

    def resample(self, rng: np.random.Generator, replicates: int) -> Resamples:
        """``replicates`` resamples of the units (see :class:`Resamples`).

        From :data:`LITTLE_FROM` units of a one-way design, a (replicates x units)
        matrix would be gigabytes and every figure would be computed over every
        candidate in every replicate; there the resamples are a *bag of little
        bootstraps* (Kleiner, Talwalkar, Sarkar & Jordan, "A scalable bootstrap for
        massive data", JRSS B 76(4), 2014): replicates / 100 subsets, each holding
        the same share n^0.8 / n of every stratum's units (drawn without
        replacement), and 100 resamples of each that draw a stratum's N - 1 units
        from its subset (Poisson weights of that mean, see :func:`_little_subsets`).
        The spread of the replicates within each subset estimates the standard
        error; :func:`_replicate_figures` pools it (each subset's replicates are
        centred on their mean).
        """
        if self.names is None and self.items is not None:
            size = int(self.items.max()) + 1
            if size >= LITTLE_FROM and replicates >= 2 * _LITTLE_REPLICATES:
                subsets = _little_subsets(rng, self.item_strata, size, replicates)
                return Resamples(self, None, None, subsets)
        items = names = None
        if self.items is not None:
            size = int(self.items.max()) + 1
            items = _multiplicities(rng, self.item_strata, size, replicates)
        if self.names is not None:
            size = int(self.names.max()) + 1
            names = _multiplicities(rng, self.name_strata, size, replicates)
        return Resamples(self, items, names)

    def weights(
        self, rng: np.random.Generator, replicates: int, only: str | None = None
    ) -> NDArray[np.float64]:
        """How often each candidate counts in each of ``replicates`` resamples, shaped (r, n)
        (always whole resamples, never little ones); ``only="names"`` or ``"items"``
        resamples that factor alone of a crossed design, the other kept as it is."""
        items = names = None
        if self.items is not None and only != "names":
            items = _multiplicities(rng, self.item_strata, int(self.items.max()) + 1, replicates)
        if self.names is not None and only != "items":
            names = _multiplicities(rng, self.name_strata, int(self.names.max()) + 1, replicates)
        return Resamples(self, items, names).of(np.arange(self.units.size))

    def permutation_strata(self, units: NDArray[np.intp]) -> NDArray[np.intp]:
        """Within which stratum the group label of each of ``units`` (codes of
        :attr:`units`) is shuffled: names all together, items within their subtask."""
        if self.names is not None or self.item_subtask is None:
            return np.zeros(units.size, dtype=np.intp)
        found: NDArray[np.intp] = self.item_subtask[units]
        return found


@dataclass(frozen=True)
class Resamples:
    """Resamples of the units: how often each item and each name was drawn, per replicate.

    Small (replicates x units); :meth:`of` reads the weights of any set of
    candidates from them, so that no (replicates x all candidates) matrix is
    ever built. Little bootstraps (:meth:`Units.resample`) keep ``subsets``
    instead: the replicates are theirs, subset after subset.
    """

    units: Units
    items: NDArray[np.float64] | None
    names: NDArray[np.float64] | None
    subsets: tuple[_Subset, ...] = ()

    @property
    def replicates(self) -> int:
        """How many replicates these are."""
        if self.subsets:
            return sum(subset.weights.shape[0] for subset in self.subsets)
        drawn = self.items if self.items is not None else self.names
        assert drawn is not None
        return int(drawn.shape[0])

    def blocks(self, cells: int) -> list[Resamples]:
        """These replicates in consecutive blocks of about :data:`_BLOCK_CELLS` weights when
        ``cells`` candidates are read. A little bootstrap is one block: its replicates are
        centred over all its subsets together, and it reads a subset at a time anyway."""
        if self.subsets:
            return [self]
        block = max(1, _BLOCK_CELLS // max(cells, 1))
        return [self.rows(start, start + block) for start in range(0, self.replicates, block)]

    def of(self, positions: NDArray[np.intp]) -> NDArray[np.float64]:
        """The weights of the candidates at ``positions``, shaped (replicates, positions)."""
        assert not self.subsets, "little bootstraps are read subset by subset"
        found: NDArray[np.float64] | None = None
        if self.items is not None and self.units.items is not None:
            found = self.items[:, self.units.items[positions]]
        if self.names is not None and self.units.names is not None:
            by_name = self.names[:, self.units.names[positions]]
            found = by_name if found is None else found * by_name
        assert found is not None
        return found

    def rows(self, start: int, stop: int) -> Resamples:
        """Replicates ``start`` to ``stop`` (of whole resamples)."""
        assert not self.subsets
        return Resamples(
            self.units,
            None if self.items is None else self.items[start:stop],
            None if self.names is None else self.names[start:stop],
        )


@dataclass(frozen=True)
class _Subset:
    """One subset of a little bootstrap: its units' codes (sorted) and, per replicate, how
    often each of them was drawn, shaped (replicates, codes)."""

    codes: NDArray[np.intp]
    weights: NDArray[np.int32]

    def where(self, units: NDArray[np.intp], size: int) -> NDArray[np.intp]:
        """The column of each of ``units`` in :attr:`weights`; -1 where not in the subset."""
        column = np.full(size, -1, dtype=np.intp)
        column[self.codes] = np.arange(self.codes.size)
        found: NDArray[np.intp] = column[units]
        return found


def _little_subsets(
    rng: np.random.Generator,
    strata: Sequence[NDArray[np.intp]],
    size: int,
    replicates: int,
) -> tuple[_Subset, ...]:
    """The subsets of a bag of little bootstraps of ``size`` units (:meth:`Units.resample`)."""
    share = size**_LITTLE_GAMMA / size
    subsets = []
    for count in _split(replicates, _LITTLE_REPLICATES):
        codes, weights = [], []
        for stratum in strata:
            held = min(stratum.size, max(2, math.ceil(share * stratum.size)))
            chosen = rng.choice(stratum, size=held, replace=False)
            draws = max(stratum.size - 1, 1)
            codes.append(chosen)
            # Poisson weights of mean (N - 1) / b: the multinomial's counts but for their
            # sum, which no figure reads (each normalises its weights); a draw per unit,
            # where a multinomial costs a binomial draw per unit (Chamandy, Muralidharan,
            # Najmi & Naidu, "Estimating uncertainty for massive data streams", 2012).
            weights.append(rng.poisson(draws / held, size=(count, held)))
        order = np.argsort(np.concatenate(codes), kind="stable")
        subsets.append(
            _Subset(
                np.concatenate(codes)[order].astype(np.intp),
                np.concatenate(weights, axis=1)[:, order].astype(np.int32),
            )
        )
    return tuple(subsets)


def _split(total: int, part: int) -> list[int]:
    """``total`` in parts of about ``part`` each (at least one part)."""
    parts = max(1, round(total / part))
    return [len(chunk) for chunk in np.array_split(np.arange(total), parts)]


def _first_of(codes: NDArray[np.intp], values: NDArray[np.intp]) -> NDArray[np.intp]:
    """The value of each code's first candidate."""
    _, first = np.unique(codes, return_index=True)
    found: NDArray[np.intp] = values[first]
    return found


def _nested(items: NDArray[np.intp], groups: NDArray[np.intp]) -> bool:
    """Whether every item belongs to a single group."""
    pairs = np.unique(np.stack([items, groups]), axis=1)
    return bool(np.unique(pairs[0]).size == pairs.shape[1])


def _codes_by(strata: NDArray[np.intp]) -> list[NDArray[np.intp]]:
    order = np.argsort(strata, kind="stable")
    bounds = np.flatnonzero(np.diff(strata[order])) + 1
    return np.split(order, bounds)


def _multiplicities(
    rng: np.random.Generator,
    strata: Sequence[NDArray[np.intp]],
    size: int,
    replicates: int,
) -> NDArray[np.float64]:
    """Per replicate, how often each code is drawn when a stratum of n codes is resampled
    n - 1 times (n when n is 1; see the module docstring)."""
    counts = np.zeros(replicates * size, dtype=np.float64)
    offsets = (np.arange(replicates) * size)[:, None]
    # Draws are counted in batches of about a quarter of the counts (one pass of
    # bincount over all of them per batch, not one per stratum).
    batch, held = [], 0
    for codes in strata:
        draws = max(codes.size - 1, 1)
        drawn = codes[rng.integers(0, codes.size, size=(replicates, draws))] + offsets
        batch.append(drawn.ravel())
        held += drawn.size
        if held * 4 >= counts.size:
            counts += np.bincount(np.concatenate(batch), minlength=counts.size)
            batch, held = [], 0
    if batch:
        counts += np.bincount(np.concatenate(batch), minlength=counts.size)
    return counts.reshape(replicates, size)


# Multiway clustering (listwise: names, items and pools crossed; see
# :mod:`biasaudit.metrics._listwise` for the variance it sums and why).


@dataclass(frozen=True)
class ClusterTerm:
    """One term of the multiway variance: resamples of one kind of cluster."""

    sign: float
    codes: NDArray[np.intp]
    """Each row's cluster."""
    counts: NDArray[np.float64]
    """How often each cluster is drawn per replicate, shaped (replicates, clusters)."""

    def rate(self, rows: NDArray[np.bool_], selected: NDArray[np.float64]) -> NDArray[np.float64]:
        """Per replicate, the share of ``rows`` selected, each counting as often as its
        cluster was drawn (sums per cluster first: no replicates x rows matrix)."""
        n = self.counts.shape[1]
        chosen = np.bincount(self.codes[rows], weights=selected[rows], minlength=n)
        shown = np.bincount(self.codes[rows], minlength=n).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            found: NDArray[np.float64] = (self.counts @ chosen) / (self.counts @ shown)
        return found


@dataclass(frozen=True)
class MultiwayClusters:
    """The one-way resamples whose variances, summed, make the interval's."""

    units: Units
    """The units group labels belong to (names, else items), for counts and tests."""
    terms: tuple[ClusterTerm, ...]
    fewest: int
    """The fewest clusters of one kind behind a group: a kind nested in the groups
    (names) counts within each group, a crossed kind (items, pools) in all."""
    resampled: tuple[str, ...] = ()
    """The kinds resampled, in words: names, items, pools."""

    @classmethod
    def of(
        cls,
        data: pd.DataFrame,
        groups: NDArray[np.intp],
        rng: np.random.Generator,
        replicates: int,
        extra: Sequence[Any] = (),
    ) -> MultiwayClusters:
        """Names, items and pools where given (the pool, else the answer, always), and
        any ``extra`` factor (labels per row): one term each (see the module docstring)."""
        subtask = data["subtask"] if "subtask" in data.columns else pd.Series(0, index=data.index)
        subtasks = pd.factorize(subtask.astype(str))[0].astype(np.intp)
        unrated = np.full(len(data), -1, dtype=np.intp)
        names = data["name"].astype(str).to_numpy() if "name" in data.columns else None
        items = data["item"].astype(str).to_numpy() if "item" in data.columns else None
        units = Units.of(groups, subtasks, unrated, names=names, items=items)
        pools = data["pool"].astype(str).to_numpy()
        pool_kind = "pools"
        if items is not None and pd.Series(items).groupby(pools).nunique().max() == 1:
            # One item per pool (every candidate on the same resume): the pools are
            # the clusters the items would be, and more of them.
            items, pool_kind = None, "pools (one item each)"
        factors = [f for f in (names, items) if f is not None]
        kinds = [k for k, f in (("names", names), ("items", items)) if f is not None]
        factors += [np.asarray(f, dtype=str) for f in extra]
        kinds += ["extra"] * len(extra)
        factors.append(pools)
        kinds.append(pool_kind)
        terms = []
        fewest = []
        for labels in factors:
            codes, counts = cluster_draws(labels, rng, replicates)
            terms.append(ClusterTerm(1.0, codes, counts))
            fewest.append(clusters_behind_a_group(codes, groups))
        return cls(units, tuple(terms), min(fewest), tuple(kinds))

    def draws(
        self, figure: Callable[[ClusterTerm], NDArray[np.float64]]
    ) -> list[tuple[float, NDArray[np.float64]]]:
        """``figure`` (term -> one value per replicate) under each term's resamples."""
        return [(term.sign, figure(term)) for term in self.terms]

    @staticmethod
    def interval(
        estimate: float,
        draws: Sequence[tuple[float, NDArray[np.float64]]],
        z: float,
        low: float,
        high: float,
    ) -> tuple[float, float] | None:
        """estimate ± z √V, V the signed sum of the terms' variances (all one-way, so
        all positive; the larger one-way variance where the sum is not positive),
        clipped to [low, high]."""
        if math.isnan(estimate):
            return None
        variances = []
        for _, values in draws:
            usable = values[~np.isnan(values)]
            if usable.size < 20:
                return None
            variances.append(float(np.var(usable, ddof=1)))
        total = sum(sign * v for (sign, _), v in zip(draws, variances, strict=True))
        if total <= 0:
            total = max(v for (sign, _), v in zip(draws, variances, strict=True) if sign > 0)
        spread = z * math.sqrt(total)
        return max(low, estimate - spread), min(high, estimate + spread)


def clusters_behind_a_group(codes: NDArray[np.intp], groups: NDArray[np.intp]) -> int:
    """The fewest clusters within one group where each cluster has one group (names),
    else all the clusters (items and pools, shown to every group)."""
    frame = pd.DataFrame({"code": codes, "group": groups})
    if int(frame.groupby("code")["group"].nunique().max()) == 1:
        return int(frame.groupby("group")["code"].nunique().min())
    return int(frame["code"].nunique())


def cluster_draws(
    labels: Any, rng: np.random.Generator, replicates: int
) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """Each row's cluster, and per replicate how often each cluster is drawn when the n
    clusters are resampled n - 1 times (shaped (replicates, clusters))."""
    codes, found = pd.factorize(np.asarray(labels))
    n = len(found)
    draws = max(n - 1, 1)
    drawn = rng.integers(0, n, size=(replicates, draws))
    counts = np.zeros((replicates, n))
    np.add.at(counts, (np.repeat(np.arange(replicates), draws), drawn.ravel()), 1.0)
    return codes.astype(np.intp), counts
