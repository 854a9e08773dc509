"""The allocation that scores lead to: repeated top-k selection from candidate pools.

Chen, Ji & Evans, "The Mismeasure of Man and Models: Evaluating Allocational
Harms in Large Language Models" (arXiv:2408.01285); Cyberey, Ji &
Evans, "Do Prevalent Bias Metrics Capture Allocational Harms from LLMs?"
(2025).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from biasaudit.metrics._validate import (
    FloatArray,
    as_bool_array,
    as_float_array,
    as_label_array,
    check_choice,
    check_int,
    check_same_length,
)

_POOLS = ("one_per_group", "random")
# Random pools are drawn by sorting random keys in chunks of about this many cells.
_KEY_CELLS = 4_000_000


@dataclass(frozen=True, eq=False)
class SelectionResult:
    """Per-group outcome of repeated top-k selection.

    Attributes
    ----------
    selection_rate : pandas.DataFrame
        Index: group (in order of first appearance); columns: k = 1..k_max.
        Share of a group's pool appearances that were selected.
    true_positive_rate : pandas.DataFrame or None
        Same shape; the selection rate among the group's qualified
        appearances. None when no qualification labels were given.
    appearances : pandas.Series
        How many times each group's candidates appeared in a pool.
    qualified_appearances : pandas.Series or None
        How many of those appearances were of qualified candidates.
    pool : str
        ``"one_per_group"``, ``"random"``, or ``"given"`` (pools fixed in
        advance, :func:`select_in_pools`).
    pool_size : int
        Candidates per pool.
    n_rounds : int
        Pools drawn per stratum (for given pools: the number of pools).
    seed : int
        Seed of the draws (0 for given pools, which draw nothing).
    n_strata : int
        Strata the pools were drawn within (1 when pools mix all candidates).
    """

    selection_rate: pd.DataFrame
    true_positive_rate: pd.DataFrame | None
    appearances: pd.Series
    qualified_appearances: pd.Series | None
    pool: str
    pool_size: int
    n_rounds: int
    seed: int
    n_strata: int = 1

    @property
    def groups(self) -> tuple[Hashable, ...]:
        """The groups, in the order of the result's rows."""
        return tuple(self.selection_rate.index)

    @property
    def k_max(self) -> int:
        """The largest number of places simulated."""
        return int(self.selection_rate.columns[-1])

    def to_gap_dict(self, reference: Hashable) -> dict[str, dict[str, dict[str, float]]]:
        """ΔDP and ΔEO of every other group, shaped for ``metrics.json``.

        Returns ``{group: {"dp_gap": {"1": ..., ..., "<k_max>": ...},
        "eo_gap": {...}}}`` with string keys for k, as an allocation run's
        ``metrics.json`` has them; ``eo_gap`` is present only when
        qualification labels were given. The reference group is left out
        (its gaps are 0 by definition).
        """
        gaps = {"dp_gap": dp_gap(self, reference=reference)}
        if self.true_positive_rate is not None:
            gaps["eo_gap"] = eo_gap(self, reference=reference)
        return {
            str(group): {
                name: {str(k): float(value) for k, value in frame.loc[group].items()}
                for name, frame in gaps.items()
            }
            for group in self.groups
            if group != reference
        }


def _gap(rates: pd.DataFrame, reference: Hashable) -> pd.DataFrame:
    if reference not in rates.index:
        listed = ", ".join(repr(group) for group in rates.index)
        raise ValueError(f"reference must be one of the groups {listed}; got {reference!r}")
    return rates - rates.loc[reference]


def dp_gap(result: SelectionResult, *, reference: Hashable) -> pd.DataFrame:
    r"""Demographic-parity gap of every group against a reference group, per k.

    .. math::

        \Delta\mathrm{DP}_k(g) = P(\text{selected} \mid g, k)
                               - P(\text{selected} \mid \text{ref}, k)

    Parameters
    ----------
    result : SelectionResult
        Output of :func:`simulate_selection`.
    reference : hashable
        The reference group (e.g. ``"W_M"``).

    Returns
    -------
    pandas.DataFrame
        Index: group; columns: k. Negative where a group is selected less
        often than the reference; the reference row is 0.

    References
    ----------
    Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024.
    """
    return _gap(result.selection_rate, reference)


