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
