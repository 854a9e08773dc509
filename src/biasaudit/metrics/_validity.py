"""Whether a bias metric predicts the harm it stands for: correlations and model-selection NDCG.

Chen, Ji & Evans, "The Mismeasure of Man and Models" (2024),
Table 1 (predictive validity, model selection); Lum et al., "Bias in Language
Models: Beyond Trick Tests and Towards RUTEd Evaluation" (ACL 2025)
(rank correlations of models across contexts).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from biasaudit.metrics._small_samples import floor_p
from biasaudit.metrics._validate import (
    FloatArray,
    as_float_array,
    check_bool,
    check_int,
    check_same_length,
)

_MIN_POINTS = 3


@dataclass(frozen=True)
class CorrelationResult:
    """A correlation coefficient with its two-sided p-value.

    Attributes
    ----------
    r : float
        Pearson's r or Spearman's rho, in [-1, 1].
    p_value : float
        Two-sided p-value for no association.
    n : int
        Points correlated.
    method : str
        ``"pearson"`` or ``"spearman"``.
    """

    r: float
    p_value: float
    n: int
    method: str


def _paired(x: ArrayLike, y: ArrayLike) -> tuple[FloatArray, FloatArray]:
    x_values = as_float_array(x, "x", finite=True)
    y_values = as_float_array(y, "y", finite=True)
    check_same_length(x=x_values, y=y_values)
    if x_values.size < _MIN_POINTS:
        raise ValueError(f"a correlation needs at least {_MIN_POINTS} points, got {x_values.size}")
    for name, values in (("x", x_values), ("y", y_values)):
        if np.ptp(values) == 0:
            raise ValueError(f"{name} is constant, so its correlation is undefined")
    return x_values, y_values


def pearson(x: ArrayLike, y: ArrayLike) -> CorrelationResult:
    r"""Pearson correlation with its two-sided p-value.

    .. math:: r = \frac{\sum (x_i - \bar x)(y_i - \bar y)}
                       {\sqrt{\sum (x_i - \bar x)^2 \sum (y_i - \bar y)^2}},

    tested with :math:`t = r\sqrt{(n-2)/(1-r^2)}` on n - 2 degrees of freedom
    (``scipy.stats.pearsonr``).

    Parameters
    ----------
    x, y : array_like
        At least 3 paired finite values; neither may be constant.

    Returns
    -------
    CorrelationResult

    References
    ----------
    Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024, Table 1.
    """
    from scipy import stats  # scipy.stats is a slow import (~0.4 s) that most runs never need

    x_values, y_values = _paired(x, y)
    result = stats.pearsonr(x_values, y_values)
    return CorrelationResult(
        r=float(result.statistic),
        p_value=floor_p(float(result.pvalue)),
        n=x_values.size,
        method="pearson",
    )


def spearman(x: ArrayLike, y: ArrayLike) -> CorrelationResult:
    r"""Spearman rank correlation with its two-sided p-value.

    Pearson's r of the average ranks of x and of y (ties share their mean
    rank). The p-value is exact for up to :data:`EXACT_SPEARMAN` pairs: the
    share of the n! orderings of y's ranks whose |r| is at least the
    observed one (with 3 models, r = 1 has p = 1/3, where the t
    approximation ``scipy.stats.spearmanr`` uses gives 0); beyond, as
    ``scipy.stats.spearmanr`` tests it.

    Parameters
    ----------
    x, y : array_like
        At least 3 paired finite values; neither may be constant.

    Returns
    -------
    CorrelationResult

    References
    ----------
    Spearman, "The proof and measurement of association between two things",
    Am. J. Psychol. 15 (1904); Lum et al., "Bias in Language Models: Beyond
    Trick Tests and Towards RUTEd Evaluation", 2025.
    """
    from scipy import stats  # scipy.stats is a slow import (~0.4 s) that most runs never need

    x_values, y_values = _paired(x, y)
    result = stats.spearmanr(x_values, y_values)
    p_value = float(result.pvalue)
    if x_values.size <= EXACT_SPEARMAN:
        p_value = _exact_spearman_p(x_values, y_values, float(result.statistic))
    return CorrelationResult(
        r=float(result.statistic),
        p_value=floor_p(p_value),
        n=x_values.size,
        method="spearman",
    )


# Up to this many pairs the Spearman p-value is exact (8! = 40,320 orderings).
EXACT_SPEARMAN = 8


def _exact_spearman_p(x: FloatArray, y: FloatArray, observed: float) -> float:
    """Share of the orderings of y's ranks whose |Spearman r| reaches the observed one."""
    from scipy import stats

    rank_x = stats.rankdata(x)
    rank_y = stats.rankdata(y)
    orders = np.array(list(itertools.permutations(range(y.size))))
    shuffled = rank_y[orders]
    centred_x = rank_x - rank_x.mean()
    centred = shuffled - shuffled.mean(axis=1, keepdims=True)
    r = (centred @ centred_x) / (
        np.sqrt((centred**2).sum(axis=1)) * math.sqrt(float((centred_x**2).sum()))
    )
    return float(np.mean(np.abs(r) >= abs(observed) - 1e-12))


