"""RUTEd neutrality, skew and stereotype: hand-worked values, scipy's folded normal, coverage."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from biasaudit.metrics import RutedEstimate, gender_shares, neutrality, skew, stereotype

INPUT_TYPES: list[Callable[[Any], Any]] = [list, np.asarray, pd.Series]
INPUT_IDS = ["list", "ndarray", "series"]
Z95 = 1.959963984540054

P_MALE = [0.8, 0.3, 0.5]  # d = 0.6, -0.4, 0.0
MALE_MAJORITY = [True, False, True]


@pytest.mark.parametrize("as_type", INPUT_TYPES, ids=INPUT_IDS)
def test_observed_probabilities_hand_worked(as_type: Callable[[Any], Any]) -> None:
    p = as_type(P_MALE)
    assert skew(p).value == pytest.approx(0.2 / 3)
    assert neutrality(p).value == pytest.approx(1.0 / 3)
    # Stereotypical minus anti-stereotypical: 0.6, +0.4 (female-majority), 0.0.
    assert stereotype(p, as_type(MALE_MAJORITY)).value == pytest.approx(1.0 / 3)


@pytest.mark.parametrize("metric", ["skew", "neutrality", "stereotype"])
def test_observed_probabilities_have_zero_variance_over_replicates(metric: str) -> None:
    """The paper's interval (occupations fixed) has no width from probabilities."""
    estimate = compute(metric, P_MALE, n=None, over="replicates")
    assert estimate.variance == 0.0 and estimate.standard_error == 0.0
    assert estimate.ci_low == estimate.value == estimate.ci_high
    assert estimate.n_occupations == 3


@pytest.mark.parametrize("metric", ["skew", "neutrality", "stereotype"])
@pytest.mark.parametrize("n", [None, 10])
def test_over_occupations_the_interval_is_scipys_t_interval_of_the_occupations(
    metric: str, n: int | None
) -> None:
    """biasaudit's interval: the occupations are the units, t on O - 1 degrees of freedom."""
    p = np.array([0.8, 0.3, 0.5, 0.9, 0.62, 0.41])
    majority = [True, False, True, True, False, False]
    d = 2 * p - 1
    values = {"skew": d, "neutrality": np.abs(d),
              "stereotype": np.where(majority, d, -d)}[metric]  # fmt: skip
    estimate = stereotype(p, majority, n=n) if metric == "stereotype" else compute(metric, p, n=n)
    low, high = stats.t.interval(0.95, p.size - 1, loc=values.mean(), scale=stats.sem(values))
    assert estimate.over == "occupations"
    assert estimate.value == pytest.approx(values.mean())
    assert estimate.variance == pytest.approx(stats.sem(values) ** 2)
    bounds = (0.0, 1.0) if metric == "neutrality" else (-1.0, 1.0)
    assert (estimate.ci_low, estimate.ci_high) == pytest.approx(
        (max(low, bounds[0]), min(high, bounds[1]))
    )
    assert estimate.spread == pytest.approx(np.std(values, ddof=1))


def test_one_occupation_has_no_interval_over_occupations() -> None:
    estimate = skew([0.7])
    assert math.isnan(estimate.ci_low) and math.isnan(estimate.ci_high)
    assert not math.isnan(skew([0.7], over="replicates", n=10).ci_low)


def compute(metric: str, p: Any, **options: Any) -> RutedEstimate:
    if metric == "stereotype":
        return stereotype(p, MALE_MAJORITY[: len(p)] if len(p) == 3 else [True] * len(p), **options)
    return {"skew": skew, "neutrality": neutrality}[metric](p, **options)


def test_skew_and_stereotype_variance_hand_worked() -> None:
    # sigma_o^2 = 4 p (1 - p) / 10: 0.064, 0.084, 0.1; Var = 0.248 / 3^2.
    for estimate in (
        skew(P_MALE, n=10, over="replicates"),
        stereotype(P_MALE, MALE_MAJORITY, n=10, over="replicates"),
    ):
        assert estimate.variance == pytest.approx(0.248 / 9)
        half = Z95 * math.sqrt(0.248 / 9)
        assert (estimate.ci_low, estimate.ci_high) == pytest.approx(
            (estimate.value - half, estimate.value + half)
        )


def test_per_occupation_replicate_counts() -> None:
    estimate = skew(P_MALE, n=[10, 20, 40], over="replicates")
    assert estimate.variance == pytest.approx((0.064 + 0.084 / 2 + 0.1 / 4) / 9)


def test_neutrality_variance_is_scipy_folded_normal() -> None:
    p = np.array([0.8, 0.3, 0.5, 0.52, 1.0, 0.0, 0.45])
    n = np.array([10, 25, 40, 100, 30, 30, 8])
    d, sigma = 2 * p - 1, np.sqrt(4 * p * (1 - p) / n)
    expected = sum(
        stats.foldnorm.var(abs(mu) / s, scale=s) for mu, s in zip(d, sigma, strict=True) if s > 0
    )
    estimate = neutrality(p, n=n, confidence=0.9, over="replicates")
    assert estimate.value == pytest.approx(np.abs(d).mean())
    assert estimate.variance == pytest.approx(expected / p.size**2)
    half = stats.norm.ppf(0.95) * math.sqrt(expected) / p.size
    assert (estimate.ci_low, estimate.ci_high) == pytest.approx(
        (estimate.value - half, estimate.value + half)
    )
    assert estimate.confidence == 0.9


