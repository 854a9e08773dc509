"""Top-k selection simulation against brute-force loops and hand-worked pools."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from biasaudit.metrics import SelectionResult, dp_gap, eo_gap, simulate_selection, top_k_shares
from biasaudit.metrics._selection import _random_pools

INPUT_TYPES: list[Callable[[Any], Any]] = [list, np.asarray, pd.Series]
INPUT_IDS = ["list", "ndarray", "series"]


def loop_shares(pool: list[float], k: int) -> list[float]:
    """Walk down the ranking; a tie block straddling the cut shares what is left."""
    ordered = sorted(set(pool), reverse=True)
    share = dict.fromkeys(ordered, 0.0)
    left = float(k)
    for value in ordered:
        block = pool.count(value)
        share[value] = min(1.0, left / block) if left > 0 else 0.0
        left = max(0.0, left - block)
    return [share[value] for value in pool]


# --- top_k_shares ---------------------------------------------------------------


def test_top_k_shares_hand_worked() -> None:
    shares = top_k_shares([[3.0, 1.0, 3.0, 2.0]], k_max=4)[0]
    np.testing.assert_allclose(shares[:, 0], [0.5, 0, 0.5, 0])  # k=1: the two 3s split a place
    np.testing.assert_allclose(shares[:, 1], [1, 0, 1, 0])
    np.testing.assert_allclose(shares[:, 2], [1, 0, 1, 1])
    np.testing.assert_allclose(shares[:, 3], [1, 1, 1, 1])
    np.testing.assert_allclose(top_k_shares([[5.0, 5.0, 5.0]], k_max=2)[0], [[1 / 3, 2 / 3]] * 3)


@pytest.mark.parametrize(("size", "levels"), [(1, 3), (2, 2), (8, 3), (10, 4), (40, 6)])
def test_top_k_shares_equal_a_loop(size: int, levels: int) -> None:
    rng = np.random.default_rng(size * 100 + levels)
    pools = rng.integers(0, levels, size=(300, size)).astype(float)
    k_max = min(size, 5)
    shares = top_k_shares(pools, k_max=k_max)
    for r in range(pools.shape[0]):
        for k in range(1, k_max + 1):
            expected = loop_shares(pools[r].tolist(), k)
            np.testing.assert_allclose(shares[r, :, k - 1], expected, atol=1e-12)
    np.testing.assert_allclose(
        shares.sum(axis=1), np.broadcast_to(np.arange(1, k_max + 1), (300, k_max))
    )


def test_top_k_shares_handles_infinities() -> None:
    shares = top_k_shares([[-np.inf, np.inf, 0.0, np.inf]], k_max=3)[0]
    expected = np.array([[0, 0, 0], [0.5, 1, 1], [0, 0, 1], [0.5, 1, 1]])
    np.testing.assert_allclose(shares, expected)


def test_top_k_shares_validates() -> None:
    with pytest.raises(ValueError, match="k_max must be at least 1 and at most 2"):
        top_k_shares([[1.0, 2.0]], k_max=3)
    with pytest.raises(ValueError, match="NaN"):
        top_k_shares([[1.0, math.nan]], k_max=1)
    with pytest.raises(ValueError, match="shape"):
        top_k_shares([1.0, 2.0], k_max=1)


# --- simulate_selection: deterministic pools -----------------------------------------


@pytest.mark.parametrize("as_type", INPUT_TYPES, ids=INPUT_IDS)
def test_single_candidate_groups_give_exact_rates(as_type: Callable[[Any], Any]) -> None:
    # One candidate per group, so every pool is the same: scores 3, 3, 1, 2.
    result = simulate_selection(
        as_type([3.0, 3.0, 1.0, 2.0]),
        as_type(["A", "B", "C", "D"]),
        k_max=3,
        n_rounds=50,
    )
    expected = pd.DataFrame(
        [[0.5, 1, 1], [0.5, 1, 1], [0, 0, 0], [0, 0, 1]], index=list("ABCD"), columns=[1, 2, 3]
    )
    np.testing.assert_allclose(result.selection_rate.to_numpy(), expected.to_numpy())
    assert list(result.selection_rate.index) == ["A", "B", "C", "D"]
    assert list(result.selection_rate.columns) == [1, 2, 3]
    assert result.appearances.tolist() == [50, 50, 50, 50]
    assert result.true_positive_rate is None and result.qualified_appearances is None


def test_true_positive_rate_counts_only_qualified() -> None:
    scores = [0.9, 0.1, 0.8, 0.7]
    groups = ["A", "A", "B", "B"]
    qualified = [False, True, True, True]
    result = simulate_selection(scores, groups, qualified, pool="random", pool_size=4, k_max=3)
    # Every pool is everyone: ranking 0.9 (A, unqualified), 0.8 (B), 0.7 (B), 0.1 (A).
    np.testing.assert_allclose(result.selection_rate.loc["A"], [0.5, 0.5, 0.5])
    np.testing.assert_allclose(result.selection_rate.loc["B"], [0.0, 0.5, 1.0])
    assert result.true_positive_rate is not None
    np.testing.assert_allclose(result.true_positive_rate.loc["A"], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(result.true_positive_rate.loc["B"], [0.0, 0.5, 1.0])
    assert result.qualified_appearances is not None
    assert result.qualified_appearances.tolist() == [1800, 3600]


def test_gaps_against_reference() -> None:
    result = simulate_selection([3.0, 3.0, 1.0], ["W_M", "B_F", "H_M"], [1, 1, 1], k_max=2)
    dp = dp_gap(result, reference="W_M")
    np.testing.assert_allclose(dp.loc["H_M"], [-0.5, -1.0])
    np.testing.assert_allclose(dp.loc["W_M"], [0.0, 0.0])
    np.testing.assert_allclose(eo_gap(result, reference="B_F").loc["H_M"], [-0.5, -1.0])
    assert result.to_gap_dict("W_M") == {
        "B_F": {"dp_gap": {"1": 0.0, "2": 0.0}, "eo_gap": {"1": 0.0, "2": 0.0}},
        "H_M": {"dp_gap": {"1": -0.5, "2": -1.0}, "eo_gap": {"1": -0.5, "2": -1.0}},
    }


def test_gap_dict_without_qualification_has_no_eo() -> None:
    result = simulate_selection([1.0, 2.0], ["a", "b"], k_max=1, n_rounds=10)
    assert result.to_gap_dict("a") == {"b": {"dp_gap": {"1": 1.0}}}
    with pytest.raises(ValueError, match="qualified="):
        eo_gap(result, reference="a")
    with pytest.raises(ValueError, match="reference must be one of the groups 'a', 'b'"):
        dp_gap(result, reference="W_M")


# --- simulate_selection: random draws ------------------------------------------------


def test_one_per_group_rates_match_exact_expectation() -> None:
    # Two groups: A scores {1, 3}, B scores {2}. k=1: A wins when it draws 3 (p=1/2).
    result = simulate_selection([1.0, 3.0, 2.0], ["A", "A", "B"], k_max=1, n_rounds=40_000)
    assert result.selection_rate.loc["A", 1] == pytest.approx(0.5, abs=5 * 0.5 / 200)
    assert result.selection_rate.loc["B", 1] == pytest.approx(1 - result.selection_rate.loc["A", 1])


def expected_share(higher: int, tied_others: int, k: int) -> float:
    return min(1.0, max(0.0, (k - higher) / (tied_others + 1)))


def exact_one_per_group_shares(scores: np.ndarray, groups: np.ndarray, k_max: int) -> np.ndarray:
    """E[share | drawn] of each candidate, by dynamic programming over the other groups' draws."""
    labels = list(dict.fromkeys(groups))
    shares = np.zeros((scores.size, k_max))
    for index, (score, group) in enumerate(zip(scores, groups, strict=True)):
        law = {(0, 0): 1.0}  # P(#higher, #tied) among the other groups' draws
        for other in labels:
            if other == group:
                continue
            drawn = scores[groups == other]
            above, tie = np.mean(drawn > score), np.mean(drawn == score)
            steps = ((1, 0, above), (0, 1, tie), (0, 0, 1 - above - tie))
            updated: dict[tuple[int, int], float] = {}
            for (higher, tied), prob in law.items():
                for up, side, q in steps:
                    key = (higher + up, tied + side)
                    updated[key] = updated.get(key, 0.0) + prob * q
            law = updated
        for k in range(1, k_max + 1):
            shares[index, k - 1] = sum(p * expected_share(h, t, k) for (h, t), p in law.items())
    return shares