def spearman_matrix(table: pd.DataFrame) -> pd.DataFrame:
    """Spearman correlation between every two columns of a models-by-contexts table.

    Lum et al. compare how models rank under the standard benchmark and under
    each RUTEd context by the Spearman correlation of their metric values.

    Parameters
    ----------
    table : pandas.DataFrame
        One row per model, one column per context (or metric); at least 3
        rows, no missing values, no constant column.

    Returns
    -------
    pandas.DataFrame
        Square, symmetric, indexed and labelled by the columns of ``table``,
        with ones on the diagonal.

    References
    ----------
    Lum et al., "Bias in Language Models: Beyond Trick Tests and Towards RUTEd
    Evaluation", 2025.
    """
    if not isinstance(table, pd.DataFrame):
        raise ValueError(f"table must be a pandas DataFrame, got {type(table).__name__}")
    columns = {name: as_float_array(table[name], f"column {name!r}", finite=True) for name in table}
    names = list(columns)
    matrix = pd.DataFrame(np.eye(len(names)), index=table.columns, columns=table.columns)
    for i, left in enumerate(names):
        for right in names[i + 1 :]:
            rho = spearman(columns[left], columns[right]).r
            matrix.loc[left, right] = matrix.loc[right, left] = rho
    return matrix


def predictive_validity(
    metric: ArrayLike, gap: ArrayLike, *, directional: bool = True
) -> CorrelationResult:
    r"""Pearson correlation between a bias metric and an allocation gap.

    Each point is one (model, subtask, group) combination: the metric's value
    and the allocation gap (ΔDP or ΔEO at some k) measured by
    :func:`simulate_selection`. A directional metric (RABBI, average score
    gap) is compared with the signed gap; a non-directional one (JSD, EMD)
    with :math:`|\text{gap}|`, as Chen, Ji & Evans do.

    Parameters
    ----------
    metric : array_like
        Metric value of each point.
    gap : array_like
        Allocation gap of each point.
    directional : bool
        False for metrics that carry no sign, to correlate with ``|gap|``.

    Returns
    -------
    CorrelationResult
        Pearson r and its p-value.

    References
    ----------
    Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024, Table 1;
    Cyberey, Ji & Evans, "Do Prevalent Bias Metrics Capture Allocational Harms
    from LLMs?", 2025.
    """
    directional = check_bool(directional, "directional")
    gaps = as_float_array(gap, "gap", finite=True)
    return pearson(metric, gaps if directional else np.abs(gaps))


def rms(values: ArrayLike) -> float:
    r"""Root-mean-square of per-group bias values, :math:`\sqrt{\frac1G \sum_g b_g^2}`.

    Chen, Ji & Evans summarise a model's bias over groups this way before
    ranking models.

    References
    ----------
    Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024.
    """
    bias = as_float_array(values, "values", finite=True)
    return math.sqrt(float(np.mean(bias**2)))