def eo_gap(result: SelectionResult, *, reference: Hashable) -> pd.DataFrame:
    r"""Equal-opportunity gap of every group against a reference group, per k.

    .. math:: \Delta\mathrm{EO}_k(g) = P(\text{selected} \mid g, \text{qualified}, k)
              - P(\text{selected} \mid \text{ref}, \text{qualified}, k)

    Parameters
    ----------
    result : SelectionResult
        Output of :func:`simulate_selection` run with qualification labels.
    reference : hashable
        The reference group.

    Returns
    -------
    pandas.DataFrame
        Index: group; columns: k.

    Raises
    ------
    ValueError
        If the selection was simulated without qualification labels.

    References
    ----------
    Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024;
    Hardt, Price & Srebro, "Equality of Opportunity in Supervised Learning",
    NeurIPS 2016.
    """
    if result.true_positive_rate is None:
        raise ValueError("eo_gap needs qualification labels: pass qualified= to simulate_selection")
    return _gap(result.true_positive_rate, reference)


def top_k_shares(pool_scores: ArrayLike, *, k_max: int) -> FloatArray:
    r"""How much of a place each pool member gets when the top k are selected.

    Within a pool, a candidate with ``g`` members scoring strictly higher
    and ``e`` members (itself included) scoring the same receives

    .. math:: \mathrm{share}_k = \min\big(1, \max(0, (k - g) / e)\big),

    so candidates tied across the cut share the remaining places equally and
    every pool hands out exactly k places. O(R·P log P) for R pools of P.

    Parameters
    ----------
    pool_scores : array_like, shape (R, P)
        Scores of the P members of each of R pools; higher is better.
    k_max : int
        Largest k, from 1 to P.

    Returns
    -------
    numpy.ndarray, shape (R, P, k_max)
        ``[r, p, k - 1]`` is member p's share of a place in pool r at k.

    References
    ----------
    Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024.
    """
    scores = np.asarray(pool_scores, dtype=float)
    if scores.ndim != 2 or scores.shape[1] == 0:
        raise ValueError(f"pool_scores must have shape (rounds, pool size), got {scores.shape}")
    if np.isnan(scores).any():
        raise ValueError("pool_scores contains NaN: drop or impute missing scores first")
    k_max = check_int(k_max, "k_max", minimum=1, maximum=scores.shape[1])
    return _shares_of_places(*_higher_and_tied(scores), k_max=k_max)


