"""Ratios of two proportions: Koopman's score interval against statsmodels and against
the score test inverted on a grid, and the critical value that makes many pairs hold
together against Tukey's studentized range and a brute-force permutation loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from biasaudit.metrics import pairwise_critical_value, ratio_score_interval
from biasaudit.metrics._proportions import _score_statistic


def _inverted_on_a_grid(x1: int, n1: int, x2: int, n2: int, z: float) -> tuple[float, float]:
    """The ratios a fine log grid keeps: every θ whose score statistic is at most z²."""
    grid = np.exp(np.linspace(-9, 9, 180_001))
    kept = [t for t in grid if _score_statistic(x1, n1, x2, n2, float(t)) <= z * z]
    return min(kept), max(kept)


@pytest.mark.parametrize(
    "counts", [(15, 40, 18, 28), (3, 50, 20, 60), (480, 500, 1, 900), (120, 400, 30, 70)]
)
def test_inside_the_range_the_score_interval_is_statsmodels(counts: tuple[int, ...]) -> None:
    from statsmodels.stats.proportion import confint_proportions_2indep

    for z in (1.959963984540054, 3.0):
        alpha = 2 * stats.norm.sf(z)
        expected = confint_proportions_2indep(
            *counts, method="score", compare="ratio", alpha=alpha, correction=False
        )
        found = ratio_score_interval(*counts, z=z)
        assert found == pytest.approx((float(np.real(expected[0])), float(np.real(expected[1]))),
                                      rel=1e-8)  # fmt: skip


@pytest.mark.parametrize(
    "counts", [(10, 10, 10, 10), (1, 1, 1, 1), (100, 400, 2, 2), (0, 20, 5, 10), (0, 1, 1, 1)]
)
def test_at_the_edges_the_interval_is_the_score_test_inverted(counts: tuple[int, ...]) -> None:
    """statsmodels' closed form goes wrong where a count is 0 or n (10 of 10 against 10
    of 10 gets a lower bound of 1); the inversion on a grid is the definition."""
    low, high = ratio_score_interval(*counts, z=3.0)
    grid_low, grid_high = _inverted_on_a_grid(*counts, z=3.0)
    if counts[0] == 0:
        assert low == 0.0
    else:
        assert low == pytest.approx(grid_low, rel=2e-4)
    assert high == pytest.approx(grid_high, rel=2e-4)


def test_a_reference_of_two_out_of_two_is_not_nearly_certain() -> None:
    """Katz's interval, with its half-count correction, makes 2 of 2 a sure rate of
    about 1 and calls 30% of 400 against it far below 0.8 (upper bound 0.61); the
    score interval keeps 0.8 inside."""
    from biasaudit.metrics import impact_ratio_interval

    katz = impact_ratio_interval(120, 400, 2, 2)
    assert katz is not None and katz[1] < 0.8
    low, high = ratio_score_interval(120, 400, 2, 2)
    assert low < 0.8 < high


def test_zero_counts_leave_the_interval_open() -> None:
    assert ratio_score_interval(0, 10, 0, 12) == (0.0, math.inf)
    assert ratio_score_interval(5, 10, 0, 10)[1] == math.inf
    with pytest.raises(ValueError, match="counts"):
        ratio_score_interval(11, 10, 1, 10)


@pytest.mark.parametrize("groups", [2, 3, 7, 14])
def test_the_critical_value_of_large_disjoint_equal_categories_is_tukeys(groups: int) -> None:
    """For k disjoint categories of equal size, many people each, the largest pairwise
    statistic's root is the studentized range over sqrt(2) (Tukey): scipy's quantile,
    within the permutations' error."""
    members = np.zeros((1000 * groups, groups), dtype=bool)
    for j in range(groups):
        members[1000 * j : 1000 * (j + 1), j] = True
    outcome = np.random.default_rng(groups).random(1000 * groups) < 0.3
    found = pairwise_critical_value(members, [list(range(groups))], outcome)
    if groups == 2:
        assert found == pytest.approx(stats.norm.ppf(0.975))
    else:
        tukey = stats.studentized_range.ppf(0.95, groups, 100_000) / math.sqrt(2)
        assert found == pytest.approx(tukey, abs=0.06)


def test_the_critical_value_is_the_permutation_quantile_of_the_largest_statistic() -> None:
    """Against a brute-force loop: shuffle the outcomes, take every pair's Pearson
    statistic of the 2 x 2 table (scipy, no continuity correction), keep the largest."""
    rng = np.random.default_rng(4)
    members = np.column_stack([rng.random(120) < 0.5 for _ in range(4)])
    outcome = rng.random(120) < 0.2
    families = [[0, 1, 2], [3, 0]]
    found = pairwise_critical_value(members, families, outcome, permutations=4000)
    largest = []
    for _ in range(1500):
        dealt = rng.permutation(outcome)
        statistics = []
        for family in families:
            for i, a in enumerate(family):
                for b in family[i + 1 :]:
                    table = [[dealt[members[:, c]].sum(), (~dealt[members[:, c]]).sum()]
                             for c in (a, b)]  # fmt: skip
                    if min(sum(row[0] for row in table), sum(row[1] for row in table)) == 0:
                        statistics.append(0.0)
                        continue
                    statistics.append(stats.chi2_contingency(table, correction=False)[0])
        largest.append(max(statistics))
    assert found == pytest.approx(math.sqrt(np.quantile(largest, 0.95)), abs=0.12)


def test_overlapping_families_need_more_than_either_alone_and_less_than_bonferroni() -> None:
    rng = np.random.default_rng(1)
    sex = rng.integers(0, 2, 1000)
    race = rng.integers(0, 4, 1000)
    columns = [sex == 0, sex == 1, *(race == r for r in range(4))]
    members = np.column_stack(columns)
    sexes, races = [0, 1], [2, 3, 4, 5]
    outcome = rng.random(1000) < 0.3
    alone = pairwise_critical_value(members, [races], outcome, permutations=20_000)
    both = pairwise_critical_value(members, [sexes, races], outcome, permutations=20_000)
    bonferroni = stats.norm.isf(0.05 / 2 / 7)
    assert alone < both < bonferroni + 0.05  # the permutations' own error