def exact_random_pool_shares(scores: np.ndarray, pool_size: int, k_max: int) -> np.ndarray:
    """E[share | in pool] of each candidate: the other members are hypergeometric."""
    others = scores.size - 1
    shares = np.zeros((scores.size, k_max))
    for index, score in enumerate(scores):
        above = int(np.sum(scores > score))
        tie = int(np.sum(scores == score)) - 1
        below = others - above - tie
        for higher in range(min(above, pool_size - 1) + 1):
            for tied in range(min(tie, pool_size - 1 - higher) + 1):
                rest = pool_size - 1 - higher - tied
                ways = math.comb(above, higher) * math.comb(tie, tied) * math.comb(below, rest)
                prob = ways / math.comb(others, pool_size - 1)
                for k in range(1, k_max + 1):
                    shares[index, k - 1] += prob * expected_share(higher, tied, k)
    return shares


def assert_within_monte_carlo_error(
    simulated: pd.DataFrame | None,
    shares: np.ndarray,
    groups: np.ndarray,
    appearances: pd.Series | None,
) -> None:
    """Every candidate is equally likely to be drawn, so a rate is the mean of its shares."""
    assert simulated is not None and appearances is not None
    exact = pd.DataFrame(shares, columns=simulated.columns).groupby(groups).mean()
    exact = exact.loc[simulated.index]
    se = np.sqrt(exact * (1 - exact)).div(np.sqrt(appearances.to_numpy()), axis=0)
    # 4.5 standard errors: a false alarm about once in 10^4 runs over these few cells.
    assert ((simulated - exact).abs() <= 4.5 * se + 1e-12).all().all()


