"""Rank statistics of two groups' scores: RABBI (the rank-biserial correlation), its
bootstrap interval and its tests (Mann-Whitney), as allocation's pointwise figures use
them; the distances it is compared with are in :mod:`biasaudit.metrics._distances`.

Chen, Ji & Evans, "The Mismeasure of Man and Models: Evaluating Allocational
Harms in Large Language Models" (arXiv:2408.01285), published as Cyberey, Ji &
Evans, "Do Prevalent Bias Metrics Capture Allocational Harms from LLMs?"
(Insights from Negative Results in NLP, 2025).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from biasaudit.metrics._small_samples import floor_p
from biasaudit.metrics._validate import (
    FloatArray,
    as_float_array,
    check_choice,
    check_confidence,
    check_int,
)

_ALTERNATIVES = ("two-sided", "greater", "less")

# Bootstrap replicates are processed in blocks of about this many cells per
# array: small enough for a block to stay in the CPU cache (two to three times
# faster than blocks the size of memory), and it bounds memory whatever the
# sample sizes.
_BLOCK_CELLS = 150_000

# scipy's Mann-Whitney U test uses its exact null distribution below this
# size (when there are no ties), the normal approximation otherwise.
_EXACT_MAX_SIZE = 8

Label = TypeVar("Label", bound=Hashable)


@dataclass(frozen=True)
class RankBiserialResult:
    """RABBI of group A against reference group B with its test and interval.

    Attributes
    ----------
    r : float
        Rank-biserial correlation in [-1, 1]; positive when A outscores B.
    p_value : float
        Mann-Whitney U test p-value for the chosen alternative.
    ci_low, ci_high : float or None
        Percentile bootstrap interval for ``r``; None when ``n_bootstrap`` is None.
    n_a, n_b : int
        Sample sizes.
    u_statistic : float
        Mann-Whitney U of A (pairs A wins, ties counted as half).
    confidence : float
        Level of the interval.
    n_bootstrap : int or None
        Bootstrap replicates behind the interval.
    """

    r: float
    p_value: float
    ci_low: float | None
    ci_high: float | None
    n_a: int
    n_b: int
    u_statistic: float
    confidence: float
    n_bootstrap: int | None


def _sorted_positions(
    a: FloatArray, b_sorted: FloatArray
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """For each a_i, how many b are < a_i and how many are <= a_i."""
    return (
        np.searchsorted(b_sorted, a, side="left"),
        np.searchsorted(b_sorted, a, side="right"),
    )


def _pair_sign_sum(a: FloatArray, b_sorted: FloatArray) -> int:
    """Sum over all pairs of sign(a_i - b_j), exactly, in O((n_a + n_b) log n_b)."""
    a_sorted = np.sort(a)  # sorted queries make searchsorted cache-friendly
    below, at_or_below = _sorted_positions(a_sorted, b_sorted)
    # sign sum = #(b < a) - #(b > a) = below - (n_b - at_or_below), summed over a.
    return int(below.sum(dtype=np.int64) + at_or_below.sum(dtype=np.int64)) - a.size * b_sorted.size


def rank_biserial(a: ArrayLike, b: ArrayLike) -> float:
    r"""Rank-allocational-based bias index (RABBI) of group A against reference B.

    .. math::

        \mathrm{RABBI}(A, B) = \frac{1}{|A \times B|}
            \sum_{(a, b) \in A \times B} \big[\mathbb{1}(s_a > s_b) - \mathbb{1}(s_a < s_b)\big]
            = \frac{2U_A}{n_A n_B} - 1,

    the rank-biserial correlation, where :math:`U_A` is the Mann-Whitney U
    statistic of A with ties counted as half a win. Tied pairs contribute 0.

    Computed exactly in integer arithmetic from the sorted scores, in
    O(n log n) time: identical to the loop over all pairs, ties included.

    Parameters
    ----------
    a : array_like
        Scores of the candidates of group A (the group audited).
    b : array_like
        Scores of the candidates of reference group B.

    Returns
    -------
    float
        RABBI in [-1, 1]. Negative values mean group A is ranked below B, so a
        top-k selection would favour B.

    Raises
    ------
    ValueError
        If either group is empty or contains NaN.

    References
    ----------
    Chen, Ji & Evans, "The Mismeasure of Man and Models: Evaluating Allocational
    Harms in Large Language Models", 2024; Cyberey, Ji & Evans,
    "Do Prevalent Bias Metrics Capture Allocational Harms from LLMs?", 2025.
    """
    a_scores = as_float_array(a, "a")
    b_scores = as_float_array(b, "b")
    return _pair_sign_sum(a_scores, np.sort(b_scores)) / (a_scores.size * b_scores.size)


def _bootstrap_stream(seed: int, which: int) -> np.random.Generator:
    """Generator ``which`` of a bootstrap: 0 resamples the reference group, 1 a group.

    Its integer draws continue the same sequence however they are split into
    calls, so replicates do not depend on the block size.
    """
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(which,)))


def _bootstrap_rank_biserial(
    samples: Mapping[Label, FloatArray], b_sorted: FloatArray, *, n_bootstrap: int, seed: int
) -> dict[Label, FloatArray]:
    """RABBI of each sample against the reference on ``n_bootstrap`` resamples.

    Each replicate resamples every sample and the reference with replacement,
    separately. The reference is resampled once per replicate for all the
    samples; every sample is resampled from a generator seeded alike, so a
    sample's replicates are the same whether it is tested alone or with
    others (samples of one size share their multiplicities, drawn once).
    """
    n_b = b_sorted.size
    positions = {name: _sorted_positions(np.sort(a), b_sorted) for name, a in samples.items()}
    sizes = sorted({a.size for a in samples.values()})
    reference_stream = _bootstrap_stream(seed, 0)
    sample_streams = {size: _bootstrap_stream(seed, 1) for size in sizes}
    block = max(1, _BLOCK_CELLS // max(n_b, sizes[-1]))
    replicates = {name: np.empty(n_bootstrap) for name in samples}
    for start in range(0, n_bootstrap, block):
        size = min(block, n_bootstrap - start)
        cumulative_b = _cumulative(
            _multiplicities(reference_stream, n=n_b, replicates=size), np.int64
        )
        weights = {
            n: _multiplicities(stream, n=n, replicates=size) for n, stream in sample_streams.items()
        }
        for name, (below, at_or_below) in positions.items():
            sign_sums = _weighted_sign_sums(below, at_or_below, weights[below.size], cumulative_b)
            replicates[name][start : start + size] = sign_sums / (below.size * n_b)
    return replicates


def _cumulative(weights: NDArray[Any], dtype: type = np.float64) -> NDArray[Any]:
    """Per row r, ``[0, w[r, 0], w[r, 0] + w[r, 1], ...]``: the weight (the resampled
    count) below each position."""
    found = np.zeros((weights.shape[0], weights.shape[1] + 1), dtype=dtype)
    np.cumsum(weights, axis=1, out=found[:, 1:])
    return found


def _weighted_sign_sums(
    below: NDArray[np.intp],
    at_or_below: NDArray[np.intp],
    weights_a: NDArray[Any],
    cumulative_b: NDArray[Any],
) -> NDArray[Any]:
    """Σ_ij w_a[r, i] w_b[r, j] sign(a_i - b_j) for each row r, b in sorted order: the
    numerator of RABBI, for the public bootstrap (integer counts) and the unit-level
    figures (whole-number weights as floats, exact below 2^53) alike.

    ``cumulative_b`` is :func:`_cumulative` of ``w_b``. A resample is a
    vector of multiplicities over the original scores. With b sorted once, the
    resampled count of b below (or at most) a_i is a cumulative sum of b's
    multiplicities read at a fixed position, so each replicate costs
    O(n_a + n_b) and needs no sorting.
    """
    # sign(a_i - b) summed over the resampled b: #(b < a_i) - #(b > a_i)
    # = C[below_i] + C[at_or_below_i] - C[n_b], C the cumulative counts.
    outside = cumulative_b[:, -1] * weights_a.sum(axis=1)
    counted = np.take(cumulative_b, below, axis=1)
    if np.array_equal(below, at_or_below):  # no a_i ties with any b: both reads agree
        sums = 2 * np.einsum("ij,ij->i", weights_a, counted) - outside
    else:
        counted = counted + np.take(cumulative_b, at_or_below, axis=1)
        sums = np.einsum("ij,ij->i", weights_a, counted) - outside
    found: NDArray[Any] = sums
    return found


def _multiplicities(rng: np.random.Generator, *, n: int, replicates: int) -> NDArray[np.int64]:
    """How often each of ``n`` items is drawn, in ``replicates`` resamples of size ``n``."""
    draws = rng.integers(0, n, size=(replicates, n))
    draws += np.arange(replicates)[:, None] * n
    return np.bincount(draws.ravel(), minlength=replicates * n).reshape(replicates, n)


def _mann_whitney_p(
    a: FloatArray,
    b_sorted: FloatArray,
    u_statistic: float,
    alternative: str,
    method: str = "auto",
) -> float:
    """The p-value of ``scipy.stats.mannwhitneyu(a, b, alternative=...)``, method 'auto'.

    The normal approximation (with tie and continuity corrections) is
    computed here, as scipy computes it, so that most audits need not import
    scipy.stats (a large import); small samples without ties go to scipy's
    exact null distribution.
    """
    n_a, n_b = a.size, b_sorted.size
    tie_sizes = np.unique(np.concatenate([a, b_sorted]), return_counts=True)[1]
    if method == "auto" and min(n_a, n_b) <= _EXACT_MAX_SIZE and tie_sizes.max() == 1:
        from scipy import stats

        return floor_p(float(stats.mannwhitneyu(a, b_sorted, alternative=alternative).pvalue))
    u_other = n_a * n_b - u_statistic
    u, sides = {
        "greater": (u_statistic, 1),
        "less": (u_other, 1),
        "two-sided": (max(u_statistic, u_other), 2),
    }[alternative]
    n = n_a + n_b
    ties = tie_sizes.astype(float)
    tie_term = float(np.sum(ties**3 - ties))
    spread = math.sqrt(n_a * n_b / 12 * ((n + 1) - tie_term / (n * (n - 1))))
    z = (u - n_a * n_b / 2 - 0.5) / spread
    return min(floor_p(sides * 0.5 * math.erfc(z / math.sqrt(2))), 1.0)


def rank_biserial_test(
    a: ArrayLike,
    b: ArrayLike,
    *,
    alternative: str = "two-sided",
    n_bootstrap: int | None = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> RankBiserialResult:
    r"""RABBI with the Mann-Whitney U test and a bootstrap confidence interval.

    The point estimate is :func:`rank_biserial`,
    :math:`r = 2U_A/(n_A n_B) - 1`. The p-value is that of the Mann-Whitney U
    test (``scipy.stats.mannwhitneyu`` with its defaults: the exact null
    distribution for small samples without ties, otherwise the normal
    approximation with tie and continuity corrections). The interval is
    the percentile bootstrap: A and B are resampled with replacement,
    separately, ``n_bootstrap`` times, and the ``(1 ± confidence)/2``
    quantiles of the resampled RABBI are reported. A resample is drawn as the
    multiplicity of each score, so each replicate costs O(n_A + n_B) and
    needs no sorting.

    Parameters
    ----------
    a, b : array_like
        Scores of group A and of reference group B.
    alternative : {'two-sided', 'greater', 'less'}
        Alternative hypothesis of the U test; 'greater' means A tends to
        outscore B.
    n_bootstrap : int or None
        Bootstrap replicates (at least 100); None skips the interval.
    confidence : float
        Level of the interval, in (0, 1).
    seed : int
        Seed of the bootstrap; the same seed gives the same interval.

    Returns
    -------
    RankBiserialResult
        ``r``, ``p_value``, ``ci_low``, ``ci_high``, ``n_a``, ``n_b``,
        ``u_statistic``, ``confidence``, ``n_bootstrap``.

    Notes
    -----
    When every score in both groups is the same, ``r`` is 0 and the p-value
    is 1 (no evidence of a difference), where the normal approximation itself
    is undefined.

    References
    ----------
    Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024; Cyberey, Ji &
    Evans, "Do Prevalent Bias Metrics Capture Allocational Harms from LLMs?",
    2025. Mann & Whitney, Ann. Math. Statist. 18 (1947).
    """
    options = _test_options(alternative, n_bootstrap, confidence, seed)
    samples = {"a": as_float_array(a, "a")}
    return _rank_biserial_tests(samples, as_float_array(b, "b"), **options)["a"]


def mann_whitney_p(
    a: ArrayLike, b: ArrayLike, *, method: str = "auto", alternative: str = "two-sided"
) -> float:
    """The two-sided Mann-Whitney U p-value of A against B, as ``scipy.stats.mannwhitneyu``
    computes it: ``method="auto"`` (exact in small tie-free samples) or ``"asymptotic"``
    (always the normal approximation with tie and continuity corrections, as the
    authors' code asks; Chen, Ji & Evans, 2024)."""
    check_choice(method, "method", ("auto", "asymptotic"))
    check_choice(alternative, "alternative", _ALTERNATIVES)
    a_scores = as_float_array(a, "a", finite=True)
    b_sorted = np.sort(as_float_array(b, "b", finite=True))
    if a_scores.size == 0 or b_sorted.size == 0:
        raise ValueError("both samples need at least one score")
    if a_scores.min() == a_scores.max() == b_sorted[0] == b_sorted[-1]:
        return 1.0
    u_statistic = (_pair_sign_sum(a_scores, b_sorted) + a_scores.size * b_sorted.size) / 2
    return _mann_whitney_p(a_scores, b_sorted, u_statistic, alternative, method)


def rank_biserial_tests(
    groups: Mapping[Label, ArrayLike],
    reference: ArrayLike,
    *,
    alternative: str = "two-sided",
    n_bootstrap: int | None = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[Label, RankBiserialResult]:
    r""":func:`rank_biserial_test` of several groups against one reference group.

    Each result equals ``rank_biserial_test(groups[g], reference, ...)`` with
    the same options, interval included; computing them together is faster
    because every bootstrap replicate resamples the reference once for all
    the groups (and groups of one size share their resampling draws, as
    their separate tests with one seed would).

    Parameters
    ----------
    groups : mapping
        Scores of each group audited, by group label.
    reference : array_like
        Scores of the reference group.
    alternative, n_bootstrap, confidence, seed :
        As for :func:`rank_biserial_test`.

    Returns
    -------
    dict
        A :class:`RankBiserialResult` per group, in the order of ``groups``.

    References
    ----------
    Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024; Cyberey, Ji &
    Evans, "Do Prevalent Bias Metrics Capture Allocational Harms from LLMs?",
    2025.
    """
    options = _test_options(alternative, n_bootstrap, confidence, seed)
    samples = {name: as_float_array(a, f"groups[{name!r}]") for name, a in groups.items()}
    return _rank_biserial_tests(samples, as_float_array(reference, "reference"), **options)


def _test_options(
    alternative: str, n_bootstrap: int | None, confidence: float, seed: int
) -> dict[str, Any]:
    check_choice(alternative, "alternative", _ALTERNATIVES)
    if n_bootstrap is not None:
        check_int(n_bootstrap, "n_bootstrap", minimum=100)
    return {
        "alternative": alternative,
        "n_bootstrap": n_bootstrap,
        "confidence": check_confidence(confidence),
        "seed": check_int(seed, "seed", minimum=0),
    }


def _rank_biserial_tests(
    samples: Mapping[Label, FloatArray],
    reference: FloatArray,
    *,
    alternative: str,
    n_bootstrap: int | None,
    confidence: float,
    seed: int,
) -> dict[Label, RankBiserialResult]:
    b_sorted = np.sort(reference)
    intervals: dict[Label, tuple[float | None, float | None]] = dict.fromkeys(samples, (None, None))
    if n_bootstrap is not None and samples:
        tail = (1 - confidence) / 2
        replicates = _bootstrap_rank_biserial(samples, b_sorted, n_bootstrap=n_bootstrap, seed=seed)
        for name, values in replicates.items():
            low, high = np.quantile(values, [tail, 1 - tail])
            intervals[name] = float(low), float(high)
    results = {}
    for name, a in samples.items():
        n_pairs = a.size * b_sorted.size
        sign_sum = _pair_sign_sum(a, b_sorted)
        u_statistic = (sign_sum + n_pairs) / 2
        if a.min() == a.max() == b_sorted[0] == b_sorted[-1]:
            p_value = 1.0
        else:
            p_value = _mann_whitney_p(a, b_sorted, u_statistic, alternative)
        results[name] = RankBiserialResult(
            r=sign_sum / n_pairs,
            p_value=p_value,
            ci_low=intervals[name][0],
            ci_high=intervals[name][1],
            n_a=a.size,
            n_b=b_sorted.size,
            u_statistic=u_statistic,
            confidence=confidence,
            n_bootstrap=n_bootstrap,
        )
    return results