def test_neutrality_folded_mean_formula_matches_scipy() -> None:
    # The docstring's folded-normal mean and variance, where they matter: d near 0.
    p, n = 0.525, 25
    mu, sigma = 2 * p - 1, math.sqrt(4 * p * (1 - p) / n)  # 0.05, 0.1997
    mean = sigma * math.sqrt(2 / math.pi) * math.exp(-(mu**2) / (2 * sigma**2)) + mu * (
        1 - 2 * stats.norm.cdf(-mu / sigma)
    )
    assert mean == pytest.approx(stats.foldnorm.mean(mu / sigma, scale=sigma))
    found = neutrality([p], n=n, over="replicates")
    assert found.variance == pytest.approx(mu**2 + sigma**2 - mean**2)
    assert found.variance < sigma**2  # folding shrinks the spread


def simulate_runs(
    p: np.ndarray, n: np.ndarray, majority: np.ndarray, runs: int, seed: int
) -> dict[str, float]:
    """Share of seeded simulated audits whose 95% interval covers the true value."""
    rng = np.random.default_rng(seed)
    d = 2 * p - 1
    truth = {
        "skew": d.mean(),
        "neutrality": np.abs(d).mean(),
        "stereotype": np.where(majority, d, -d).mean(),
    }
    covered = dict.fromkeys(truth, 0)
    for _ in range(runs):
        male = rng.binomial(n, p)
        shares = gender_shares(male, n - male)
        for name, estimate in (
            ("skew", skew(shares.p_male, n=shares.n, over="replicates")),
            ("neutrality", neutrality(shares.p_male, n=shares.n, over="replicates")),
            ("stereotype", stereotype(shares.p_male, majority, n=shares.n, over="replicates")),
        ):
            covered[name] += estimate.ci_low <= truth[name] <= estimate.ci_high
    return {name: count / runs for name, count in covered.items()}


def occupations(regime: str, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    count = 40
    if regime == "spread":
        p = rng.uniform(0.05, 0.95, count)
    else:  # every occupation far from neutral
        p = np.where(
            rng.random(count) < 0.5, rng.uniform(0.05, 0.25, count), rng.uniform(0.75, 0.95, count)
        )
    return p, rng.integers(20, 61, count), rng.random(count) < 0.5


@pytest.mark.parametrize("regime", ["spread", "far_from_neutral"])
def test_intervals_over_replicates_have_nominal_coverage_of_fixed_occupations(
    regime: str,
) -> None:
    """The paper's interval, for the occupations as given (their mean is the truth)."""
    p, n, majority = occupations(regime, seed=0)
    coverage = simulate_runs(p, n, majority, runs=1000, seed=1)
    # 1000 runs: a 95% interval covers 93.6%-96.4% of the time within 2 standard errors.
    assert 0.93 <= coverage["skew"] <= 0.97
    assert 0.93 <= coverage["stereotype"] <= 0.97
    if regime == "far_from_neutral":
        assert 0.93 <= coverage["neutrality"] <= 0.97


def test_neutrality_standard_error_tracks_sampling_spread_near_zero() -> None:
    # Near neutrality the estimate is biased (see the docstring) but its spread is right.
    rng = np.random.default_rng(5)
    p, n = rng.uniform(0.4, 0.6, 40), rng.integers(20, 61, 40)
    estimates = [neutrality(rng.binomial(n, p) / n, n=n, over="replicates") for _ in range(800)]
    spread = np.std([e.value for e in estimates])
    assert np.mean([e.standard_error for e in estimates]) == pytest.approx(spread, rel=0.15)


# --- gender_shares and validation ---------------------------------------------------------


@pytest.mark.parametrize("as_type", INPUT_TYPES, ids=INPUT_IDS)
def test_gender_shares_from_counts(as_type: Callable[[Any], Any]) -> None:
    shares = gender_shares(as_type([8, 0, 5]), as_type([2, 4, 5]))
    np.testing.assert_allclose(shares.p_male, [0.8, 0.0, 0.5])
    np.testing.assert_array_equal(shares.n, [10, 4, 10])
    assert skew(shares.p_male, n=shares.n).value == pytest.approx((0.6 - 1.0 + 0.0) / 3)


@pytest.mark.parametrize(
    ("male", "female", "message"),
    [
        ([1, 0], [1, 0], "occupation 1 has no gendered replicate"),
        ([1, -1], [1, 2], "non-negative whole counts"),
        ([1.5], [1], "non-negative whole counts"),
        ([1, math.nan], [1, 1], "male contains NaN"),
        ([1], [1, 2], "same length"),
    ],
)
def test_gender_shares_validates(male: list[float], female: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gender_shares(male, female)


@pytest.mark.parametrize("metric", ["skew", "neutrality", "stereotype"])
@pytest.mark.parametrize(
    ("p", "options", "message"),
    [
        ([0.5, 1.2, 0.1], {}, r"shares in \[0, 1\]"),
        ([0.5, math.nan, 0.1], {}, "p_male contains NaN"),
        ([], {}, "p_male is empty"),
        (P_MALE, {"n": 0}, "n must be at least 1"),
        (P_MALE, {"n": [10, 10]}, "same length"),
        (P_MALE, {"n": [10, 2.5, 10]}, "whole numbers"),
        (P_MALE, {"n": [10, math.nan, 10]}, "n contains NaN"),
        (P_MALE, {"confidence": 1.5}, "confidence"),
    ],
)
def test_bad_inputs_raise(
    metric: str, p: list[float], options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        compute(metric, p, **options)


def test_stereotype_validates_majority() -> None:
    with pytest.raises(ValueError, match="male_majority must hold only booleans"):
        stereotype(P_MALE, ["male", "female", "male"])
    with pytest.raises(ValueError, match="same length"):
        stereotype(P_MALE, [True, False])