def tied_population(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    groups = np.repeat(["W_M", "B_F", "A_M", "H_F"], [12, 9, 15, 7])
    shift = pd.Series({"W_M": 1.0, "B_F": 0.0, "A_M": 0.5, "H_F": -0.5})[groups].to_numpy()
    scores = rng.integers(0, 5, groups.size) + shift  # integer grades: many ties
    return scores, groups, rng.random(groups.size) < 0.6


def test_one_per_group_rates_match_exact_dynamic_programme() -> None:
    scores, groups, qualified = tied_population(0)
    result = simulate_selection(scores, groups, qualified, k_max=3, n_rounds=40_000, seed=3)
    shares = exact_one_per_group_shares(scores, groups, 3)
    assert_within_monte_carlo_error(result.selection_rate, shares, groups, result.appearances)
    assert_within_monte_carlo_error(
        result.true_positive_rate,
        shares[qualified],
        groups[qualified],
        result.qualified_appearances,
    )


@pytest.mark.parametrize("pool_size", [4, 10])
def test_random_pool_rates_match_exact_hypergeometric(pool_size: int) -> None:
    scores, groups, qualified = tied_population(1)
    result = simulate_selection(
        scores,
        groups,
        qualified,
        pool="random",
        pool_size=pool_size,
        k_max=3,
        n_rounds=20_000,
        seed=5,
    )
    shares = exact_random_pool_shares(scores, pool_size, 3)
    assert_within_monte_carlo_error(result.selection_rate, shares, groups, result.appearances)
    assert_within_monte_carlo_error(
        result.true_positive_rate,
        shares[qualified],
        groups[qualified],
        result.qualified_appearances,
    )


@pytest.mark.parametrize(("n_candidates", "pool_size"), [(100, 10), (20, 10), (12, 12)])
def test_random_pools_are_distinct_and_uniform(n_candidates: int, pool_size: int) -> None:
    # Both samplers: redraw-on-repeat (pool_size**2 <= n) and sorted random keys.
    rounds = 6000
    pools = _random_pools(np.random.default_rng(0), n_candidates, pool_size, rounds)
    assert pools.shape == (rounds, pool_size)
    assert (np.sort(pools, axis=1)[:, 1:] != np.sort(pools, axis=1)[:, :-1]).all()
    counts = np.bincount(pools.ravel(), minlength=n_candidates)
    p = pool_size / n_candidates
    if p < 1:
        assert np.abs(counts - rounds * p).max() < 5 * math.sqrt(rounds * p * (1 - p))
    else:
        assert (counts == rounds).all()


def test_random_pool_appearances_and_top_candidate() -> None:
    # Each candidate its own group: appearances count draws; the best is always selected.
    ids = [f"c{i}" for i in range(30)]
    result = simulate_selection(
        np.arange(30), ids, pool="random", pool_size=10, n_rounds=3000, k_max=1
    )
    assert result.appearances.sum() == 3000 * 10
    assert result.selection_rate.loc["c29", 1] == 1.0
    assert result.selection_rate.loc["c0", 1] == 0.0
    # c_i is selected when it is the pool's best: P = C(i, 9) / C(29, 9) given it appears.
    expected = math.comb(20, 9) / math.comb(29, 9)
    rate = result.selection_rate.loc["c20", 1]
    n = result.appearances["c20"]
    assert rate == pytest.approx(expected, abs=5 * math.sqrt(expected * (1 - expected) / n))


def test_seed_reproduces_and_changes_the_draws() -> None:
    rng = np.random.default_rng(0)
    scores, groups = rng.normal(size=400), np.repeat(list("ABCDEFGH"), 50)
    first = simulate_selection(scores, groups, n_rounds=500, seed=7)
    again = simulate_selection(scores, groups, n_rounds=500, seed=7)
    other = simulate_selection(scores, groups, n_rounds=500, seed=8)
    pd.testing.assert_frame_equal(first.selection_rate, again.selection_rate)
    assert not first.selection_rate.equals(other.selection_rate)
    settings = (first.n_rounds, first.seed, first.pool, first.pool_size, first.k_max)
    assert settings == (500, 7, "one_per_group", 8, 5)
    assert first.groups == tuple("ABCDEFGH")
    assert isinstance(first, SelectionResult)


def test_selection_rates_sum_to_k_over_one_per_group_pools() -> None:
    rng = np.random.default_rng(3)
    scores, groups = rng.integers(0, 4, 300), np.repeat(list("ABCDEF"), 50)
    result = simulate_selection(scores, groups, k_max=5, n_rounds=300)
    # Every group appears once per pool, so the rates of a k add up to k places.
    np.testing.assert_allclose(result.selection_rate.sum(), [1, 2, 3, 4, 5])


# --- simulate_selection: validation ------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"pool": "pairs"}, "pool must be one of 'one_per_group', 'random'"),
        ({"pool": "random"}, "needs pool_size"),
        ({"pool_size": 2}, "pool_size applies only to pool='random'"),
        ({"pool": "random", "pool_size": 5}, "pool_size must be at least 1 and at most 4"),
        ({"k_max": 3}, "k_max must be at least 1 and at most 2"),
        ({"k_max": 0}, "k_max"),
        ({"n_rounds": 0}, "n_rounds"),
        ({"seed": 1.5}, "seed must be an integer"),
    ],
)
def test_bad_options_raise(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        simulate_selection([1.0, 2.0, 3.0, 4.0], ["a", "a", "b", "b"], **options)


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError, match="scores contains NaN"):
        simulate_selection([1.0, math.nan], ["a", "b"], k_max=1)
    with pytest.raises(ValueError, match="same length"):
        simulate_selection([1.0, 2.0], ["a"], k_max=1)
    with pytest.raises(ValueError, match="scores is empty"):
        simulate_selection([], [], k_max=1)
    with pytest.raises(ValueError, match="qualified must hold only booleans"):
        simulate_selection([1.0, 2.0], ["a", "b"], [0, 2], k_max=1)
    with pytest.raises(ValueError, match="qualified contains NaN"):
        simulate_selection([1.0, 2.0], ["a", "b"], np.array([True, None], dtype=object), k_max=1)
    with pytest.raises(ValueError, match="group 'b' has no qualified candidate"):
        simulate_selection([1.0, 2.0], ["a", "b"], [True, False], k_max=1)


def test_group_absent_from_every_random_pool_raises() -> None:
    scores = np.arange(1001.0)
    groups = ["big"] * 1000 + ["rare"]
    with pytest.raises(ValueError, match="no candidate of group 'rare' appeared"):
        simulate_selection(scores, groups, pool="random", pool_size=1, n_rounds=1, k_max=1, seed=0)
