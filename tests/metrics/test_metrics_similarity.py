"""Replicate similarity (RUTEd §4.4 mode-collapse check) against a direct computation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from biasaudit.metrics import replicate_similarity, unit_similarity


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_within_and_between_equal_the_pairwise_loops() -> None:
    rng = np.random.default_rng(3)
    units = {f"u{i}": rng.normal(size=(n, 8)) for i, n in enumerate((2, 5, 7, 4))}
    found = replicate_similarity({(unit, "t1"): rows for unit, rows in units.items()})
    direct = {
        unit: np.mean([cosine(a, b) for a, b in itertools.combinations(rows, 2)])
        for unit, rows in units.items()
    }
    assert found.by_unit == pytest.approx(direct)
    assert found.within == pytest.approx(np.mean(list(direct.values())))
    # Between: every pair of units once, each the mean over their texts' cross pairs.
    pairs = [
        np.mean([cosine(a, b) for a in units[u] for b in units[v]])
        for u, v in itertools.combinations(units, 2)
    ]
    assert found.between == pytest.approx(np.mean(pairs))
    values = np.array(list(direct.values()))
    half = 1.959964 * values.std(ddof=1) / math.sqrt(4)
    assert found.within_ci == pytest.approx((values.mean() - half, values.mean() + half))
    assert found.units == 4


def test_copies_are_fully_similar_and_orthogonal_texts_not() -> None:
    copies = np.tile([1.0, 2.0, 0.5], (6, 1))
    assert unit_similarity(copies) == pytest.approx(1.0)
    assert unit_similarity(np.eye(4)) == pytest.approx(0.0)


def test_units_with_one_text_count_only_between() -> None:
    found = replicate_similarity(
        {("a", "t"): np.eye(3)[:2], ("b", "t"): [[0.0, 0.0, 1.0]], ("c", "t"): []}
    )
    assert found.units == 1 and found.within_ci is None
    assert found.between == pytest.approx(0.0)
    with pytest.raises(ValueError, match="no unit has two texts"):
        replicate_similarity({("a", "t"): [[1.0, 0.0]]})


def test_only_replicates_of_one_prompt_are_compared() -> None:
    """Two templates whose texts differ by template only: within each template every
    occupation's replicates agree, and different occupations are orthogonal."""
    e = np.eye(4)
    units = {
        ("nurse", "t1"): [e[0], e[0]], ("nurse", "t2"): [e[1], e[1]],
        ("baker", "t1"): [e[2], e[2]], ("baker", "t2"): [e[3], e[3]],
    }  # fmt: skip
    found = replicate_similarity(units)
    assert found.by_unit == {"nurse": 1.0, "baker": 1.0} and found.within == 1.0
    assert found.between == pytest.approx(0.0)
    with pytest.raises(ValueError, match="zero vector"):
        unit_similarity([[0.0, 0.0], [1.0, 0.0]])


def test_the_interval_over_units_covers_the_mean_similarity() -> None:
    """Units whose replicates share a unit-level direction of random strength: the
    interval over units covers the population mean in about 95% of simulated audits."""
    rng = np.random.default_rng(11)

    def unit(strength: float) -> np.ndarray:
        centre = rng.normal(size=16)
        return strength * centre + rng.normal(size=(6, 16))

    # The population mean, from many units.
    truth = np.mean([unit_similarity(unit(s)) for s in rng.uniform(0.2, 1.5, size=4000)])
    covered = 0
    for _ in range(300):
        strengths = rng.uniform(0.2, 1.5, size=20)
        sample = {(f"u{i}", "t"): unit(s) for i, s in enumerate(strengths)}
        low, high = replicate_similarity(sample).within_ci or (0.0, 0.0)
        covered += low <= truth <= high
    assert 0.90 <= covered / 300 <= 0.99
