"""Position bias and consistency of rankings: the orders a pool is shown in (a cyclic Latin
square), the share of first choices by slot with its normalised entropy (Iourovitski,
2024) and Pearson's χ² test of equal slots, and the agreement of one pool's rankings
across its orders (Kendall's coefficient of concordance W, Kendall & Babington Smith,
"The problem of m rankings", Ann. Math. Stat. 10, 1939).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from biasaudit.metrics._grade import SlotTest, slot_test
from biasaudit.metrics._impact import _bound
from biasaudit.metrics._resampling import MIN_UNITS, cluster_draws
from biasaudit.metrics._validate import check_int

__all__ = ["kendall_w", "latin_square"]


def latin_square(size: int) -> list[list[int]]:
    """``size`` orders of ``size`` slots in which every position index stands in every
    slot exactly once (the cyclic Latin square; for even sizes also balanced for
    first-order carry-over: Williams, "Experimental designs balanced for the
    estimation of residual effects of treatments", Aust. J. Sci. Res. 2, 1949).

    Row ``r`` lists, slot by slot, which of the pool's candidates is shown there.
    """
    check_int(size, "size", minimum=1)
    if size % 2 == 1:
        return [[(r + s) % size for s in range(size)] for r in range(size)]
    # Williams' design: 0, 1, n-1, 2, n-2, ... shifted by r.
    first = [0]
    low, high = 1, size - 1
    while len(first) < size:
        first.append(low)
        low += 1
        if len(first) < size:
            first.append(high)
            high -= 1
    return [[(value + r) % size for value in first] for r in range(size)]


def kendall_w(ranks: NDArray[np.float64]) -> float:
    """Kendall's W of ``ranks`` shaped (raters, objects), each row a ranking 1..n
    without ties: 12 S / (m² (n³ - n)), S the sum of squared deviations of the
    objects' rank sums from their mean (Kendall & Babington Smith, 1939)."""
    m, n = (int(size) for size in ranks.shape)
    if m < 2 or n < 2:
        return math.nan
    sums = ranks.sum(axis=0)
    spread = float(((sums - sums.mean()) ** 2).sum())
    return 12.0 * spread / float(m * m * (n**3 - n))


def _normal(
    estimate: float, draws: NDArray[np.float64], z: float, low: float, high: float
) -> tuple[float, float] | None:
    usable = draws[~np.isnan(draws)]
    if usable.size < 20 or math.isnan(estimate):
        return None
    spread = z * float(np.std(usable, ddof=1))
    return max(low, estimate - spread), min(high, estimate + spread)


def _slots(
    data: pd.DataFrame,
    first_weight: NDArray[np.float64],
    pools: NDArray[np.str_],
    rng: np.random.Generator,
    replicates: int,
    z: float,
) -> tuple[pd.DataFrame, float | None, tuple[float, float] | None, SlotTest | None]:
    # Each row counts as its share of its answer's first choice: 1 or 0 for rankings,
    # the chance of being put first where that was read from logprobs.
    first = first_weight > 0
    slots = data["slot"].to_numpy(int)
    n_slots = int(data.groupby("answer")["slot"].max().max())
    answer_pool = pools[first]
    first_slots = slots[first]
    weights = first_weight[first]
    counts = np.bincount(first_slots - 1, weights=weights, minlength=n_slots)
    n = counts.sum()
    if n == 0:
        return pd.DataFrame(), None, None, None
    codes, pool_draws = cluster_draws(answer_pool, rng, replicates)
    few_pools = pool_draws.shape[1] < MIN_UNITS  # one pool: no interval over pools
    # Per replicate, answers choosing each slot first: a pool's answers count as often
    # as the pool was drawn.
    per_pool = np.zeros((pool_draws.shape[1], n_slots))
    np.add.at(per_pool, (codes, first_slots - 1), weights)
    replicate_counts = pool_draws @ per_pool
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = replicate_counts / replicate_counts.sum(axis=1, keepdims=True)
    rows = []
    for slot in range(n_slots):
        rate = counts[slot] / n
        bounds = _normal(rate, shares[:, slot], z, 0.0, 1.0) if not few_pools else None
        rows.append({"slot": slot + 1, "rate": rate, "low": _bound(bounds, 0),
                     "high": _bound(bounds, 1), "n": int(n)})  # fmt: skip
    entropy = _normalised_entropy(counts / n)
    entropies = np.array([_normalised_entropy(row) for row in shares])
    entropy_ci = None if few_pools else _normal(entropy, entropies, z, 0.0, 1.0)
    return pd.DataFrame(rows), entropy, entropy_ci, slot_test(counts)


def _normalised_entropy(shares: NDArray[np.float64]) -> float:
    if shares.size < 2 or np.isnan(shares).any():
        return math.nan
    used = shares[shares > 0]
    return float(-(used * np.log(used)).sum() / math.log(shares.size))


def _concordance(
    data: pd.DataFrame,
    rank: NDArray[np.float64],
    pools: NDArray[np.str_],
    rng: np.random.Generator,
    replicates: int,
    z: float,
) -> tuple[
    float | None, tuple[float, float] | None, int, float | None, tuple[float, float] | None, int
]:
    # Per pool (in the order pools first appear), a table of answers by candidates: the
    # candidate's rank in the answer (the mean where it is shown twice), in numpy; a
    # pandas pivot per pool took most of a listwise audit's statistics.
    pool_codes = pd.factorize(pools)[0]
    answers = pd.factorize(data["answer"].to_numpy())[0]
    candidates = pd.factorize(_candidates(data))[0]
    order = np.argsort(pool_codes, kind="stable")
    bounds = np.flatnonzero(np.diff(pool_codes[order])) + 1
    w_values, change_values = [], []
    for rows in np.split(order, bounds) if order.size else []:
        pool_rank = rank[rows]
        tops = candidates[rows][pool_rank == 1]
        if tops.size >= 2:
            counts = np.unique(tops, return_counts=True)[1].astype(float)
            m = float(counts.sum())
            change_values.append(1.0 - float((counts * (counts - 1)).sum()) / (m * (m - 1)))
        shown = ~np.isnan(pool_rank)
        answer = np.unique(answers[rows][shown], return_inverse=True)[1]
        candidate = np.unique(candidates[rows][shown], return_inverse=True)[1]
        if answer.size == 0:
            continue
        size = (int(answer.max()) + 1, int(candidate.max()) + 1)
        total, times = np.zeros(size), np.zeros(size)
        np.add.at(total, (answer, candidate), pool_rank[shown])
        np.add.at(times, (answer, candidate), 1.0)
        with np.errstate(invalid="ignore"):
            table = total / times  # NaN where an answer left a candidate out
        full = table[~np.isnan(table).any(axis=1)]
        complete = full[(np.sort(full, axis=1) == np.arange(1, size[1] + 1)).all(axis=1)]
        if len(complete) >= 2:
            w_values.append(kendall_w(complete))
    w = _mean_with_interval(np.array(w_values), rng, replicates, z)
    change = _mean_with_interval(np.array(change_values), rng, replicates, z)
    return w[0], w[1], len(w_values), change[0], change[1], len(change_values)


def _candidates(data: pd.DataFrame) -> NDArray[np.object_]:
    """Who a row shows: its ``candidate``, else its name and item, else its group."""
    if "candidate" in data.columns:
        return np.asarray(data["candidate"].astype(str), dtype=object)
    parts = [data[c].astype(str) for c in ("name", "item") if c in data.columns]
    if not parts:
        parts = [data["group"].astype(str)]
    joined = parts[0]
    for part in parts[1:]:
        joined = joined + "|" + part
    return np.asarray(joined, dtype=object)


def _mean_with_interval(
    values: NDArray[np.float64], rng: np.random.Generator, replicates: int, z: float
) -> tuple[float | None, tuple[float, float] | None]:
    if values.size == 0:
        return None, None
    mean = float(values.mean())
    if values.size < MIN_UNITS:
        return mean, None
    draws = values[rng.integers(0, values.size, size=(replicates, max(values.size - 1, 1)))]
    return mean, _normal(mean, draws.mean(axis=1), z, 0.0, 1.0)