def _higher_and_tied(scores: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per member of each pool (row): how many score higher, and how many the same (itself too)."""
    n_rounds, size = scores.shape
    order = np.argsort(-scores, axis=1, kind="stable")
    ranked = np.take_along_axis(scores, order, axis=1)
    position = np.broadcast_to(np.arange(size), (n_rounds, size))
    starts_block = np.ones((n_rounds, size), dtype=bool)
    starts_block[:, 1:] = ranked[:, 1:] != ranked[:, :-1]
    ends_block = np.ones((n_rounds, size), dtype=bool)
    ends_block[:, :-1] = starts_block[:, 1:]
    # First and last position of each member's block of equal scores.
    block_start = np.maximum.accumulate(np.where(starts_block, position, 0), axis=1)
    block_end = np.minimum.accumulate(np.where(ends_block, position, size)[:, ::-1], axis=1)
    block_end = block_end[:, ::-1]

    higher = np.empty((n_rounds, size))
    tied = np.empty((n_rounds, size))
    np.put_along_axis(higher, order, block_start, axis=1)
    np.put_along_axis(tied, order, block_end - block_start + 1, axis=1)
    return higher, tied


def _shares_of_places(higher: NDArray[Any], tied: NDArray[Any], *, k_max: int) -> FloatArray:
    """``min(1, max(0, (k - higher) / tied))`` for k = 1..k_max, on a new last axis."""
    k = np.arange(1, k_max + 1)
    shares: FloatArray = np.clip((k - higher[..., None]) / tied[..., None], 0.0, 1.0)
    return shares


def _places_table(size: int, *, k_max: int) -> FloatArray:
    """:func:`_shares_of_places` of every member of a pool of ``size``, shaped
    (higher, tied - 1, k): ``higher`` from 0 to size - 1 above it, ``tied`` from 1 to
    size level with it (itself included)."""
    places = np.arange(size)
    return _shares_of_places(places[:, None], places[None, :] + 1, k_max=k_max)


def _one_per_group_pools(
    rng: np.random.Generator, codes: NDArray[np.intp], n_groups: int, n_rounds: int
) -> NDArray[np.intp]:
    """Each round, one candidate drawn uniformly from each group (column g is group g)."""
    pools = np.empty((n_rounds, n_groups), dtype=np.intp)
    for group in range(n_groups):
        members = np.flatnonzero(codes == group)
        pools[:, group] = members[rng.integers(0, members.size, size=n_rounds)]
    return pools


def _random_pools(
    rng: np.random.Generator, n_candidates: int, size: int, n_rounds: int
) -> NDArray[np.intp]:
    """Each round, ``size`` distinct candidates drawn uniformly from all of them."""
    if size * size <= n_candidates:
        # Few collisions expected: draw with replacement and redraw the rows
        # that repeat a candidate; accepted rows are uniform over distinct draws.
        pools = rng.integers(0, n_candidates, size=(n_rounds, size))
        while True:
            ordered = np.sort(pools, axis=1)
            repeats = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
            if repeats.size == 0:
                return pools
            pools[repeats] = rng.integers(0, n_candidates, size=(repeats.size, size))
    # Otherwise: the ``size`` smallest of n_candidates random keys, per round.
    chunk = max(1, _KEY_CELLS // n_candidates)
    pools = np.empty((n_rounds, size), dtype=np.intp)
    for start in range(0, n_rounds, chunk):
        keys = rng.random((min(chunk, n_rounds - start), n_candidates))
        pools[start : start + keys.shape[0]] = np.argpartition(keys, size - 1, axis=1)[:, :size]
    return pools


def simulate_selection(
    scores: ArrayLike,
    groups: ArrayLike,
    qualified: ArrayLike | None = None,
    *,
    k_max: int = 5,
    pool: str = "one_per_group",
    pool_size: int | None = None,
    n_rounds: int = 1800,
    seed: int = 0,
    strata: ArrayLike | None = None,
) -> SelectionResult:
    r"""Simulate top-k selection from candidate pools and report per-group rates.

    Each of ``n_rounds`` rounds draws a pool of candidates, ranks it by score
    and selects the top k, for every k = 1..k_max; candidates tied across
    the cut share the remaining places fractionally (see
    :func:`top_k_shares`). Pools are either

    - ``"one_per_group"``: one candidate drawn uniformly from each group, as
      in the resume-screening audit (1,800 rounds in the paper); or
    - ``"random"``: ``pool_size`` distinct candidates drawn uniformly from
      all candidates, as in the essay-grading audit (pools of 10).

    Over all rounds, the selection rate of group g at k and its true positive
    rate are

    .. math::

        \mathrm{SR}_k(g) = \frac{\sum_{\text{rounds}} \sum_{c \in \text{pool},\, c \in g}
            \mathrm{share}_k(c)}{\#\text{appearances of } g}, \qquad
        \mathrm{TPR}_k(g) = \frac{\sum \sum_{c \in g,\, c \text{ qualified}}
            \mathrm{share}_k(c)}{\#\text{qualified appearances of } g},

    from which :func:`dp_gap` and :func:`eo_gap` follow. Vectorised over
    rounds; the same seed gives the same result.

    Parameters
    ----------
    scores : array_like
        Score of each candidate; higher ranks first. ±inf are allowed.
    groups : array_like
        Group of each candidate.
    qualified : array_like of bool, optional
        Whether each candidate is qualified; needed for true positive rates.
    k_max : int
        Largest number of places, from 1 to the pool size.
    pool : {'one_per_group', 'random'}
        How pools are drawn.
    pool_size : int, optional
        Candidates per pool; required for, and only for, ``pool="random"``.
    n_rounds : int
        Pools to draw (in each stratum, when ``strata`` is given).
    seed : int
        Seed of the draws.
    strata : array_like, optional
        A stratum label per candidate (e.g. the job of a resume): pools are
        then drawn within each stratum, ``n_rounds`` per stratum, and never
        mix strata. Rates pool the appearances of all strata.

    Returns
    -------
    SelectionResult
        Selection and true positive rates per group and k, with the counts
        behind them.

    Raises
    ------
    ValueError
        On NaN scores, mismatched lengths, an invalid option, a group with no
        qualified candidate (when ``qualified`` is given), a group missing
        from a stratum (one-per-group pools), or a group that no random pool
        happened to include.

    References
    ----------
    Chen, Ji & Evans, "The Mismeasure of Man and Models: Evaluating
    Allocational Harms in Large Language Models", 2024; Cyberey, Ji
    & Evans, "Do Prevalent Bias Metrics Capture Allocational Harms from
    LLMs?", 2025.
    """
    check_choice(pool, "pool", _POOLS)
    n_rounds = check_int(n_rounds, "n_rounds", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    values = as_float_array(scores, "scores")
    labels = as_label_array(groups, "groups")
    check_same_length(scores=values, groups=labels)
    is_qualified = None
    if qualified is not None:
        is_qualified = as_bool_array(qualified, "qualified")
        check_same_length(scores=values, qualified=is_qualified)
    codes, group_ids = pd.factorize(labels)
    n_groups = len(group_ids)
    if is_qualified is not None:
        _require_qualified(codes, is_qualified, group_ids)

    members = _strata_members(strata, values.size)
    if pool == "one_per_group":
        if pool_size is not None:
            raise ValueError(
                "pool_size applies only to pool='random'; "
                "one_per_group pools hold one candidate per group"
            )
        size = n_groups
    else:
        if pool_size is None:
            raise ValueError("pool='random' needs pool_size, the number of candidates per pool")
        smallest = min(indices.size for _, indices in members)
        size = check_int(pool_size, "pool_size", minimum=1, maximum=smallest)
    k_max = check_int(k_max, "k_max", minimum=1, maximum=size)

    rng = np.random.default_rng(seed)
    pools = np.concatenate(
        [
            _draw_pools(rng, stratum, indices, codes, group_ids, pool, size, n_rounds)
            for stratum, indices in members
        ]
    )
    return _selection_result(
        values, codes, group_ids, is_qualified, pools, k_max=k_max, pool=pool,
        n_rounds=n_rounds, seed=seed, n_strata=len(members),
    )  # fmt: skip


def _strata_members(
    strata: ArrayLike | None, n_candidates: int
) -> list[tuple[Hashable, NDArray[np.intp]]]:
    """The candidates of each stratum (one stratum of everyone when ``strata`` is None)."""
    if strata is None:
        return [(None, np.arange(n_candidates))]
    labels = as_label_array(strata, "strata")
    if labels.size != n_candidates:
        raise ValueError(
            f"strata must have one label per score, got {labels.size} for {n_candidates}"
        )
    codes, uniques = pd.factorize(labels)
    return [(uniques[code], np.flatnonzero(codes == code)) for code in range(len(uniques))]


def _draw_pools(
    rng: np.random.Generator,
    stratum: Hashable,
    indices: NDArray[np.intp],
    codes: NDArray[np.intp],
    group_ids: Any,
    pool: str,
    size: int,
    n_rounds: int,
) -> NDArray[np.intp]:
    """``n_rounds`` pools of candidate indices drawn within one stratum."""
    if pool == "random":
        return indices[_random_pools(rng, indices.size, size, n_rounds)]
    local_codes = codes[indices]
    present = np.bincount(local_codes, minlength=len(group_ids))
    if (present == 0).any():
        missing = group_ids[int(np.argmax(present == 0))]
        where = "" if stratum is None else f" in stratum {stratum!r}"
        raise ValueError(f"group {missing!r} has no candidate{where}, so no pool can hold one")
    return indices[_one_per_group_pools(rng, local_codes, len(group_ids), n_rounds)]


def _selection_result(
    values: FloatArray,
    codes: NDArray[np.intp],
    group_ids: Any,
    is_qualified: NDArray[np.bool_] | None,
    pools: NDArray[np.intp],
    *,
    k_max: int,
    pool: str,
    n_rounds: int,
    seed: int,
    n_strata: int,
) -> SelectionResult:
    """Per-group selection and true positive rates of top-k selection from ``pools``."""
    n_groups = len(group_ids)
    shares = top_k_shares(values[pools], k_max=k_max).reshape(-1, k_max)
    member_groups = codes[pools].ravel()
    appearances = np.bincount(member_groups, minlength=n_groups)
    _require_appearances(appearances, group_ids, "candidate")
    index = pd.Index(group_ids, name="group")
    columns = pd.RangeIndex(1, k_max + 1, name="k")
    selection_rate = _rates(member_groups, shares, appearances, n_groups)

    tpr = qualified_appearances = None
    if is_qualified is not None:
        member_qualified = is_qualified[pools].ravel()
        qualified_counts = np.bincount(member_groups[member_qualified], minlength=n_groups)
        _require_appearances(qualified_counts, group_ids, "qualified candidate")
        rates = _rates(
            member_groups[member_qualified], shares[member_qualified], qualified_counts, n_groups
        )
        tpr = pd.DataFrame(rates, index=index, columns=columns)
        qualified_appearances = pd.Series(
            qualified_counts, index=index, name="qualified_appearances"
        )
    return SelectionResult(
        selection_rate=pd.DataFrame(selection_rate, index=index, columns=columns),
        true_positive_rate=tpr,
        appearances=pd.Series(appearances, index=index, name="appearances"),
        qualified_appearances=qualified_appearances,
        pool=pool,
        pool_size=pools.shape[1],
        n_rounds=n_rounds,
        seed=seed,
        n_strata=n_strata,
    )


def _rates(
    member_groups: NDArray[np.intp],
    shares: FloatArray,
    counts: NDArray[np.intp],
    n_groups: int,
) -> FloatArray:
    selected = np.stack(
        [
            np.bincount(member_groups, shares[:, k], minlength=n_groups)
            for k in range(shares.shape[1])
        ],
        axis=1,
    )
    return selected / counts[:, None]


def _require_qualified(
    codes: NDArray[np.intp], is_qualified: NDArray[np.bool_], group_ids: Any
) -> None:
    counts = np.bincount(codes[is_qualified], minlength=len(group_ids))
    if (counts == 0).any():
        missing = group_ids[int(np.argmax(counts == 0))]
        raise ValueError(
            f"group {missing!r} has no qualified candidate, so its true positive rate is "
            "undefined; pass qualified=None to skip true positive rates"
        )


def _require_appearances(counts: NDArray[np.intp], group_ids: Any, what: str) -> None:
    if (counts == 0).any():
        missing = group_ids[int(np.argmax(counts == 0))]
        raise ValueError(
            f"no {what} of group {missing!r} appeared in any pool, so its rate is undefined; "
            "increase n_rounds or pool_size"
        )


def select_in_pools(
    scores: ArrayLike,
    groups: ArrayLike,
    pools: ArrayLike,
    qualified: ArrayLike | None = None,
    *,
    k_max: int = 5,
) -> SelectionResult:
    r"""Top-k selection in pools fixed in advance, with the rates of :func:`simulate_selection`.

    For scores that are only comparable within a pool, such as the wins of
    each candidate against the others of its pool in a pairwise audit, the
    pools the candidates were compared in are the pools they are selected
    from. Each pool ranks its members and selects the top k, ties at the cut
    sharing places fractionally (:func:`top_k_shares`); selection and true
    positive rates per group follow as in :func:`simulate_selection`.

    Parameters
    ----------
    scores : array_like
        Score of each candidate appearance.
    groups : array_like
        Group of each.
    pools : array_like
        Pool label of each; every pool must have the same number of members.
    qualified : array_like of bool, optional
        Whether each is qualified; needed for true positive rates.
    k_max : int
        Largest number of places, from 1 to the pool size.

    Returns
    -------
    SelectionResult
        With ``pool="given"`` and ``n_rounds`` the number of pools.

    Raises
    ------
    ValueError
        On NaN scores, mismatched lengths, pools of different sizes, or a
        group (or its qualified members) absent from every pool.

    References
    ----------
    Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024.
    """
    values = as_float_array(scores, "scores")
    labels = as_label_array(groups, "groups")
    pool_labels = as_label_array(pools, "pools")
    check_same_length(scores=values, groups=labels, pools=pool_labels)
    is_qualified = None
    if qualified is not None:
        is_qualified = as_bool_array(qualified, "qualified")
        check_same_length(scores=values, qualified=is_qualified)
    codes, group_ids = pd.factorize(labels)
    matrix = _pool_matrix(pool_labels)
    k_max = check_int(k_max, "k_max", minimum=1, maximum=matrix.shape[1])
    return _selection_result(
        values, codes, group_ids, is_qualified, matrix, k_max=k_max, pool="given",
        n_rounds=matrix.shape[0], seed=0, n_strata=1,
    )  # fmt: skip


def _pool_matrix(pool_labels: NDArray[Any]) -> NDArray[np.intp]:
    """Candidate indices of each pool, one row per pool (in order of first appearance)."""
    codes, uniques = pd.factorize(pool_labels)
    sizes = np.bincount(codes)
    if (sizes != sizes[0]).any():
        odd = uniques[int(np.argmax(sizes != sizes[0]))]
        raise ValueError(
            f"every pool must have the same size: pool {odd!r} has "
            f"{sizes[int(np.argmax(sizes != sizes[0]))]} members, pool {uniques[0]!r} {sizes[0]}"
        )
    order = np.argsort(codes, kind="stable")
    return order.reshape(len(uniques), int(sizes[0]))
