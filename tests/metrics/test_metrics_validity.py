"""Correlations, RMS ranking and NDCG against formulas worked by hand."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from biasaudit.metrics import (
    CorrelationResult,
    model_selection_ndcg,
    ndcg_at,
    pearson,
    predictive_validity,
    rank_models_by_rms,
    rms,
    spearman,
    spearman_matrix,
)

INPUT_TYPES: list[Callable[[Any], Any]] = [list, np.asarray, pd.Series]
INPUT_IDS = ["list", "ndarray", "series"]


def textbook_pearson(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    dx, dy = x - x.mean(), y - y.mean()
    r = float((dx @ dy) / math.sqrt((dx @ dx) * (dy @ dy)))
    t = r * math.sqrt((x.size - 2) / (1 - r**2))
    return r, float(2 * stats.t.sf(abs(t), x.size - 2))


@pytest.mark.parametrize("as_type", INPUT_TYPES, ids=INPUT_IDS)
def test_pearson_matches_textbook_formula(as_type: Callable[[Any], Any]) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=30)
    y = 0.4 * x + rng.normal(size=30)
    result = pearson(as_type(x.tolist()), as_type(y.tolist()))
    r, p = textbook_pearson(x, y)
    assert isinstance(result, CorrelationResult)
    assert (result.r, result.p_value) == pytest.approx((r, p))
    assert (result.n, result.method) == (30, "pearson")


def test_spearman_is_pearson_of_average_ranks() -> None:
    x = np.array([1.0, 2.0, 2.0, 3.0, 7.0, 7.0, 7.0, 10.0])
    y = np.array([3.0, 1.0, 4.0, 4.0, 5.0, 9.0, 2.0, 6.0])
    result = spearman(x, y)
    assert result.r == pytest.approx(textbook_pearson(stats.rankdata(x), stats.rankdata(y))[0])

    # 8 pairs: exact, as scipy's permutation test over every ordering computes it.
    def rho(v: np.ndarray, axis: int = -1) -> np.ndarray:
        rx = stats.rankdata(x) - stats.rankdata(x).mean()
        rv = v - v.mean(axis=axis, keepdims=True)
        return (rv @ rx) / np.sqrt((rv**2).sum(axis=axis) * (rx**2).sum())

    exact = stats.permutation_test(
        (stats.rankdata(y),), rho, permutation_type="pairings", n_resamples=np.inf,
        vectorized=True,
    ).pvalue  # fmt: skip
    assert result.p_value == pytest.approx(exact)
    assert result.method == "spearman"
    # Beyond 8 pairs, scipy's t approximation.
    x9, y9 = np.append(x, 11.0), np.append(y, 0.5)
    assert spearman(x9, y9).p_value == pytest.approx(stats.spearmanr(x9, y9).pvalue)
    # Three models in perfect agreement: p = 2/3! (the t approximation says 0).
    assert spearman([1, 2, 3], [4, 5, 6]).p_value == pytest.approx(1 / 3)
    # Hand-worked: a monotone transform is a perfect rank correlation.
    assert spearman([1, 2, 3, 4], [1, 8, 27, 64]).r == pytest.approx(1.0)


@pytest.mark.parametrize("correlation", [pearson, spearman], ids=lambda f: f.__name__)
def test_correlations_reject_degenerate_input(correlation: Callable[..., Any]) -> None:
    with pytest.raises(ValueError, match="at least 3 points"):
        correlation([1.0, 2.0], [2.0, 1.0])
    with pytest.raises(ValueError, match="y is constant"):
        correlation([1.0, 2.0, 3.0], [5.0, 5.0, 5.0])
    with pytest.raises(ValueError, match="x contains NaN"):
        correlation([1.0, math.nan, 3.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="same length"):
        correlation([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0])


def test_predictive_validity_uses_absolute_gap_for_non_directional_metrics() -> None:
    gap = np.array([-0.3, -0.1, 0.0, 0.1, 0.3, -0.2])
    divergence = np.abs(gap) + np.array([0.01, -0.01, 0.02, 0.0, -0.02, 0.01])
    non_directional = predictive_validity(divergence, gap, directional=False)
    assert non_directional.r == pytest.approx(textbook_pearson(divergence, np.abs(gap))[0])
    assert non_directional.r > 0.9
    directional = predictive_validity(divergence, gap)
    assert directional.r == pytest.approx(textbook_pearson(divergence, gap)[0])
    with pytest.raises(ValueError, match="directional must be True or False"):
        predictive_validity(divergence, gap, directional="no")  # type: ignore[arg-type]


def test_rms_hand_worked() -> None:
    assert rms([3.0, -4.0]) == pytest.approx(math.sqrt(12.5))
    assert rms(pd.Series([0.0])) == 0.0
    with pytest.raises(ValueError, match="empty"):
        rms([])


def test_rank_models_by_rms_from_mapping_and_frame() -> None:
    bias = {"m1": [0.3, -0.3], "m2": [0.1, 0.0], "m3": [-0.2, 0.25], "m4": [0.0, 0.1]}
    # RMS: m1 .3, m2 .0707, m3 .226, m4 .0707 (tie with m2, kept in input order).
    assert rank_models_by_rms(bias) == ("m2", "m4", "m3", "m1")
    frame = pd.DataFrame(bias).T
    frame.columns = ["B_F", "H_M"]
    assert rank_models_by_rms(frame) == ("m2", "m4", "m3", "m1")
    with pytest.raises(ValueError, match="empty"):
        rank_models_by_rms({})


def test_ndcg_hand_worked() -> None:
    ideal = ["a", "b", "c", "d"]  # relevance 4, 3, 2, 1
    assert ndcg_at(ideal, ideal, 4) == 1.0
    # ranking b, a, ...: DCG@2 = 3/1 + 4/log2(3); IDCG@2 = 4 + 3/log2(3).
    expected = (3 + 4 / math.log2(3)) / (4 + 3 / math.log2(3))
    assert ndcg_at(["b", "a", "c", "d"], ideal, 2) == pytest.approx(expected)
    # Reversed ranking at 1: relevance 1 against 4.
    assert ndcg_at(ideal[::-1], ideal, 1) == pytest.approx(1 / 4)
    # Swapping below the cutoff changes nothing.
    assert ndcg_at(["a", "b", "d", "c"], ideal, 2) == 1.0


def test_ndcg_equals_brute_force_definition() -> None:
    rng = np.random.default_rng(4)
    ideal = [f"model{i}" for i in range(10)]
    for _ in range(20):
        ranking = list(rng.permutation(ideal))
        n = int(rng.integers(1, 11))
        rel = {m: 10 - i for i, m in enumerate(ideal)}
        dcg = sum(rel[m] / math.log2(i + 2) for i, m in enumerate(ranking[:n]))
        idcg = sum(rel[m] / math.log2(i + 2) for i, m in enumerate(ideal[:n]))
        assert ndcg_at(ranking, ideal, n) == pytest.approx(dcg / idcg)


def test_ndcg_validates() -> None:
    with pytest.raises(ValueError, match="same items"):
        ndcg_at(["a", "b"], ["a", "c"], 1)
    with pytest.raises(ValueError, match="more than once"):
        ndcg_at(["a", "a"], ["a", "a"], 1)
    with pytest.raises(ValueError, match="n must be at least 1 and at most 2"):
        ndcg_at(["a", "b"], ["b", "a"], 3)


def test_model_selection_ndcg() -> None:
    gaps = {"m1": [-0.05, 0.02], "m2": [-0.20, 0.1], "m3": [0.0, 0.01]}  # ideal m3, m1, m2
    metric = {"m1": [0.1, 0.1], "m2": [0.2, 0.3], "m3": [0.5, 0.5]}  # ranks m1, m2, m3
    expected = (2 + 1 / math.log2(3)) / (3 + 2 / math.log2(3))
    assert model_selection_ndcg(metric, gaps, 2) == pytest.approx(expected)
    with pytest.raises(ValueError, match="same items"):
        model_selection_ndcg({"m1": [0.1]}, gaps, 1)


def test_spearman_matrix_matches_pairwise_scipy() -> None:
    rng = np.random.default_rng(6)
    table = pd.DataFrame(
        rng.normal(size=(9, 4)),
        index=[f"model{i}" for i in range(9)],
        columns=["standard", "bedtime", "personas", "esl"],
    )
    matrix = spearman_matrix(table)
    assert list(matrix.index) == list(matrix.columns) == list(table.columns)
    for left in table:
        for right in table:
            expected = (
                1.0 if left == right else stats.spearmanr(table[left], table[right]).statistic
            )
            assert matrix.loc[left, right] == pytest.approx(expected)


def test_spearman_matrix_validates() -> None:
    with pytest.raises(ValueError, match="DataFrame"):
        spearman_matrix([[1, 2], [3, 4]])
    with pytest.raises(ValueError, match="NaN"):
        spearman_matrix(pd.DataFrame({"a": [1.0, 2.0, math.nan], "b": [1.0, 2.0, 3.0]}))
