"""Selection within strata, in given pools, and bootstrap intervals of the gaps."""

from __future__ import annotations

import numpy as np
import pytest

from biasaudit.metrics import (
    bootstrap_selection_gaps,
    dp_gap,
    select_in_pools,
    simulate_selection,
)

# Stratum x: A scores 10, B 0. Stratum y: A scores 5, B 6 (each twice).
SCORES = [10, 10, 0, 0, 5, 5, 6, 6]
GROUPS = ["A", "A", "B", "B", "A", "A", "B", "B"]
STRATA = ["x", "x", "x", "x", "y", "y", "y", "y"]


def test_pools_drawn_within_strata_never_mix_them() -> None:
    # Within strata A wins x, B wins y: SR_1(A) = 1/2 exactly.
    # Mixing strata, A wins unless (A=5, B=6): SR_1(A) = 3/4 in expectation.
    within = simulate_selection(SCORES, GROUPS, k_max=1, strata=STRATA, n_rounds=200)
    assert within.selection_rate.loc["A", 1] == 0.5 and within.n_strata == 2
    assert within.appearances.loc["A"] == 400
    mixed = simulate_selection(SCORES, GROUPS, k_max=1, n_rounds=4000, seed=1)
    assert mixed.selection_rate.loc["A", 1] == pytest.approx(0.75, abs=0.03)


def test_a_group_missing_from_a_stratum_is_named() -> None:
    with pytest.raises(ValueError, match="group 'B' has no candidate in stratum 'z'"):
        simulate_selection([1, 2, 3], ["A", "B", "A"], strata=["x", "x", "z"], k_max=1)


def test_random_pools_within_strata_are_capped_by_the_smallest_stratum() -> None:
    with pytest.raises(ValueError, match="pool_size must be at least 1 and at most 2"):
        simulate_selection(
            [1, 2, 3, 4, 5], list("ABABA"), pool="random", pool_size=3, strata=list("xxyyy")
        )


def test_given_pools_select_the_top_k_of_each_pool() -> None:
    # Pool 1: A 3, B 1, C 2 -> k=1 A, k=2 A and C. Pool 2: A 0, B 5, C 5 -> k=1 B, C split.
    result = select_in_pools(
        [3, 1, 2, 0, 5, 5], list("ABCABC"), [1, 1, 1, 2, 2, 2], [True, True, False, True, True, True],
        k_max=2,
    )  # fmt: skip
    rates = result.selection_rate
    assert rates.loc["A"].tolist() == [0.5, 0.5]
    assert rates.loc["B"].tolist() == [0.25, 0.5]
    assert rates.loc["C"].tolist() == [0.25, 1.0]
    assert result.true_positive_rate is not None
    assert result.true_positive_rate.loc["C"].tolist() == [0.5, 1.0]  # only pool 2's C is qualified
    assert result.pool == "given" and result.n_rounds == 2 and result.pool_size == 3


def test_given_pools_must_have_one_size() -> None:
    with pytest.raises(ValueError, match="every pool must have the same size"):
        select_in_pools([1, 2, 3], ["A", "B", "A"], [1, 1, 2], k_max=1)


def test_bootstrap_interval_covers_the_gap_and_shrinks_with_more_candidates() -> None:
    rng = np.random.default_rng(0)

    def width_and_cover(n: int) -> tuple[float, bool]:
        groups = np.repeat(["ref", "low"], n)
        scores = rng.normal(size=2 * n) - 0.5 * (groups == "low")
        result = simulate_selection(scores, groups, k_max=1, n_rounds=400)
        point = dp_gap(result, reference="ref").loc["low", 1]
        intervals = bootstrap_selection_gaps(
            scores, groups, reference="ref", k_max=1, n_rounds=400, n_bootstrap=100
        )
        low, high = intervals.dp_low.loc["low", 1], intervals.dp_high.loc["low", 1]
        return high - low, bool(low <= point <= high)

    small, small_covers = width_and_cover(40)
    large, large_covers = width_and_cover(640)
    assert small_covers and large_covers and large < small / 2


def test_bootstrap_keeps_every_qualified_cell_and_is_reproducible() -> None:
    rng = np.random.default_rng(3)
    groups = np.tile(["A", "B"], 50)
    qualified = np.arange(100) % 4 < 2
    scores = rng.normal(size=100)
    args = (scores, groups, qualified)
    one = bootstrap_selection_gaps(*args, reference="A", k_max=1, n_rounds=100, n_bootstrap=30)
    two = bootstrap_selection_gaps(*args, reference="A", k_max=1, n_rounds=100, n_bootstrap=30)
    assert one.to_dict("A") == two.to_dict("A")
    assert set(one.to_dict("A")["B"]) == {"dp_gap_ci", "eo_gap_ci"}


def test_bootstrap_of_given_pools_resamples_pools() -> None:
    rng = np.random.default_rng(4)
    pools = np.repeat(np.arange(60), 2)
    groups = np.tile(["A", "B"], 60)
    scores = rng.normal(size=120) + (groups == "A")
    intervals = bootstrap_selection_gaps(
        scores, groups, reference="A", pools=pools, k_max=1, n_bootstrap=50
    )
    low, high = intervals.to_dict("A")["B"]["dp_gap_ci"]["1"]
    assert low < high < 0
