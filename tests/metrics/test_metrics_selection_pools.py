"""Selection within strata, in given pools, and bootstrap intervals of the gaps."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from biasaudit.metrics import (
    bootstrap_selection_gaps,
    dp_gap,
    eo_gap,
    select_in_pools,
    simulate_selection,
)
from biasaudit.metrics._gap_bootstrap import _rates, _Resampling
from biasaudit.metrics._selection import _selection_result

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


def _resume_like_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Three groups of unequal sizes in two strata, qualified cells, scores with ties."""
    rng = np.random.default_rng(seed)
    groups = rng.choice(["A", "B", "C"], size=240, p=[0.3, 0.3, 0.4])
    strata = rng.choice(["x", "y"], size=240)
    qualified = rng.random(240) < 0.4
    scores = np.round(rng.normal(size=240) + qualified - 0.3 * (groups == "C"), 1)
    return scores, groups.astype(object), strata.astype(object), qualified


# Pools of 40 are past _PAIRWISE_MAX_POOL: their members are ranked by sorting instead.
@pytest.mark.parametrize(
    ("pool", "pool_size"), [("one_per_group", None), ("random", 4), ("random", 40)]
)
def test_each_replicate_equals_selection_on_its_own_resample_and_pools(
    pool: str, pool_size: int | None
) -> None:
    # The vectorised replicates against the per-pool definition (_selection_result,
    # which simulate_selection uses), on the very same draws.
    scores, groups, strata, qualified = _resume_like_data(6)
    given = simulate_selection(
        scores, groups, qualified, strata=strata, pool=pool, pool_size=pool_size, n_rounds=50,
        k_max=3,
    )  # fmt: skip
    design = _Resampling.of(
        scores, groups, strata, qualified, pool=pool, pool_size=given.pool_size, n_rounds=50
    )
    picked, pools = design.draw(np.random.default_rng(2), 7)
    places, counts = design.tally(picked, pools, k_max=3)
    rates = _rates(design.group_ids, places, counts, qualified=True, require_all=True)
    codes, flags = design.classes // 2, design.classes % 2 == 1
    ordered = scores[design.order]
    for replicate in range(7):
        # A resample keeps every position's cell: group, stratum and qualification.
        assert (design.classes[picked[replicate]] == design.classes).all()
        expected = _selection_result(
            ordered[picked[replicate]], codes, design.group_ids, flags, pools[:, replicate].T,
            k_max=3, pool=pool, n_rounds=50, seed=0, n_strata=2,
        )  # fmt: skip
        assert expected.true_positive_rate is not None and rates.true_positive is not None
        np.testing.assert_allclose(rates.selection[replicate], expected.selection_rate, rtol=1e-12)
        np.testing.assert_allclose(
            rates.true_positive[replicate], expected.true_positive_rate, rtol=1e-12
        )
    # One-per-group pools hold one member of each group, in the group's row.
    if pool == "one_per_group":
        assert (codes[pools] == np.arange(3)[:, None, None]).all()


def test_given_pool_intervals_equal_the_per_replicate_definition() -> None:
    rng = np.random.default_rng(9)
    pools = np.repeat(np.arange(30), 3)
    groups = np.tile(["A", "B", "C"], 30).astype(object)
    scores = np.round(rng.normal(size=90) + (groups == "A"), 1)
    qualified = rng.random(90) < 0.5
    got = bootstrap_selection_gaps(
        scores, groups, qualified, reference="A", pools=pools, k_max=2, n_bootstrap=60, seed=4
    )
    # The definition: resample the pools, select in them, skip unusable replicates.
    rows = np.random.default_rng(4).integers(0, 30, size=(60, 30))
    dp, eo = [], []
    for drawn in rows:
        chosen = np.concatenate([np.flatnonzero(pools == p) for p in drawn])
        try:
            result = select_in_pools(
                scores[chosen], groups[chosen], np.repeat(np.arange(30), 3), qualified[chosen],
                k_max=2,
            )  # fmt: skip
        except ValueError:
            continue
        dp.append(dp_gap(result, reference="A").loc[["A", "B", "C"]].to_numpy())
        eo.append(eo_gap(result, reference="A").loc[["A", "B", "C"]].to_numpy())
    assert got.n_bootstrap == len(dp)
    for frames, replicates in (((got.dp_low, got.dp_high), dp), ((got.eo_low, got.eo_high), eo)):
        low, high = np.quantile(np.stack(replicates), [0.025, 0.975], axis=0)
        assert frames[0] is not None and frames[1] is not None
        np.testing.assert_allclose(frames[0].to_numpy(), low, atol=1e-12)
        np.testing.assert_allclose(frames[1].to_numpy(), high, atol=1e-12)


def test_bootstrap_interval_covers_the_true_gap() -> None:
    # Pools of one "ref" and one "low" candidate, normal scores shifted by delta:
    # SR_1(low) = P(low > ref) = Phi(-delta / sqrt 2) and SR_1(ref) = 1 - SR_1(low).
    rng = np.random.default_rng(1)
    delta = 0.3
    truth = 2 * stats.norm.cdf(-delta / math.sqrt(2)) - 1
    trials = 150
    covered = 0
    for seed in range(trials):
        groups = np.repeat(["ref", "low"], 150)
        scores = rng.normal(size=300) - delta * (groups == "low")
        intervals = bootstrap_selection_gaps(
            scores, groups, reference="ref", k_max=1, n_rounds=300, n_bootstrap=200, seed=seed
        )
        covered += intervals.dp_low.loc["low", 1] <= truth <= intervals.dp_high.loc["low", 1]
    # At least the nominal 95%, less three binomial standard errors. (The interval
    # is somewhat conservative: the pools' Monte Carlo noise widens it.)
    assert covered / trials >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / trials)


def test_random_pool_replicates_must_all_see_every_group() -> None:
    # Five pools of 2 from 7 candidates: the data as given puts every group in some
    # pool, but some of 200 replicates miss a group, and such a replicate is an error.
    scores, groups = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], ["A", "A", "A", "B", "B", "B", "C"]
    options = {"pool": "random", "pool_size": 2, "n_rounds": 5, "k_max": 1}
    assert simulate_selection(scores, groups, **options).appearances.loc["C"] > 0
    with pytest.raises(ValueError, match=r"no candidate of group '[ABC]' appeared in any pool"):
        bootstrap_selection_gaps(scores, groups, reference="A", n_bootstrap=200, **options)


@pytest.mark.parametrize("given_pools", [False, True])
def test_bootstrap_names_an_unknown_reference(given_pools: bool) -> None:
    pools = [1, 1, 2, 2] if given_pools else None
    with pytest.raises(ValueError, match="reference must be one of the groups 'A', 'B'"):
        bootstrap_selection_gaps(
            [1.0, 2.0, 3.0, 4.0], list("ABAB"), reference="Z", pools=pools, k_max=1
        )