def rank_models_by_rms(
    bias_by_model: Mapping[Hashable, ArrayLike] | pd.DataFrame,
) -> tuple[Hashable, ...]:
    """Models ordered from least to most biased by the RMS of their per-group bias.

    Parameters
    ----------
    bias_by_model : mapping or pandas.DataFrame
        Per-group bias of each model: a mapping from model to values, or a
        DataFrame with one row per model and one column per group.

    Returns
    -------
    tuple
        Model ids, least biased first; equal RMS keeps the input order.

    References
    ----------
    Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024.
    """
    if isinstance(bias_by_model, pd.DataFrame):
        items = [(model, row.to_numpy()) for model, row in bias_by_model.iterrows()]
    else:
        items = list(bias_by_model.items())
    if not items:
        raise ValueError("bias_by_model is empty: ranking needs at least one model")
    scores = [rms(values) for _, values in items]
    order = np.argsort(scores, kind="stable")
    return tuple(items[i][0] for i in order)


def ndcg_at(
    ranking: Sequence[Hashable], ideal: Sequence[Hashable], n: int, *, convention: str = "biasaudit"
) -> float:
    r"""Normalised discounted cumulative gain of a ranking at cutoff n.

    The relevance of an item is its reverse rank in the ideal ordering:
    with M items, the ideal first has relevance M, the last 1
    (``convention="paper"``: M-1 to 0, as Chen, Ji & Evans write it, so the
    last model counts for nothing; biasaudit keeps it a least relevant one).
    With log2 discount,

    .. math::

        \mathrm{DCG@}n = \sum_{i=1}^{n} \frac{\mathrm{rel}(\text{ranking}_i)}{\log_2(i + 1)},
        \qquad \mathrm{NDCG@}n = \frac{\mathrm{DCG@}n}{\mathrm{IDCG@}n},

    where IDCG@n is the DCG@n of ``ideal`` itself. Used to score how well a
    bias metric picks the models with the smallest allocation gaps.

    Parameters
    ----------
    ranking : sequence
        Items in the order a metric ranks them (best first).
    ideal : sequence
        The same items in the true order (e.g. by allocation gap).
    n : int
        Cutoff, from 1 to the number of items.

    Returns
    -------
    float
        NDCG@n in (0, 1]; 1 when the top n agree with the ideal order.

    References
    ----------
    Järvelin & Kekäläinen, "Cumulated gain-based evaluation of IR
    techniques", ACM TOIS 20 (2002); Chen, Ji & Evans, "The Mismeasure of Man
    and Models", 2024.
    """
    ranking_items, ideal_items = list(ranking), list(ideal)
    if len(set(ideal_items)) != len(ideal_items):
        raise ValueError("ideal lists an item more than once")
    if len(ranking_items) != len(ideal_items) or set(ranking_items) != set(ideal_items):
        raise ValueError("ranking and ideal must order the same items, each once")
    n = check_int(n, "n", minimum=1, maximum=len(ideal_items))
    size = len(ideal_items)
    # The paper's relevance runs M-1 .. 0: its last item counts for nothing.
    top = size - (1 if convention == "paper" else 0)
    relevance = {item: top - position for position, item in enumerate(ideal_items)}
    discount = 1 / np.log2(np.arange(2, n + 2))
    gains = np.array([relevance[item] for item in ranking_items[:n]], dtype=float)
    ideal_gains = np.arange(top, top - n, -1, dtype=float)
    if not ideal_gains.any():  # one model under the paper's relevance: nothing to gain
        return math.nan
    return float(gains @ discount / (ideal_gains @ discount))


def model_selection_ndcg(
    metric_bias: Mapping[Hashable, ArrayLike] | pd.DataFrame,
    gap_bias: Mapping[Hashable, ArrayLike] | pd.DataFrame,
    n: int,
    *,
    convention: str = "biasaudit",
) -> float:
    """NDCG@n of the model ranking a bias metric gives, against the ranking by allocation gap
    (``convention``: the relevance scale of :func:`ndcg_at`).

    Both rankings order models by the RMS of their per-group values
    (:func:`rank_models_by_rms`); the gap ranking is the ideal.

    Parameters
    ----------
    metric_bias : mapping or pandas.DataFrame
        Per-group metric values of each model.
    gap_bias : mapping or pandas.DataFrame
        Per-group allocation gaps of the same models.
    n : int
        Cutoff.

    Returns
    -------
    float
        NDCG@n.

    References
    ----------
    Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024.
    """
    return ndcg_at(
        rank_models_by_rms(metric_bias), rank_models_by_rms(gap_bias), n, convention=convention
    )
