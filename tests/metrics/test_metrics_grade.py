"""Grade Score against hand-worked cyclic-permutation trials and scipy's entropy."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from biasaudit.metrics import GradeScore, grade_score, grade_score_summary, item_interval

INPUT_TYPES: list[Callable[[Any], Any]] = [list, lambda v: np.asarray(v, dtype=object), pd.Series]
INPUT_IDS = ["list", "ndarray", "series"]


def cyclic_option(position: int, trial: int, n: int) -> int:
    """Original option shown at ``position`` in cyclic permutation ``trial``."""
    return (position + trial) % n


def harmonic(x: float, y: float) -> float:
    return 0.0 if x == 0 or y == 0 else 2 * x * y / (x + y)


@pytest.mark.parametrize("as_type", INPUT_TYPES, ids=INPUT_IDS)
def test_pure_position_bias_scores_zero(as_type: Callable[[Any], Any]) -> None:
    # Always the first slot: it holds a different option every trial.
    result = grade_score(as_type([0, 0, 0]), as_type(["A", "B", "C"]), 3)
    assert (result.grade, result.entropy) == (0.0, 0.0)
    assert result.choice == pytest.approx(1 / 3)
    assert result.position_counts == (3, 0, 0)


def test_stable_choice_without_order_bias_scores_one() -> None:
    # Always option 0, which sits at slot (0 - t) mod 3 in trial t.
    positions = [(-t) % 3 for t in range(3)]
    options = [cyclic_option(p, t, 3) for t, p in enumerate(positions)]
    result = grade_score(positions, options, 3)
    assert options == [0, 0, 0]
    assert (result.grade, result.entropy, result.choice) == pytest.approx((1.0, 1.0, 1.0))


def test_mixed_answers_hand_worked() -> None:
    # Positions 0, 0, 1 over three cyclic trials choose options 0, 1, 0.
    positions = [0, 0, 1]
    options = [cyclic_option(p, t, 3) for t, p in enumerate(positions)]
    result = grade_score(positions, options, 3)
    entropy = -(2 / 3 * math.log2(2 / 3) + 1 / 3 * math.log2(1 / 3)) / math.log2(3)
    assert result.entropy == pytest.approx(entropy)  # 0.5794
    assert result.choice == pytest.approx(2 / 3)
    assert result.grade == pytest.approx(harmonic(entropy, 2 / 3))  # 0.6199
    assert result.n_trials == 3 and result.n_unparsed == 0


@pytest.mark.parametrize("missing", [None, -1, math.nan, pd.NA], ids=["None", "-1", "nan", "NA"])
def test_unparseable_answers_are_excluded_and_counted(missing: Any) -> None:
    result = grade_score([0, missing, 1, 1], ["A", missing, "A", "B"], 4)
    # Usable: positions 0, 1, 1 (shares 1/3, 2/3) and options A, A, B.
    entropy = stats.entropy([1, 2], base=4)
    assert result.entropy == pytest.approx(entropy)
    assert result.choice == pytest.approx(2 / 3)
    assert result.grade == pytest.approx(harmonic(entropy, 2 / 3))
    assert (result.n_trials, result.n_unparsed, result.position_counts) == (4, 1, (1, 2, 0, 0))


def test_nothing_usable_scores_zero() -> None:
    result = grade_score([None, -1], [None, -1], 2)
    assert result == GradeScore(
        grade=0.0, entropy=0.0, choice=0.0, n_trials=2, n_unparsed=2, position_counts=(0, 0)
    )
    assert grade_score([], [], 3).grade == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_random_trials_match_scipy_entropy_and_counter(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 7))
    positions = rng.integers(0, n, size=n * 3).tolist()
    options = [cyclic_option(p, t % n, n) for t, p in enumerate(positions)]
    result = grade_score(pd.Series(positions), np.array(options), n)
    entropy = stats.entropy(np.bincount(positions, minlength=n), base=n)  # = H2 / log2 n
    choice = max(Counter(options).values()) / len(options)
    assert result.entropy == pytest.approx(entropy)
    assert result.choice == pytest.approx(choice)
    assert result.grade == pytest.approx(harmonic(entropy, choice))


@pytest.mark.parametrize(
    ("positions", "options", "n_options", "message"),
    [
        ([0, 3], ["A", "B"], 3, "from 0 to 2; got 3"),
        ([0, 1.5], ["A", "B"], 3, "whole numbers"),
        (["first", 0], ["A", "B"], 3, "integers"),
        ([0, None], ["A", "B"], 3, "trial 1 has a position or an option but not both"),
        ([0, 1], ["A"], 3, "same length"),
        ([0], ["A"], 1, "n_options must be at least 2"),
        ([[0]], [["A"]], 2, "one-dimensional"),
    ],
)
def test_bad_answers_raise(
    positions: list[Any], options: list[Any], n_options: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        grade_score(positions, options, n_options)


# --- grade_score_summary -------------------------------------------------------------


def test_summary_mean_interval_and_histogram() -> None:
    items = [
        grade_score([0, 0, 0], ["A", "B", "C"], 3),  # 0
        grade_score([0, 2, 1], [0, 0, 0], 3),  # 1
        grade_score([0, 0, 1], [0, 1, 0], 3),  # 0.6199
        grade_score([None, 1, 2], [None, "X", "X"], 3),
    ]
    summary = grade_score_summary(items, confidence=0.9)
    grades = np.array([item.grade for item in items])
    assert summary.grade_score == pytest.approx(grades.mean())
    assert all(math.isnan(bound) for bound in summary.grade_score_ci)  # 4 items: too few
    assert summary.entropy == pytest.approx(np.mean([item.entropy for item in items]))
    assert summary.choice == pytest.approx(np.mean([item.choice for item in items]))
    assert (summary.items, summary.unparsed, summary.confidence) == (4, 1, 0.9)
    # Usable answers by slot: 0: 3+1+2 = 6, 1: 0+1+1+1 = 3, 2: 0+1+0+1 = 2.
    assert summary.position_histogram == pytest.approx((6 / 11, 3 / 11, 2 / 11))
    assert summary.position_counts == (6, 3, 2)
    expected = stats.chisquare([6, 3, 2])
    assert summary.slot_test is not None and summary.slot_test.n == 11
    assert summary.slot_test.statistic == pytest.approx(expected.statistic)
    assert summary.slot_test.p == pytest.approx(expected.pvalue)
    assert summary.slot_test.df == 2


def test_summary_of_one_item_has_no_interval() -> None:
    summary = grade_score_summary([grade_score([0, 1], ["A", "A"], 2)])
    assert summary.grade_score == pytest.approx(1.0)
    assert all(math.isnan(bound) for bound in summary.grade_score_ci)


def test_summary_validates() -> None:
    with pytest.raises(ValueError, match="empty"):
        grade_score_summary([])
    with pytest.raises(ValueError, match="different numbers of options"):
        grade_score_summary([grade_score([0], ["A"], 2), grade_score([0], ["A"], 3)])
    with pytest.raises(ValueError, match="GradeScore"):
        grade_score_summary([0.5])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="confidence"):
        grade_score_summary([grade_score([0], ["A"], 2)], confidence=0)


def test_summary_intervals_are_t_intervals_over_the_items_within_zero_and_one() -> None:
    items = [
        grade_score([0, 1, 2], ["A", "A", "A"], 3),
        grade_score([0, 0, 1], ["A", "B", "A"], 3),
        grade_score([0, 0, 0], ["A", "B", "C"], 3),
    ] * 3
    summary = grade_score_summary(items)
    for mean, interval, values in (
        (summary.entropy, summary.entropy_ci, [item.entropy for item in items]),
        (summary.choice, summary.choice_ci, [item.choice for item in items]),
        (summary.grade_score, summary.grade_score_ci, [item.grade for item in items]),
    ):
        assert mean == pytest.approx(np.mean(values))
        # scipy's t-interval over the 9 items, clipped to [0, 1].
        low, high = stats.t.interval(0.95, 8, loc=np.mean(values), scale=stats.sem(values))
        assert interval == pytest.approx((max(low, 0.0), min(high, 1.0)))
        assert 0.0 <= interval[0] <= mean <= interval[1] <= 1.0
    for low, high in summary.position_ci:
        assert 0.0 <= low <= high <= 1.0


def test_slot_intervals_are_simultaneous_clopper_pearson_and_agree_with_their_test() -> None:
    from biasaudit.metrics import position_intervals

    # Independent: Clopper-Pearson from the beta quantiles at level 1 - 0.05 / k.
    counts = [10, 0, 0]
    intervals, p = position_intervals(counts)
    n, k, alpha = 10, 3, 0.05 / 3
    for x, (low, high) in zip(counts, intervals, strict=True):
        want_low = 0.0 if x == 0 else stats.beta.ppf(alpha / 2, x, n - x + 1)
        want_high = 1.0 if x == n else stats.beta.ppf(1 - alpha / 2, x + 1, n - x)
        assert (low, high) == pytest.approx((want_low, want_high))
    # 10 of 10 on one slot: [69%, 100%] at 95% unadjusted; wider at the simultaneous level.
    assert intervals[0][0] < 0.69 and intervals[0][1] == 1.0
    assert p is not None and p < 0.05
    # The test rejects exactly when some interval excludes 1/k, over many tables.
    rng = np.random.default_rng(3)
    for _ in range(300):
        k = int(rng.integers(2, 6))
        counts = rng.multinomial(int(rng.integers(5, 60)), rng.dirichlet([2.0] * k))
        intervals, p = position_intervals(counts)
        excluded = any(not low <= 1 / k <= high for low, high in intervals)
        assert p is not None and p > 0.0
        assert excluded == (p < 0.05) or abs(p - 0.05) < 1e-9


def test_no_p_value_is_zero() -> None:
    from biasaudit.metrics import P_FLOOR, position_intervals, slot_test

    test = slot_test([100_000, 0, 0, 0])
    assert test is not None and test.p == P_FLOOR
    _, p = position_intervals([5_000, 0, 0, 0])
    assert p == P_FLOOR


def test_shares_near_the_edge_keep_their_interval_inside_zero_and_one() -> None:
    """A t-interval around a mean of 0.97 from a skewed sample leaves [0, 1]."""
    values = [1.0] * 9 + [0.7]
    low, high = item_interval(values)
    assert low >= 0.0 and high <= 1.0
    assert all(math.isnan(bound) for bound in item_interval([1.0, 0.0, 1.0, 1.0]))


def test_mean_interval_matches_scipy_and_validates() -> None:
    from biasaudit.metrics._grade import mean_interval

    values = [0.2, 0.5, 0.9, 0.4]
    low, high = stats.t.interval(0.9, 3, loc=np.mean(values), scale=stats.sem(values))
    assert mean_interval(values, confidence=0.9) == pytest.approx((low, high))
    assert all(math.isnan(bound) for bound in mean_interval([0.5]))
    with pytest.raises(ValueError, match="without NaN"):
        mean_interval([0.5, math.nan])
