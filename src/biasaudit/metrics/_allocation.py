"""Score-level bias measures for allocation tasks: RABBI and the metrics it is compared with.

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
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from biasaudit.metrics._small_samples import floor_p
from biasaudit.metrics._validate import (
    FloatArray,
    as_float_array,
    as_label_array,
    check_bool,
    check_choice,
    check_confidence,
    check_int,
    check_same_length,
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


def avg_score_gap(a: ArrayLike, b: ArrayLike) -> float:
    r"""Average score gap δ of group A against reference B.

    .. math:: \delta(A, B) = \frac{1}{n_A}\sum_{a \in A} s_a - \frac{1}{n_B}\sum_{b \in B} s_b

    The "average performance gap" baseline that Chen, Ji & Evans compare
    RABBI with, for pointwise scores.

    Parameters
    ----------
    a, b : array_like
        Finite scores of group A and of reference group B.

    Returns
    -------
    float
        Mean score of A minus mean score of B.

    References
    ----------
    Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024;
    Cyberey, Ji & Evans, "Do Prevalent Bias Metrics Capture Allocational Harms
    from LLMs?", 2025.
    """
    a_scores = as_float_array(a, "a", finite=True)
    b_scores = as_float_array(b, "b", finite=True)
    return float(a_scores.mean() - b_scores.mean())


def jsd(
    a: ArrayLike,
    b: ArrayLike,
    *,
    bins: int = 10,
    value_range: tuple[float, float] | None = None,
    convention: str = "biasaudit",
) -> float:
    r"""Jensen-Shannon divergence between the score histograms of A and B, in bits.

    ``convention="paper"`` gives the authors' estimator instead (Chen, Ji &
    Evans' published code): ``bins`` equal-width bins over *A's own* range
    (``value_range`` ignored; B's scores outside it are dropped from its
    histogram but not from its count), natural logarithm, and only the bins
    both groups fill, not renormalised. biasaudit's default departs from it
    because the result then depends on A's spread and on where B falls
    outside it, is not symmetric, and is not a divergence of two
    distributions (the kept bins need not sum to one).

    Both groups are binned on one common set of ``bins`` equal-width bins
    spanning ``value_range`` (default: the smallest to the largest score of
    the two groups together). With P and Q the two normalised histograms and
    :math:`M = (P + Q)/2`,

    .. math::

        \mathrm{JSD}(P \,\|\, Q) = \tfrac12 \sum_i P_i \log_2 \frac{P_i}{M_i}
                                 + \tfrac12 \sum_i Q_i \log_2 \frac{Q_i}{M_i}.

    Empty bins need no smoothing: a bin empty in P contributes
    :math:`0 \log 0 = 0` to P's term, and M is positive in every bin where P or
    Q is, so no term divides by zero. The result lies in [0, 1]; it equals
    ``scipy.spatial.distance.jensenshannon(P, Q, base=2) ** 2``, the square
    of the Jensen-Shannon distance.

    Parameters
    ----------
    a, b : array_like
        Finite scores of group A and of reference group B.
    bins : int
        Number of equal-width bins (at least 1).
    value_range : (float, float), optional
        Lower and upper edge of the bins, e.g. ``(0, 1)`` for probabilities;
        every score must lie inside it.

    Returns
    -------
    float
        The divergence; 0 when the histograms coincide.

    References
    ----------
    Lin, "Divergence measures based on the Shannon entropy", IEEE Trans. Inf.
    Theory 37 (1991). Used as a distribution-based bias baseline by Chen, Ji &
    Evans, "The Mismeasure of Man and Models", 2024.
    """
    check_int(bins, "bins", minimum=1)
    check_choice(convention, "convention", ("biasaudit", "paper"))
    a_scores = as_float_array(a, "a", finite=True)
    b_scores = as_float_array(b, "b", finite=True)
    if convention == "paper":
        return _paper_jsd(a_scores, b_scores, bins)
    both = np.concatenate([a_scores, b_scores])
    if value_range is not None:
        try:
            low, high = (float(edge) for edge in value_range)
        except (TypeError, ValueError):
            low, high = math.nan, math.nan
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(
                f"value_range must be two finite numbers low < high, got {value_range!r}"
            )
        if both.min() < low or both.max() > high:
            raise ValueError(f"scores fall outside value_range {value_range!r}")
    edges = np.histogram_bin_edges(both, bins=bins, range=value_range)
    ones_a, ones_b = np.ones((1, a_scores.size)), np.ones((1, b_scores.size))
    total_a, total_b = np.array([float(a_scores.size)]), np.array([float(b_scores.size)])
    return float(_weighted_jsd(a_scores, ones_a, total_a, b_scores, ones_b, total_b, edges)[0])


def _paper_jsd(a: FloatArray, b: FloatArray, bins: int) -> float:
    """The authors' JSD (see :func:`jsd`): A's own bins, both-filled bins only, nats."""
    counts_a, edges = np.histogram(a, bins=bins)
    p = counts_a / a.size
    q = np.histogram(b, bins=edges)[0] / b.size
    kept = (p != 0) & (q != 0)
    p, q = p[kept], q[kept]
    m = (p + q) / 2
    return float(0.5 * np.sum(p * np.log(p / m)) + 0.5 * np.sum(q * np.log(q / m)))


def emd(a: ArrayLike, b: ArrayLike) -> float:
    r"""Earth mover's distance (1-D Wasserstein-1) between the scores of A and B.

    .. math:: \mathrm{EMD}(A, B) = \int_{-\infty}^{\infty} |F_A(x) - F_B(x)|\,dx,

    with :math:`F_A, F_B` the empirical distribution functions. Computed from
    the merged sorted scores in O(n log n); for equal group sizes it equals
    the mean absolute difference of the sorted scores.

    Parameters
    ----------
    a, b : array_like
        Finite scores of group A and of reference group B.

    Returns
    -------
    float
        The distance, in score units; non-negative and symmetric.

    References
    ----------
    Rubner, Tomasi & Guibas, "The Earth Mover's Distance as a Metric for Image
    Retrieval", IJCV 40 (2000). Used as a distribution-based bias baseline by
    Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024.
    """
    a_scores = as_float_array(a, "a", finite=True)
    b_sorted = np.sort(as_float_array(b, "b", finite=True))
    ones_a = np.ones((1, a_scores.size))
    total_a, total_b = np.array([float(a_scores.size)]), np.array([float(b_sorted.size)])
    cumulative_b = _cumulative(np.ones((1, b_sorted.size)))
    return float(_weighted_emd(a_scores, ones_a, total_a, b_sorted, cumulative_b, total_b)[0])


# The weighted kernels of JSD and EMD: the public functions run them on weights of one,
# the unit-level figures (`_units`) on every bootstrap replicate's.


def _weighted_jsd(
    a: FloatArray,
    w_a: NDArray[Any],
    total_a: FloatArray,
    b: FloatArray,
    w_b: NDArray[Any],
    total_b: FloatArray,
    edges: FloatArray,
) -> FloatArray:
    """:func:`jsd` of the weighted histograms of a and b on ``edges``, per row of weights
    (a bootstrap replicate, or all ones)."""
    bins = len(edges) - 1
    p = _binned(w_a, _bin_of(a, edges), bins) / total_a[:, None]
    q = _binned(w_b, _bin_of(b, edges), bins) / total_b[:, None]
    m = (p + q) / 2
    found: FloatArray = (_kl_rows(p, m) + _kl_rows(q, m)) / 2
    return found


def _bin_of(values: FloatArray, edges: FloatArray) -> NDArray[np.intp]:
    """The histogram bin of each value, as ``numpy.histogram`` bins (last bin closed)."""
    return np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)


def _binned(weights: NDArray[Any], bins: NDArray[np.intp], n_bins: int) -> FloatArray:
    onehot = np.zeros((bins.size, n_bins))
    onehot[np.arange(bins.size), bins] = 1.0
    found: FloatArray = weights @ onehot
    return found


def _kl_rows(p: FloatArray, m: FloatArray) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log2(np.where(p > 0, p, 1.0) / np.where(m > 0, m, 1.0)), 0.0)
    found: FloatArray = terms.sum(axis=1)
    return found


def _weighted_emd(
    a: FloatArray,
    w_a: NDArray[Any],
    total_a: FloatArray,
    b_sorted: FloatArray,
    cumulative_b: FloatArray,
    total_b: FloatArray,
) -> FloatArray:
    """∫|F_a - F_b| with both distribution functions weighted, per row of weights
    (``cumulative_b``: :func:`_cumulative` of b's weights in sorted order).

    The differences are taken in blocks of rows of about :data:`_BLOCK_CELLS`
    points, in place, so that each block stays in the CPU cache (about twice as
    fast as whole arrays at 2,000 replicates of 1,200 points); the integral is one
    matrix product over all rows, as the BLAS sums each row the same way only
    within the same product."""
    order_a = np.argsort(a, kind="stable")
    a_sorted = a[order_a]
    points = np.unique(np.concatenate([a_sorted, b_sorted]))
    rows = w_a.shape[0]
    if points.size < 2:
        return np.zeros(rows)
    at_a = np.searchsorted(a_sorted, points[:-1], side="right")
    at_b = np.searchsorted(b_sorted, points[:-1], side="right")
    gap = np.empty((rows, at_a.size), order="F")  # as the whole arrays' indexing lays it
    block = max(1, _BLOCK_CELLS // points.size)
    for start in range(0, rows, block):
        part = slice(start, start + block)
        here = _cumulative(w_a[part][:, order_a])[:, at_a]
        np.divide(here, total_a[part, None], out=here)
        cdf_b = cumulative_b[part, at_b]
        np.divide(cdf_b, total_b[part, None], out=cdf_b)
        np.subtract(here, cdf_b, out=here)
        np.abs(here, out=gap[part])
    found: FloatArray = gap @ np.diff(points)
    return found


def distribution_shape(scores: ArrayLike, groups: ArrayLike, *, bias: bool = True) -> pd.DataFrame:
    r"""Skewness and excess kurtosis of the score distribution of each group.

    With :math:`m_j = \frac1n \sum (x_i - \bar x)^j` the central moments of a
    group's n scores,

    .. math:: g_1 = m_3 / m_2^{3/2}, \qquad g_2 = m_4 / m_2^2 - 3.

    With ``bias=False`` the adjusted Fisher-Pearson estimators are returned:
    :math:`G_1 = g_1 \sqrt{n(n-1)}/(n-2)` and
    :math:`G_2 = \frac{n-1}{(n-2)(n-3)}\big((n+1) g_2 + 6\big)`.

    Chen, Ji & Evans use the shape of the per-group score distributions to
    explain when mean- and divergence-based metrics miss allocation gaps.

    Parameters
    ----------
    scores : array_like
        Finite score of each candidate.
    groups : array_like
        Group label of each candidate, same length as ``scores``.
    bias : bool
        False for the bias-adjusted estimators G1, G2.

    Returns
    -------
    pandas.DataFrame
        Indexed by group (in order of first appearance), with columns ``n``,
        ``mean``, ``skewness``, ``kurtosis``. Skewness and kurtosis are NaN
        where undefined: for a group whose scores are all equal, and with
        ``bias=False`` for fewer than 3 (skewness) or 4 (kurtosis) scores.

    References
    ----------
    Joanes & Gill, "Comparing measures of sample skewness and kurtosis", JRSS
    D 47 (1998); Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024.
    """
    bias = check_bool(bias, "bias")
    values = as_float_array(scores, "scores", finite=True)
    labels = as_label_array(groups, "groups")
    check_same_length(scores=values, groups=labels)
    codes, uniques = pd.factorize(labels)
    rows = [_shape_row(values[codes == code], bias=bias) for code in range(len(uniques))]
    frame = pd.DataFrame(rows, index=pd.Index(uniques, name="group"))
    return frame.astype({"n": int})


def _shape_row(x: FloatArray, *, bias: bool) -> dict[str, float]:
    n = x.size
    deviations = x - x.mean()
    m2 = float(np.mean(deviations**2))
    m3 = float(np.mean(deviations**3))
    m4 = float(np.mean(deviations**4))
    # A spread this small relative to the mean is rounding noise, not a shape.
    if m2 <= (np.finfo(float).eps * max(1.0, abs(float(x.mean())))) ** 2:
        return {"n": n, "mean": float(x.mean()), "skewness": math.nan, "kurtosis": math.nan}
    g1 = m3 / m2**1.5
    g2 = m4 / m2**2 - 3
    if not bias:
        g1 = g1 * math.sqrt(n * (n - 1)) / (n - 2) if n > 2 else math.nan
        g2 = (n - 1) / ((n - 2) * (n - 3)) * ((n + 1) * g2 + 6) if n > 3 else math.nan
    return {"n": n, "mean": float(x.mean()), "skewness": g1, "kurtosis": g2}
