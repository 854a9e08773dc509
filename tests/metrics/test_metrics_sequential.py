"""Intervals valid at every look (asymptotic confidence sequences, for audits that stop
when they know enough): the multiplier against its formula, and by simulation, over
audits that look after every 10 names per group, the true gap inside the interval at
every look in at least 95% of them, and a gap of 0 declared at any look in at most 5%,
where the fixed-size interval, looked at as often, fails both."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from biasaudit.metrics import sequence_interval, sequence_multiplier, tightest_at


def test_the_multiplier_is_the_papers_and_wider_than_a_fixed_intervals() -> None:
    alpha = 0.05
    r = (-2 * math.log(alpha) + math.log(-2 * math.log(alpha) + 1)) / 100
    assert tightest_at(100) == pytest.approx(r)
    for n in (10, 100, 1000):
        expected = math.sqrt(2 * (n * r + 1) / (n * r) * math.log(math.sqrt(n * r + 1) / alpha))
        assert sequence_multiplier(n, target_n=100) == pytest.approx(expected)
        assert sequence_multiplier(n, target_n=100) > stats.norm.ppf(0.975)
    low, high = sequence_interval(0.2, 0.05, 100, target_n=100)
    assert (high - low) / 2 == pytest.approx(0.05 * sequence_multiplier(100, target_n=100))
    tight = sequence_multiplier(100, target_n=100)
    assert tight < sequence_multiplier(100, target_n=20)  # tightest where it is aimed
    assert tight == pytest.approx(3.03, abs=0.02)


LOOKS = range(20, 201, 10)


def looks(gap: float, seed: int) -> list[tuple[int, float, float]]:
    """One audit growing by 10 names per group: at each look, the gap between the groups'
    mean scores and its SE (names with their own effects, SD 0.5; answer noise SD 0.5)."""
    rng = np.random.default_rng(seed)
    reference = rng.normal(0, 0.5, 200) + rng.normal(0, 0.5 / math.sqrt(6), 200)
    group = gap + rng.normal(0, 0.5, 200) + rng.normal(0, 0.5 / math.sqrt(6), 200)
    found = []
    for n in LOOKS:
        a, b = group[:n], reference[:n]
        se = math.sqrt(a.var(ddof=1) / n + b.var(ddof=1) / n)
        found.append((n, float(a.mean() - b.mean()), se))
    return found


def test_the_sequence_covers_at_every_look_and_stopping_on_it_keeps_the_level() -> None:
    z = stats.norm.ppf(0.975)
    covered = naive_covered = alarms = naive_alarms = 0
    seeds = 400
    for seed in range(seeds):
        gap = 0.1
        sequence = [sequence_interval(e, se, n, target_n=100) for n, e, se in looks(gap, seed)]
        covered += all(low <= gap <= high for low, high in sequence)
        naive_covered += all(e - z * se <= gap <= e + z * se for _, e, se in looks(gap, seed))
        null = looks(0.0, 10_000 + seed)
        alarms += any(not (low <= 0 <= high) for low, high in
                      (sequence_interval(e, se, n, target_n=100) for n, e, se in null))  # fmt: skip
        naive_alarms += any(abs(e) > z * se for _, e, se in null)
    assert covered / seeds >= 0.95, covered / seeds
    assert alarms / seeds <= 0.05, alarms / seeds
    assert naive_covered / seeds < 0.85 and naive_alarms / seeds > 0.15  # why it is needed


def test_spending_boundaries_spend_the_alpha_they_promise() -> None:
    """Five equally spaced looks: the first boundary is z/sqrt(t) (all that O'Brien-
    Fleming-type spending allows so early), the last near 2, and with no gap the chance
    of crossing at each look is what the spending function spends there (Monte Carlo)."""
    from biasaudit.metrics import spending_boundaries

    fractions = [0.2, 0.4, 0.6, 0.8, 1.0]
    bounds = np.array(spending_boundaries(fractions))
    z = stats.norm.ppf(0.975)
    assert bounds[0] == pytest.approx(z / math.sqrt(0.2), abs=0.01)
    assert list(bounds) == sorted(bounds, reverse=True) and 2.0 < bounds[-1] < 2.1
    assert spending_boundaries([1.0])[0] == pytest.approx(z, abs=0.01)
    rng = np.random.default_rng(1)
    steps = rng.normal(0, 1, (200_000, 5)) * np.sqrt(np.diff([0.0, *fractions]))
    looks = np.cumsum(steps, axis=1) / np.sqrt(fractions)
    crossed = np.abs(looks) >= bounds
    first = np.where(crossed.any(axis=1), crossed.argmax(axis=1), -1)
    spent = [2 * (1 - stats.norm.cdf(z / math.sqrt(t))) for t in fractions]
    for look, expected in enumerate(np.diff([0.0, *spent])):
        assert (first == look).mean() == pytest.approx(expected, abs=0.0015)
    assert crossed.any(axis=1).mean() == pytest.approx(0.05, abs=0.003)


def group_sequential(gap: float, seed: int, most: int, detect: float) -> tuple[int, bool, bool]:
    """One audit with five planned looks up to ``most`` names per group: it stops when
    the repeated interval excludes 0 or lies within ±detect. Its size, whether it
    declared a gap, and whether the interval it stopped on holds the truth."""
    from biasaudit.metrics import spending_boundaries

    rng = np.random.default_rng(seed)
    reference, group = rng.normal(0, 0.55, most), gap + rng.normal(0, 0.55, most)
    sizes = [math.ceil(most * j / 5) for j in range(1, 6)]
    for n, bound in zip(sizes, spending_boundaries([n / most for n in sizes]), strict=True):
        a, b = group[:n], reference[:n]
        estimate = a.mean() - b.mean()
        half = bound * math.sqrt(a.var(ddof=1) / n + b.var(ddof=1) / n)
        low, high = estimate - half, estimate + half
        if low > 0 or high < 0 or (-detect < low and high < detect):
            break
    return n, bool(low > 0 or high < 0), bool(low <= gap <= high)


def test_a_group_sequential_audit_spends_less_than_the_fixed_one_and_keeps_its_level(
    full_size: bool,
) -> None:
    """Against a gap of exactly D, planned as the power analysis plans (80% for D; five
    looks up to 1.1 times that size), the audit stops on average well before the fixed
    size, detects the gap at least as often, and keeps 95% coverage and its 5% level.

    1,500 sequences of each under ``--calibration``; 400 in the suite, with bounds
    three binomial standard errors wide."""
    detect, spread = 0.2, 0.55 * math.sqrt(2)
    fixed = math.ceil((spread * (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) / detect) ** 2)
    most = math.ceil(1.1 * fixed)
    count = 1500 if full_size else 400
    slack = 0.0 if full_size else 3 * math.sqrt(0.8 * 0.2 / count) - 0.02
    runs = [group_sequential(detect, seed, most, detect) for seed in range(count)]
    assert np.mean([n for n, _, _ in runs]) < 0.9 * fixed
    assert np.mean([found for _, found, _ in runs]) >= 0.78 - slack
    assert np.mean([held for _, _, held in runs]) >= 0.94 - slack / 2
    null = [group_sequential(0.0, 50_000 + seed, most, detect) for seed in range(count)]
    assert np.mean([found for _, found, _ in null]) <= 0.065 + slack / 2


def test_a_boundary_on_the_t_scale_is_wider_for_few_units_and_the_same_for_many() -> None:
    from scipy import stats

    from biasaudit.metrics import t_boundary

    assert t_boundary(1.959963984540054, 9) == pytest.approx(stats.t.ppf(0.975, 9))
    assert t_boundary(2.5, 5) > t_boundary(2.5, 50) > 2.5
    assert t_boundary(2.5, 1e7) == pytest.approx(2.5, abs=1e-4)
    with pytest.raises(ValueError, match="df must be positive"):
        t_boundary(2.0, 0)
