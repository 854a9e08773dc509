"""RABBI and the score-level metrics it is compared with, each against an independent check."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.spatial.distance import jensenshannon

from biasaudit.metrics import (
    avg_score_gap,
    distribution_shape,
    emd,
    jsd,
    rank_biserial,
    rank_biserial_test,
    rank_biserial_tests,
)
from biasaudit.metrics._distances import _weighted_emd
from biasaudit.metrics._rank_biserial import (
    _bootstrap_rank_biserial,
    _bootstrap_stream,
    _cumulative,
    _multiplicities,
    _weighted_sign_sums,
)

INPUT_TYPES: list[Callable[[Any], Any]] = [list, np.asarray, pd.Series]
INPUT_IDS = ["list", "ndarray", "series"]


def pair_loop_rabbi(a: list[float], b: list[float]) -> float:
    """The definition: mean over all pairs of 1(a > b) - 1(a < b)."""
    total = 0
    for x in a:
        for y in b:
            total += (x > y) - (x < y)
    return total / (len(a) * len(b))


def tied_scores(seed: int, n: int, levels: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in rng.integers(0, levels, size=n) / levels]


# --- rank_biserial -----------------------------------------------------------


@pytest.mark.parametrize("levels", [2, 3, 10, 1000])
@pytest.mark.parametrize("sizes", [(1, 1), (1, 37), (50, 3), (120, 95)])
def test_rank_biserial_equals_pair_loop_with_ties(sizes: tuple[int, int], levels: int) -> None:
    a = tied_scores(sizes[0] * 7 + levels, sizes[0], levels)
    b = tied_scores(sizes[1] * 11 + levels, sizes[1], levels)
    assert rank_biserial(a, b) == pytest.approx(pair_loop_rabbi(a, b), abs=1e-15)


def test_rank_biserial_matches_mann_whitney_u() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 5, 400), rng.integers(1, 6, 300)
    u = stats.mannwhitneyu(a, b).statistic
    assert rank_biserial(a, b) == pytest.approx(2 * u / (400 * 300) - 1, abs=1e-12)


def test_rank_biserial_hand_worked() -> None:
    # Pairs (a, b): (3,1)+ (3,3)0 (3,5)- (1,1)0 (1,3)- (1,5)-  ->  (1 - 3) / 6
    assert rank_biserial([3, 1], [1, 3, 5]) == pytest.approx(-1 / 3)
    assert rank_biserial([2, 2], [1, 1]) == 1.0
    assert rank_biserial([1], [2]) == -1.0
    assert rank_biserial([4, 4, 4], [4]) == 0.0


def test_rank_biserial_is_antisymmetric_and_allows_infinities() -> None:
    a, b = [-np.inf, 0.0, 1.0, np.inf], [0.0, np.inf, 2.0]
    assert rank_biserial(a, b) == pytest.approx(pair_loop_rabbi(a, b))
    assert rank_biserial(b, a) == pytest.approx(-rank_biserial(a, b))


@pytest.mark.parametrize("as_type", INPUT_TYPES, ids=INPUT_IDS)
def test_rank_biserial_accepts_lists_arrays_and_series(as_type: Callable[[Any], Any]) -> None:
    a, b = [0.1, 0.5, 0.5, 0.9], [0.5, 0.2]
    assert rank_biserial(as_type(a), as_type(b)) == pytest.approx(pair_loop_rabbi(a, b))


def test_rank_biserial_exact_at_scale_with_heavy_ties() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 3, 200_000), rng.integers(0, 3, 150_000)
    counts_a, counts_b = np.bincount(a, minlength=3), np.bincount(b, minlength=3)
    # Pair counts by level: sum over (i, j) of count_a[i] count_b[j] sign(i - j).
    sign = np.sign(np.subtract.outer(np.arange(3), np.arange(3)))
    expected = counts_a @ sign @ counts_b / (a.size * b.size)
    assert rank_biserial(a, b) == pytest.approx(expected, abs=1e-15)


# --- rank_biserial_test -------------------------------------------------------


def test_rank_biserial_test_p_value_and_u_match_scipy() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 7, 80), rng.integers(1, 8, 60)
    result = rank_biserial_test(a, b, n_bootstrap=None)
    scipy_result = stats.mannwhitneyu(a, b, alternative="two-sided")
    assert result.p_value == pytest.approx(scipy_result.pvalue, rel=1e-12)
    assert result.u_statistic == pytest.approx(scipy_result.statistic)
    assert result.r == pytest.approx(pair_loop_rabbi(a.tolist(), b.tolist()))
    assert (result.n_a, result.n_b) == (80, 60)
    assert result.ci_low is None and result.ci_high is None


@pytest.mark.parametrize("alternative", ["greater", "less"])
def test_rank_biserial_test_one_sided(alternative: str) -> None:
    a, b = [3.0, 4.0, 5.0, 6.0, 7.5], [1.0, 2.0, 3.5, 4.5]
    result = rank_biserial_test(a, b, alternative=alternative, n_bootstrap=None)
    expected = stats.mannwhitneyu(a, b, alternative=alternative).pvalue
    assert result.p_value == pytest.approx(expected)


def test_rank_biserial_test_all_tied_gives_zero_and_p_one() -> None:
    result = rank_biserial_test([2.0, 2.0, 2.0], [2.0, 2.0], n_bootstrap=200)
    assert (result.r, result.p_value, result.ci_low, result.ci_high) == (0.0, 1.0, 0.0, 0.0)


def test_weighted_sign_sums_equal_brute_force() -> None:
    rng = np.random.default_rng(8)
    a, b = rng.integers(0, 6, 25).astype(float), rng.integers(0, 6, 30).astype(float)
    b_sorted = np.sort(b)
    below = np.searchsorted(b_sorted, a, side="left")
    at_or_below = np.searchsorted(b_sorted, a, side="right")
    weights_a = rng.integers(0, 4, size=(5, a.size))
    weights_b = rng.integers(0, 4, size=(5, b.size))
    sign = np.sign(np.subtract.outer(a, b_sorted))
    expected = [weights_a[r] @ sign @ weights_b[r] for r in range(5)]
    got = _weighted_sign_sums(below, at_or_below, weights_a, _cumulative(weights_b, np.int64))
    np.testing.assert_array_equal(got, expected)


def test_bootstrap_interval_agrees_with_naive_resampling() -> None:
    rng = np.random.default_rng(11)
    a, b = rng.integers(0, 10, 150), rng.integers(1, 11, 120)
    result = rank_biserial_test(a, b, n_bootstrap=4000, seed=1)
    naive_rng = np.random.default_rng(99)
    naive = [
        rank_biserial(naive_rng.choice(a, a.size), naive_rng.choice(b, b.size)) for _ in range(4000)
    ]
    low, high = np.quantile(naive, [0.025, 0.975])
    # Independent Monte Carlo runs: the endpoints agree to Monte Carlo error.
    assert result.ci_low == pytest.approx(low, abs=0.02)
    assert result.ci_high == pytest.approx(high, abs=0.02)
    assert result.ci_low < result.r < result.ci_high  # type: ignore[operator]


def test_bootstrap_is_seeded() -> None:
    a, b = tied_scores(1, 60, 5), tied_scores(2, 70, 5)
    first = rank_biserial_test(a, b, seed=3)
    assert rank_biserial_test(a, b, seed=3) == first
    assert rank_biserial_test(a, b, seed=4).ci_low != first.ci_low


def test_bootstrap_confidence_widens_interval() -> None:
    a, b = tied_scores(1, 60, 5), tied_scores(2, 70, 5)
    narrow = rank_biserial_test(a, b, confidence=0.5)
    wide = rank_biserial_test(a, b, confidence=0.99)
    assert wide.ci_low < narrow.ci_low < narrow.ci_high < wide.ci_high  # type: ignore[operator]


@pytest.mark.parametrize("block_cells", [1, 700, 10**6])
def test_bootstrap_replicates_equal_rabbi_of_the_same_resamples(
    monkeypatch: pytest.MonkeyPatch, block_cells: int
) -> None:
    # Each replicate is exactly RABBI of the resample its multiplicities describe,
    # whatever the block size (one replicate per block, several, all at once).
    monkeypatch.setattr("biasaudit.metrics._rank_biserial._BLOCK_CELLS", block_cells)
    a, b = np.array(tied_scores(4, 37, 6)), np.array(tied_scores(5, 29, 6))
    got = _bootstrap_rank_biserial({"a": a}, np.sort(b), n_bootstrap=150, seed=7)["a"]
    counts_a = _multiplicities(_bootstrap_stream(7, 1), n=a.size, replicates=150)
    counts_b = _multiplicities(_bootstrap_stream(7, 0), n=b.size, replicates=150)
    assert (counts_a.sum(axis=1) == a.size).all() and (counts_b.sum(axis=1) == b.size).all()
    resampled = [
        (np.repeat(np.sort(a), counts_a[r]), np.repeat(np.sort(b), counts_b[r])) for r in range(150)
    ]
    np.testing.assert_array_equal(got, [rank_biserial(x, y) for x, y in resampled])
    assert got[0] == pair_loop_rabbi(resampled[0][0].tolist(), resampled[0][1].tolist())


def test_rank_biserial_tests_equal_one_test_per_group() -> None:
    rng = np.random.default_rng(12)
    reference = rng.normal(size=90)
    groups = {"A": rng.normal(size=90), "B": tied_scores(3, 40, 4), "C": rng.normal(size=90) - 1}
    together = rank_biserial_tests(groups, reference, seed=2, confidence=0.9)
    assert list(together) == ["A", "B", "C"]
    for name, scores in groups.items():
        assert together[name] == rank_biserial_test(scores, reference, seed=2, confidence=0.9)
    assert together["A"].ci_low != together["C"].ci_low


def test_rank_biserial_tests_name_the_bad_group() -> None:
    with pytest.raises(ValueError, match=r"groups\['B'\] contains NaN"):
        rank_biserial_tests({"A": [1.0], "B": [math.nan]}, [1.0, 2.0])


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
@pytest.mark.parametrize(
    ("sizes", "levels"),
    [
        ((3, 5), 10**9),
        ((3, 5), 3),
        ((8, 30), 10**9),
        ((9, 9), 10**9),
        ((40, 25), 4),
        ((300, 200), 50),
    ],
)
def test_p_value_equals_scipy(alternative: str, sizes: tuple[int, int], levels: int) -> None:
    # Small samples without ties use scipy's exact distribution, the rest the
    # normal approximation computed here: both must give scipy's p-value.
    a, b = tied_scores(sizes[0], sizes[0], levels), tied_scores(sizes[1] + 1, sizes[1], levels)
    got = rank_biserial_test(a, b, alternative=alternative, n_bootstrap=None).p_value
    expected = stats.mannwhitneyu(a, b, alternative=alternative).pvalue
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-300)


def test_bootstrap_interval_covers_the_true_rabbi() -> None:
    # Normal scores shifted by delta: RABBI = P(a > b) - P(a < b) = 2 Phi(delta / sqrt 2) - 1.
    rng = np.random.default_rng(21)
    delta = -0.4
    truth = 2 * stats.norm.cdf(delta / math.sqrt(2)) - 1
    trials = 300
    covered = 0
    for seed in range(trials):
        a, b = rng.normal(delta, size=80), rng.normal(size=100)
        result = rank_biserial_test(a, b, n_bootstrap=500, seed=seed)
        covered += result.ci_low <= truth <= result.ci_high  # type: ignore[operator]
    # 95% nominal; three binomial standard errors either side.
    assert abs(covered / trials - 0.95) <= 3 * math.sqrt(0.95 * 0.05 / trials)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"alternative": "bigger"}, "'two-sided', 'greater', 'less'"),
        ({"n_bootstrap": 10}, "n_bootstrap"),
        ({"n_bootstrap": 1.5}, "n_bootstrap must be an integer"),
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": 95}, "confidence"),
        ({"seed": -1}, "seed"),
    ],
)
def test_rank_biserial_test_rejects_bad_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rank_biserial_test([1, 2], [3, 4], **options)


# --- shared input validation ---------------------------------------------------

TWO_SAMPLE = [rank_biserial, rank_biserial_test, avg_score_gap, jsd, emd]


@pytest.mark.parametrize("metric", TWO_SAMPLE, ids=lambda f: f.__name__)
def test_nan_scores_raise(metric: Callable[..., Any]) -> None:
    with pytest.raises(ValueError, match="a contains NaN"):
        metric([1.0, math.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="b contains NaN"):
        metric(pd.Series([1.0, 2.0]), pd.Series([1.0, None], dtype="Float64"))


@pytest.mark.parametrize("metric", TWO_SAMPLE, ids=lambda f: f.__name__)
def test_empty_group_raises(metric: Callable[..., Any]) -> None:
    with pytest.raises(ValueError, match="a is empty"):
        metric([], [1.0])
    with pytest.raises(ValueError, match="b is empty"):
        metric(np.array([1.0]), pd.Series([], dtype=float))


@pytest.mark.parametrize("metric", TWO_SAMPLE, ids=lambda f: f.__name__)
def test_non_numeric_or_2d_scores_raise(metric: Callable[..., Any]) -> None:
    with pytest.raises(ValueError, match="numeric"):
        metric(["high", "low"], [1.0])
    with pytest.raises(ValueError, match="one-dimensional"):
        metric([[1.0, 2.0]], [1.0])


@pytest.mark.parametrize("metric", [avg_score_gap, jsd, emd], ids=lambda f: f.__name__)
def test_mean_based_metrics_reject_infinity(metric: Callable[..., Any]) -> None:
    with pytest.raises(ValueError, match="infinite"):
        metric([1.0, np.inf], [1.0])


# --- avg_score_gap, jsd, emd -----------------------------------------------------


@pytest.mark.parametrize("as_type", INPUT_TYPES, ids=INPUT_IDS)
def test_avg_score_gap_hand_worked(as_type: Callable[[Any], Any]) -> None:
    assert avg_score_gap(as_type([0.2, 0.4, 0.9]), as_type([0.5, 0.7])) == pytest.approx(-0.1)
    assert avg_score_gap([3.0], [3.0]) == 0.0


@pytest.mark.parametrize("bins", [1, 3, 10, 25])
def test_jsd_matches_scipy_on_common_bins(bins: int) -> None:
    rng = np.random.default_rng(bins)
    a, b = rng.normal(0, 1, 300), rng.normal(0.5, 1.5, 200)
    edges = np.linspace(min(a.min(), b.min()), max(a.max(), b.max()), bins + 1)
    p, q = np.histogram(a, edges)[0], np.histogram(b, edges)[0]
    expected = jensenshannon(p / p.sum(), q / q.sum(), base=2) ** 2
    assert jsd(a, b, bins=bins) == pytest.approx(expected, abs=1e-12)


def test_jsd_hand_worked_with_empty_bins() -> None:
    # Two bins over [0, 1]: P = (1, 0), Q = (1/2, 1/2), M = (3/4, 1/4).
    # JSD = 1/2 log2(4/3) + 1/2 [1/2 log2(2/3) + 1/2 log2(2)].
    expected = 0.5 * math.log2(4 / 3) + 0.25 * math.log2(2 / 3) + 0.25
    assert jsd([0.1, 0.2], [0.1, 0.9], bins=2, value_range=(0, 1)) == pytest.approx(expected)
    assert jsd([0.0, 0.1], [0.9, 1.0], bins=2) == pytest.approx(1.0)
    assert jsd([0.3, 0.7], [0.3, 0.7], bins=10) == 0.0
    assert jsd([5.0, 5.0], [5.0], bins=4) == 0.0  # one value: a degenerate but valid range


def test_jsd_value_range_is_validated() -> None:
    with pytest.raises(ValueError, match="outside value_range"):
        jsd([0.5, 1.5], [0.5], value_range=(0, 1))
    with pytest.raises(ValueError, match="low < high"):
        jsd([0.5], [0.5], value_range=(1, 0))
    with pytest.raises(ValueError, match="low < high"):
        jsd([0.5], [0.5], value_range=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bins must be at least 1"):
        jsd([0.5], [0.5], bins=0)


def test_emd_matches_scipy_and_sorted_difference() -> None:
    rng = np.random.default_rng(21)
    a, b = rng.integers(0, 10, 333).astype(float), rng.normal(4, 2, 250)
    assert emd(a, b) == pytest.approx(stats.wasserstein_distance(a, b), rel=1e-12)
    c, d = rng.normal(size=100), rng.normal(1, 1, size=100)
    assert emd(c, d) == pytest.approx(np.mean(np.abs(np.sort(c) - np.sort(d))))


@pytest.mark.parametrize("as_type", INPUT_TYPES, ids=INPUT_IDS)
def test_emd_hand_worked(as_type: Callable[[Any], Any]) -> None:
    # Moving half the mass of {0, 1} from 1 to 3, and half from 0 to 2: cost 2.
    assert emd(as_type([0.0, 1.0]), as_type([2.0, 3.0])) == pytest.approx(2.0)
    assert emd([1.0], [1.0, 1.0]) == 0.0
    assert emd([0.0], [0.0, 1.0]) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("rows", "sizes", "ties"),
    [(2001, (600, 500), False), (65, (40, 30), True), (300, (1, 1), False)],
)
def test_weighted_emd_in_blocks_equals_the_whole_arrays_to_the_bit(
    rows: int, sizes: tuple[int, int], ties: bool
) -> None:
    """The replicates' EMD, taken block by block in place, is each replicate's ∫|F_a - F_b|
    computed on whole arrays, to the bit (a replay compares figures exactly): and each is
    scipy's Wasserstein distance with the replicate's weights."""
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=sizes[0]), np.sort(rng.normal(0.3, 1.0, size=sizes[1]))
    if ties:
        a, b = np.round(a, 1), np.round(b, 1)
    w_a = rng.poisson(1.0, (rows, a.size)).astype(float) + (np.arange(a.size) == 0)
    w_b = rng.poisson(1.0, (rows, b.size)).astype(float) + (np.arange(b.size) == 0)
    total_a, total_b, cumulative_b = w_a.sum(axis=1), w_b.sum(axis=1), _cumulative(w_b)
    found = _weighted_emd(a, w_a, total_a, b, cumulative_b, total_b)

    order = np.argsort(a, kind="stable")
    points = np.unique(np.concatenate([a, b]))
    at_a = np.searchsorted(a[order], points[:-1], side="right")
    at_b = np.searchsorted(b, points[:-1], side="right")
    whole = np.abs(
        _cumulative(w_a[:, order])[:, at_a] / total_a[:, None]
        - cumulative_b[:, at_b] / total_b[:, None]
    )
    assert np.array_equal(found, whole @ np.diff(points))
    for r in (0, rows // 2, rows - 1):
        expected = stats.wasserstein_distance(a, b, w_a[r], w_b[r])
        assert found[r] == pytest.approx(expected, rel=1e-9, abs=1e-12)


# --- distribution_shape -------------------------------------------------------------


@pytest.mark.parametrize("bias", [True, False])
def test_distribution_shape_matches_scipy(bias: bool) -> None:
    rng = np.random.default_rng(2)
    scores = np.concatenate([rng.gamma(2, size=200), rng.integers(0, 5, 50), rng.normal(size=7)])
    groups = ["B_F"] * 200 + ["W_M"] * 50 + ["H_M"] * 7
    shape = distribution_shape(scores, groups, bias=bias)
    assert list(shape.index) == ["B_F", "W_M", "H_M"]
    for group, values in (("B_F", scores[:200]), ("W_M", scores[200:250]), ("H_M", scores[250:])):
        row = shape.loc[group]
        assert row["n"] == values.size
        assert row["mean"] == pytest.approx(values.mean())
        assert row["skewness"] == pytest.approx(stats.skew(values, bias=bias))
        assert row["kurtosis"] == pytest.approx(stats.kurtosis(values, bias=bias))


def test_distribution_shape_hand_worked() -> None:
    # {0, 0, 3}: mean 1, m2 = 2, m3 = 2, m4 = 6 -> g1 = 2 / 2^1.5, g2 = 6/4 - 3.
    shape = distribution_shape(pd.Series([0.0, 0.0, 3.0]), pd.Series(["g", "g", "g"]))
    assert shape.loc["g", "skewness"] == pytest.approx(2 / 2**1.5)
    assert shape.loc["g", "kurtosis"] == pytest.approx(-1.5)


def test_distribution_shape_is_nan_where_undefined() -> None:
    shape = distribution_shape([0.1, 0.1, 0.1, 1.0, 2.0], ["flat"] * 3 + ["two"] * 2, bias=False)
    assert math.isnan(shape.loc["flat", "skewness"]) and math.isnan(shape.loc["flat", "kurtosis"])
    assert math.isnan(shape.loc["two", "skewness"])  # G1 needs 3 scores
    assert shape.loc["two", "n"] == 2


def test_distribution_shape_validates_inputs() -> None:
    with pytest.raises(ValueError, match="same length"):
        distribution_shape([1.0, 2.0], ["g"])
    with pytest.raises(ValueError, match="NaN"):
        distribution_shape([1.0, math.nan], ["g", "g"])
    with pytest.raises(ValueError, match="bias must be True or False"):
        distribution_shape([1.0, 2.0], ["g", "g"], bias="no")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="missing label"):
        distribution_shape([1.0, 2.0], np.array(["g", None], dtype=object))
