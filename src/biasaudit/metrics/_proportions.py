"""Proportions of individuals and ratios of two of them, one at a time and as a family.

A rate is a count of individuals over the individuals assessed; an impact ratio is
one rate over another. Three intervals are written here once:

- **Wilson's score interval** of one proportion (E. B. Wilson, "Probable inference,
  the law of succession, and statistical inference", JASA 22, 1927);
- **Katz's log interval** of a ratio of two independent proportions (Katz, Baptista,
  Azen & Pike, "Obtaining confidence intervals for the risk ratio in cohort studies",
  Biometrics 34, 1978), kept as a building block;
- **Koopman's score interval** of the same ratio (P. A. R. Koopman, "Confidence
  intervals for the ratio of two binomial proportions", Biometrics 40, 1984): the
  ratios θ that the score test of p1 = θ·p2 does not reject, with the restricted
  maximum-likelihood rates of Miettinen & Nurminen ("Comparative analysis of two
  rates", Statistics in Medicine 4, 1985) without their n/(n - 1) factor. Unlike
  Katz's, it does not treat a small count at 0 or at n as nearly certain: a
  reference of 2 selected out of 2 leaves its ratios wide.

:func:`pairwise_critical_value` makes the score intervals of many pairs hold
**together**: the critical value is the quantile of the largest of the pairs' score
statistics (a max-T procedure: Y. Hochberg & A. C. Tamhane, *Multiple Comparison
Procedures*, Wiley 1987, ch. 3; P. H. Westfall & S. S. Young, *Resampling-Based
Multiple Testing*, Wiley 1993, for its permutation form), under a permutation null
of the whole table, so that it holds at small counts too. Categories may overlap (a
sex and an intersectional category share people): each permutation deals the
outcomes to individuals, whatever categories they are in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from biasaudit.metrics._small_samples import critical_value

__all__ = [
    "impact_ratio_interval",
    "pairwise_critical_value",
    "ratio_score_interval",
    "wilson_interval",
]

_PERMUTATIONS = 2_000
"""Permutations behind a critical value: the 95% quantile's own error is about 0.02."""


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``successes / n`` (n > 0)."""
    z = critical_value(confidence)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def impact_ratio_interval(
    successes: int, n: int, top_successes: int, top_n: int, confidence: float = 0.95
) -> tuple[float, float] | None:
    """Katz's log interval of ``(successes / n) / (top_successes / top_n)``; None where
    the reference selected no one (the ratio is undefined). A count of 0 or of n gets
    half a success (and a trial more where all succeeded), so that its log is finite."""
    if top_successes == 0:
        return None
    z = critical_value(confidence)
    x, m = _corrected(successes, n)
    y, k = _corrected(top_successes, top_n)
    centre = math.log((x / m) / (y / k))
    spread = z * math.sqrt(1 / x - 1 / m + 1 / y - 1 / k)
    return math.exp(centre - spread), math.exp(centre + spread)


def _corrected(successes: int, n: int) -> tuple[float, float]:
    if successes in (0, n):
        return successes + 0.5, n + 0.5 if successes == 0 else n + 1.0
    return float(successes), float(n)


def _score_statistic(x1: int, n1: int, x2: int, n2: int, theta: float) -> float:
    """Koopman's chi-square statistic of p1 = ``theta`` p2 (one degree of freedom)."""
    a = (n1 + n2) * theta
    b = -(n1 * theta + x1 + n2 + x2 * theta)
    c = x1 + x2
    p2 = (-b - math.sqrt(max(b * b - 4 * a * c, 0.0))) / (2 * a)
    p1 = min(theta * p2, 1.0)
    difference = x1 / n1 - theta * x2 / n2
    variance = p1 * (1 - p1) / n1 + theta * theta * p2 * (1 - p2) / n2
    if variance <= 0.0:
        return 0.0 if abs(difference) < 1e-15 else math.inf
    return difference * difference / variance


def ratio_score_interval(
    x1: int, n1: int, x2: int, n2: int, *, z: float = 1.959963984540054
) -> tuple[float, float]:
    """Koopman's score interval of ``(x1 / n1) / (x2 / n2)`` at critical value ``z``.

    The bounds are the ratios θ where the score statistic of p1 = θ·p2 equals
    ``z**2`` (Koopman 1984), found on either side of the estimate by bisection
    on log θ. The lower bound is 0 where ``x1`` is 0; the upper is infinite where
    ``x2`` is 0 (and the interval is (0, inf) where both are).

    Examples
    --------
    >>> low, high = ratio_score_interval(15, 40, 18, 28)
    >>> round(low, 4), round(high, 4)
    (0.3545, 0.9473)
    """
    if not (0 <= x1 <= n1 and 0 <= x2 <= n2 and n1 > 0 and n2 > 0):
        raise ValueError("counts must lie in [0, n] with n > 0")
    if x1 == 0 and x2 == 0:
        return 0.0, math.inf
    target = z * z
    if x1 == 0:
        start = 0.5 / n1 / (x2 / n2)
    elif x2 == 0:
        start = (x1 / n1) / (0.5 / n2)
    else:
        start = (x1 / n1) / (x2 / n2)
    low = 0.0 if x1 == 0 else _bound(x1, n1, x2, n2, start, target, downward=True)
    high = math.inf if x2 == 0 else _bound(x1, n1, x2, n2, start, target, downward=False)
    return low, high


