"""Score-level bias measures for allocation tasks: RABBI and the metrics it is compared with.

Chen, Ji & Evans, "The Mismeasure of Man and Models: Evaluating Allocational
Harms in Large Language Models" (arXiv:2408.01285), published as Cyberey, Ji &
Evans, "Do Prevalent Bias Metrics Capture Allocational Harms from LLMs?"
(Insights from Negative Results in NLP, 2025).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import stats

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
# Bootstrap replicates are processed in chunks of about this many array cells,
# which bounds memory at a few tens of MB whatever the sample sizes.
_BOOTSTRAP_CELLS = 2_000_000


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


def _pair_sign_sum(a: FloatArray, b: FloatArray) -> int:
    """Sum over all pairs of sign(a_i - b_j), exactly, in O((n_a + n_b) log n_b)."""
    a_sorted = np.sort(a)  # sorted queries make searchsorted cache-friendly
    below, at_or_below = _sorted_positions(a_sorted, np.sort(b))
    # sign sum = #(b < a) - #(b > a) = below - (n_b - at_or_below), summed over a.
    return int(below.sum(dtype=np.int64) + at_or_below.sum(dtype=np.int64)) - a.size * b.size


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
    return _pair_sign_sum(a_scores, b_scores) / (a_scores.size * b_scores.size)


def _bootstrap_rank_biserial(
    a: FloatArray, b: FloatArray, *, n_bootstrap: int, seed: int
) -> FloatArray:
    """RABBI on ``n_bootstrap`` resamples, A and B resampled separately."""
    rng = np.random.default_rng(seed)
    b_sorted = np.sort(b)
    below, at_or_below = _sorted_positions(a, b_sorted)
    n_a, n_b = a.size, b.size
    chunk = max(1, _BOOTSTRAP_CELLS // max(n_a, n_b))
    replicates = np.empty(n_bootstrap)
    for start in range(0, n_bootstrap, chunk):
        size = min(chunk, n_bootstrap - start)
        weights_a = _multiplicities(rng, n=n_a, replicates=size)
        weights_b = _multiplicities(rng, n=n_b, replicates=size)
        sign_sums = _weighted_sign_sums(below, at_or_below, weights_a, weights_b)
        replicates[start : start + size] = sign_sums / (n_a * n_b)
    return replicates


def _weighted_sign_sums(
    below: NDArray[np.intp],
    at_or_below: NDArray[np.intp],
    weights_a: NDArray[np.int64],
    weights_b: NDArray[np.int64],
) -> NDArray[np.int64]:
    """Σ_ij w_a[r, i] w_b[r, j] sign(a_i - b_j) for each row r, b in sorted order.

    A resample is a vector of multiplicities over the original scores. With b
    sorted once, the resampled count of b below (or at most) a_i is a
    cumulative sum of b's multiplicities read at a fixed position, so each
    replicate costs O(n_a + n_b) and needs no sorting.
    """
    cumulative_b = np.zeros((weights_b.shape[0], weights_b.shape[1] + 1), dtype=np.int64)
    np.cumsum(weights_b, axis=1, out=cumulative_b[:, 1:])
    total_b = cumulative_b[:, -1:]
    # sign(a_i - b) summed over the resampled b: #(b < a_i) - #(b > a_i).
    sign_per_a = cumulative_b[:, below] + cumulative_b[:, at_or_below] - total_b
    return np.asarray(np.einsum("ij,ij->i", weights_a, sign_per_a), dtype=np.int64)


def _multiplicities(rng: np.random.Generator, *, n: int, replicates: int) -> NDArray[np.int64]:
    """How often each of ``n`` items is drawn, in ``replicates`` resamples of size ``n``."""
    draws = rng.integers(0, n, size=(replicates, n))
    draws += np.arange(replicates)[:, None] * n
    return np.bincount(draws.ravel(), minlength=replicates * n).reshape(replicates, n)


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
    quantiles of the resampled RABBI are reported. Each replicate costs
    O(n_A + n_B).

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
    check_choice(alternative, "alternative", _ALTERNATIVES)
    if n_bootstrap is not None:
        check_int(n_bootstrap, "n_bootstrap", minimum=100)
    confidence = check_confidence(confidence)
    check_int(seed, "seed", minimum=0)
    a_scores = as_float_array(a, "a")
    b_scores = as_float_array(b, "b")

    n_pairs = a_scores.size * b_scores.size
    sign_sum = _pair_sign_sum(a_scores, b_scores)
    u_statistic = (sign_sum + n_pairs) / 2
    if np.ptp(np.concatenate([a_scores, b_scores])) == 0:
        p_value = 1.0
    else:
        p_value = float(stats.mannwhitneyu(a_scores, b_scores, alternative=alternative).pvalue)

    ci_low: float | None = None
    ci_high: float | None = None
    if n_bootstrap is not None:
        replicates = _bootstrap_rank_biserial(
            a_scores, b_scores, n_bootstrap=n_bootstrap, seed=seed
        )
        tail = (1 - confidence) / 2
        ci_low, ci_high = (float(q) for q in np.quantile(replicates, [tail, 1 - tail]))
    return RankBiserialResult(
        r=sign_sum / n_pairs,
        p_value=p_value,
        ci_low=ci_low,
        ci_high=ci_high,
        n_a=a_scores.size,
        n_b=b_scores.size,
        u_statistic=u_statistic,
        confidence=confidence,
        n_bootstrap=n_bootstrap,
    )


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
) -> float:
    r"""Jensen-Shannon divergence between the score histograms of A and B, in bits.

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
    a_scores = as_float_array(a, "a", finite=True)
    b_scores = as_float_array(b, "b", finite=True)
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
    p = np.histogram(a_scores, bins=edges)[0] / a_scores.size
    q = np.histogram(b_scores, bins=edges)[0] / b_scores.size
    m = (p + q) / 2
    return float(_kl_bits(p, m) + _kl_bits(q, m)) / 2


def _kl_bits(p: FloatArray, m: FloatArray) -> float:
    """Σ p log2(p/m) over the bins where p > 0 (where m > 0 too)."""
    used = p > 0
    return float(np.sum(p[used] * np.log2(p[used] / m[used])))


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
    a_sorted = np.sort(as_float_array(a, "a", finite=True))
    b_sorted = np.sort(as_float_array(b, "b", finite=True))
    points = np.sort(np.concatenate([a_sorted, b_sorted]))
    widths = np.diff(points)
    cdf_a = np.searchsorted(a_sorted, points[:-1], side="right") / a_sorted.size
    cdf_b = np.searchsorted(b_sorted, points[:-1], side="right") / b_sorted.size
    return float(np.sum(np.abs(cdf_a - cdf_b) * widths))


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