def _bound(x1: int, n1: int, x2: int, n2: int, start: float, target: float, *,
           downward: bool) -> float:  # fmt: skip
    """The θ beyond ``start`` (below it, or above) where the statistic reaches
    ``target``: bracket by doubling on the log scale, then bisect."""
    inside, step = math.log(start), -1.0 if downward else 1.0
    outside = inside + step
    while _score_statistic(x1, n1, x2, n2, math.exp(outside)) < target:
        inside, outside = outside, outside + step
        step *= 2
        if abs(outside) > 700:  # beyond any ratio of counts below 1e300
            return 0.0 if downward else math.inf
    for _ in range(100):
        middle = (inside + outside) / 2
        if _score_statistic(x1, n1, x2, n2, math.exp(middle)) < target:
            inside = middle
        else:
            outside = middle
        if abs(outside - inside) < 1e-12:
            break
    return math.exp((inside + outside) / 2)


def pairwise_critical_value(
    members: NDArray[np.bool_],
    families: Sequence[Sequence[int]],
    outcome: NDArray[np.bool_],
    *,
    confidence: float = 0.95,
    permutations: int = _PERMUTATIONS,
    seed: int = 0,
) -> float:
    """The critical value that makes every pair's score interval hold together at
    ``confidence`` when no category differs: a permutation null of the whole table.

    Each permutation deals the outcomes out afresh over the individuals (the
    categories' sizes and the number selected kept), and takes the largest, over every
    pair of the family, of the pair's score statistic of equal rates (Koopman's at θ =
    1, the 2 x 2 table's Pearson statistic: the pooled rate's variance). The value is
    the square root of that largest statistic's ``confidence`` quantile. A pair's score
    interval at it excludes 1 exactly when its statistic exceeds it, so data with no
    difference put any interval of the family beyond 1 (and a fortiori under 0.8) in
    at most 1 - ``confidence`` of tables, however small the counts (the normal
    approximation's critical value, from the sizes alone, let a summary of 200
    people with 10 selected call something in one of six). A family of one pair, or
    nobody selected (or everybody), gets the normal quantile.

    Parameters
    ----------
    members:
        One row per individual, one column per category: whether the individual
        belongs to it.
    families:
        The columns compared with one another, a list per dimension: every pair
        within a list is one comparison of the family.
    outcome:
        Whether each individual was selected.
    """
    pairs = [(a, b) for family in families for i, a in enumerate(family) for b in family[i + 1 :]]
    chosen = np.asarray(outcome, dtype=bool)
    if len(pairs) <= 1 or chosen.all() or not chosen.any():
        return critical_value(confidence)
    columns = sorted({c for pair in pairs for c in pair})
    used = np.asarray(members, dtype=bool)[:, columns]
    # Individuals of the same categories are exchangeable: dealing the outcomes over
    # them is a multivariate hypergeometric draw of each cell's count of the selected.
    bits = np.int64(1) << np.arange(used.shape[1], dtype=np.int64)
    codes, cell_sizes = np.unique(used.astype(np.int64) @ bits, return_counts=True)
    cells = (codes[:, None] & bits) != 0
    sizes = used.sum(axis=0).astype(float)
    index = {c: i for i, c in enumerate(columns)}
    first = np.array([index[a] for a, _ in pairs])
    second = np.array([index[b] for _, b in pairs])
    rng = np.random.default_rng(seed)
    dealt = rng.multivariate_hypergeometric(cell_sizes, int(chosen.sum()), size=permutations)
    counts = dealt.astype(float) @ cells.astype(float)
    largest = _largest_statistic(counts, sizes, first, second)
    return float(np.sqrt(np.quantile(largest, confidence)))


def _largest_statistic(
    counts: NDArray[np.float64], sizes: NDArray[np.float64], first: NDArray[np.intp],
    second: NDArray[np.intp],
) -> NDArray[np.float64]:  # fmt: skip
    """Per row of ``counts`` (selected per category), the largest over the pairs of
    ``(p1 - p2)**2 / (p (1 - p) (1/n1 + 1/n2))``, p the pair's pooled rate (0 where
    the pair selected no one, or everyone)."""
    x1, x2 = counts[:, first], counts[:, second]
    n1, n2 = sizes[first], sizes[second]
    pooled = (x1 + x2) / (n1 + n2)
    spread = pooled * (1 - pooled) * (1 / n1 + 1 / n2)
    with np.errstate(invalid="ignore", divide="ignore"):
        statistic = (x1 / n1 - x2 / n2) ** 2 / spread
    found: NDArray[np.float64] = np.where(spread > 0, statistic, 0.0).max(axis=1)
    return found
