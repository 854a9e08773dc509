"""Grade Score: order bias and choice stability of an LLM judge.

Iourovitski, "Grade Score: Quantifying LLM Performance in Option Selection"
(arXiv:2406.12043, 2024).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from biasaudit.metrics._small_samples import floor_p
from biasaudit.metrics._validate import check_confidence, check_int, check_same_length


@dataclass(frozen=True)
class GradeScore:
    """Grade Score of one item asked under permutations of its options.

    Attributes
    ----------
    grade : float
        Harmonic mean of ``entropy`` and ``choice``; 0 if either is 0.
    entropy : float
        Entropy of the chosen positions over the usable trials, normalised by
        log2(n_options): 1 when every position is chosen equally often (no
        order bias), 0 when one position is always chosen.
    choice : float
        Share of the usable trials that chose the most frequently chosen
        option (mode frequency): 1 when the judge always picks the same
        option whatever its position.
    n_trials : int
        Trials (permutations) asked.
    n_unparsed : int
        Trials whose answer could not be parsed; excluded from the scores.
    position_counts : tuple of int
        How often each position (slot 0..n_options-1) was chosen.
    """

    grade: float
    entropy: float
    choice: float
    n_trials: int
    n_unparsed: int
    position_counts: tuple[int, ...]


@dataclass(frozen=True)
class GradeScoreSummary:
    """Grade Score over a set of items, named as in a Grade Score run's ``metrics.json``.

    Attributes
    ----------
    grade_score : float
        Mean Grade Score over items.
    grade_score_ci : (float, float)
        Student-t interval over items (:func:`item_interval`); (nan, nan)
        with fewer than :data:`MIN_ITEMS` items ("too few").
    entropy, choice : float
        Mean entropy score and mean choice score over items.
    entropy_ci, choice_ci : (float, float)
        Intervals for those means, like ``grade_score_ci``.
    items : int
        Items aggregated.
    unparsed : int
        Unparseable answers over all items.
    position_histogram : tuple of float
        Share of all usable answers that chose each position.
    confidence : float
        Level of the interval.
    position_counts : tuple of int
        Usable answers that chose each position.
    position_ci : tuple of (float, float)
        Exact binomial interval of each position's share, simultaneous over
        the positions (:func:`position_intervals`).
    slot_test : SlotTest or None
        Pearson's χ² test that no position is preferred; None without usable answers.
    slot_p : float or None
        The exact test that no position is preferred, the one ``position_ci``
        inverts (:func:`position_intervals`); None without usable answers.
    """

    grade_score: float
    grade_score_ci: tuple[float, float]
    entropy: float
    choice: float
    entropy_ci: tuple[float, float]
    choice_ci: tuple[float, float]
    items: int
    unparsed: int
    position_histogram: tuple[float, ...]
    confidence: float
    position_counts: tuple[int, ...] = ()
    position_ci: tuple[tuple[float, float], ...] = ()
    slot_test: SlotTest | None = None
    slot_p: float | None = None


# Fewer items than this give no interval: a bootstrap or t-interval from two or three
# items says more about the items drawn than about the judge.
MIN_ITEMS = 5


@dataclass(frozen=True)
class SlotTest:
    """Pearson's χ² test that every position is chosen equally often.

    Under "no position preferred" and orders that put every option in every
    slot equally often (cyclic or all), a judge that always picks the same
    option spreads its answers evenly over the slots: the answers of one item
    are *more* even than independent draws, so the test, which treats answers
    as independent, is conservative there, and exact-level for a judge that
    answers at random (Pearson, 1900; Iourovitski, 2024, for the design).

    Attributes
    ----------
    statistic : float
        Σ (observed - expected)² / expected over the positions.
    df : int
        Positions - 1.
    p : float
        Upper tail of χ² with ``df`` degrees of freedom.
    n : int
        Usable answers.
    """

    statistic: float
    df: int
    p: float
    n: int


def slot_test(counts: ArrayLike) -> SlotTest | None:
    """:class:`SlotTest` of the usable answers per position; None when there are none."""
    observed = np.asarray(counts, dtype=float)
    n = float(observed.sum())
    if n == 0 or observed.size < 2:
        return None
    from scipy import stats  # a slow import most runs do not need until here

    expected = n / observed.size
    statistic = float(((observed - expected) ** 2 / expected).sum())
    df = observed.size - 1
    return SlotTest(statistic, df, floor_p(float(stats.chi2.sf(statistic, df))), int(n))


def item_interval(
    values: ArrayLike, *, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Student-t interval of the mean of per-item values, over items, within [0, 1].

    Items are the units that vary: the interval is :func:`mean_interval`
    (mean ± t with m - 1 degrees of freedom times the standard error, m
    items), clipped to [0, 1], the range of every per-item Grade Score
    figure. A percentile bootstrap over so few items covers too little (at 5
    items its 95% interval is a z-interval shrunk by √(4/5)); t holds its
    level from 5 items up (``tests/metrics/test_metrics_small_samples.py``).
    Where every item scores 1 (or 0) the spread seen is none, and t would give
    no width: the interval is then the exact one for values in [0, 1]
    (Clopper-Pearson with every item at the edge: [(a/2)^(1/m), 1] at level 1 - a).
    (nan, nan) with fewer than :data:`MIN_ITEMS` items: too few to say.
    ``seed`` is kept for callers of the bootstrap it replaced and is unused.
    """
    confidence = check_confidence(confidence)
    sample = np.asarray(values, dtype=float)
    if sample.ndim != 1 or np.isnan(sample).any():
        raise ValueError("values must be one-dimensional numbers without NaN")
    if sample.size < MIN_ITEMS:
        return (math.nan, math.nan)
    tail = (1 - confidence) / 2
    if np.all(sample == 1.0):
        # No spread seen at the edge: the exact bound of a mean of values in [0, 1], whose
        # widest case is 0 or 1 each (Clopper-Pearson with every item a success).
        return (float(tail ** (1 / sample.size)), 1.0)
    if np.all(sample == 0.0):
        return (0.0, float(1 - tail ** (1 / sample.size)))
    low, high = mean_interval(sample, confidence=confidence)
    return (max(0.0, low), min(1.0, high))


def position_intervals(
    counts: ArrayLike, *, confidence: float = 0.95
) -> tuple[tuple[tuple[float, float], ...], float | None]:
    """Each position's share of the usable answers with an exact binomial interval, and
    the exact test that no position is preferred; the two always agree.

    The intervals are Clopper-Pearson ("The use of confidence or fiducial
    limits illustrated in the case of the binomial", Biometrika 26, 1934) at
    the simultaneous level: 1 - (1 - ``confidence``) / k for k positions
    (Bonferroni), so that all k cover together. The test takes each
    position's two-sided exact binomial p-value against 1/k (twice the
    smaller tail, the p-value the Clopper-Pearson interval inverts) and
    multiplies the smallest by k (Bonferroni). Hence a position's interval
    excludes 1/k exactly when the test's p is below 1 - ``confidence``.
    Answers are treated as independent; with every option in every slot
    equally often (cyclic orders) an item's answers are *more* even than
    independent draws under "no position preferred", so both are
    conservative there (see :class:`SlotTest`).

    Returns
    -------
    intervals : tuple of (float, float)
        Per position; (nan, nan) each without usable answers.
    p : float or None
        The test's p-value (at least :data:`~biasaudit.metrics.P_FLOOR`); None
        without usable answers.
    """
    from scipy import stats  # a slow import most runs do not need until here

    confidence = check_confidence(confidence)
    observed = np.asarray(counts, dtype=np.int64)
    n, k = int(observed.sum()), observed.size
    if n == 0 or k < 2:
        return tuple((math.nan, math.nan) for _ in range(k)), None
    level = 1 - (1 - confidence) / k
    intervals = []
    for x in observed.tolist():
        found = stats.binomtest(int(x), n, 1 / k).proportion_ci(level, method="exact")
        intervals.append((float(found.low), float(found.high)))
    return tuple(intervals), floor_p(min(1.0, k * min(position_p_values(observed))))


def position_p_values(counts: ArrayLike) -> tuple[float, ...]:
    """Each position's two-sided exact binomial p-value against 1/k (twice the smaller
    tail, capped at 1: the p-value the Clopper-Pearson interval inverts), unadjusted;
    :func:`position_intervals` multiplies the smallest by k. Empty without usable
    answers or with fewer than two positions."""
    from scipy import stats

    observed = np.asarray(counts, dtype=np.int64)
    n, k = int(observed.sum()), observed.size
    if n == 0 or k < 2:
        return ()
    return tuple(
        min(1.0, 2.0 * float(min(stats.binom.cdf(x, n, 1 / k), stats.binom.sf(x - 1, n, 1 / k))))
        for x in observed.tolist()
    )


def _is_unparsed(values: NDArray[Any]) -> NDArray[np.bool_]:
    """None, NaN / pd.NA, and -1 all mark an answer that could not be parsed."""
    missing: NDArray[np.bool_] = np.asarray(pd.isna(values), dtype=bool)
    minus_one: NDArray[np.bool_] = np.fromiter(
        (not m and _equals_minus_one(v) for v, m in zip(values, missing, strict=True)),
        dtype=bool,
        count=values.size,
    )
    return missing | minus_one


def _equals_minus_one(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and value == -1


def _as_answers(values: ArrayLike | Sequence[Any], name: str) -> NDArray[Any]:
    raw = values.to_numpy(dtype=object) if isinstance(values, pd.Series) else values
    answers = np.asarray(raw, dtype=object)
    if answers.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {answers.shape}")
    return answers


def grade_score(
    positions: ArrayLike | Sequence[Any],
    options: ArrayLike | Sequence[Any],
    n_options: int,
) -> GradeScore:
    r"""Grade Score of one item from the answers to permutations of its options.

    Each trial shows the item's ``n_options`` options in a different order
    (e.g. the n cyclic permutations) and records which position the judge
    chose and which original option sat there. Over the T usable trials,
    with :math:`p_j` the share choosing position j and :math:`c_o` the
    number choosing original option o,

    .. math::

        E = \frac{-\sum_j p_j \log_2 p_j}{\log_2 n}, \qquad
        C = \frac{\max_o c_o}{T}, \qquad
        \text{Grade} = \frac{2 E C}{E + C}.

    E (the "LLM score" of the paper) is high when the judge has no favourite
    position; C (the "choice score") is high when it keeps choosing the same
    option wherever it is placed. Trials whose answer is unparseable are
    excluded and counted; when no trial is usable every score is 0.

    Parameters
    ----------
    positions : array_like
        Chosen position of each trial, 0-based (0 .. n_options-1). None, NaN
        or -1 mark an unparseable answer.
    options : array_like
        Original option (index or label) chosen in each trial, missing
        exactly where ``positions`` is.
    n_options : int
        Options per trial, at least 2.

    Returns
    -------
    GradeScore
        ``grade``, ``entropy``, ``choice``, ``n_trials``, ``n_unparsed``,
        ``position_counts``.

    Raises
    ------
    ValueError
        If a position is outside 0..n_options-1 or not an integer, or a trial
        has a position but no option (or the reverse).

    References
    ----------
    Iourovitski, "Grade Score: Quantifying LLM Performance in Option
    Selection", 2024.
    """
    n_options = check_int(n_options, "n_options", minimum=2)
    chosen_positions = _as_answers(positions, "positions")
    chosen_options = _as_answers(options, "options")
    check_same_length(positions=chosen_positions, options=chosen_options)
    unparsed = _is_unparsed(chosen_positions)
    if (unparsed != _is_unparsed(chosen_options)).any():
        at = int(np.argmax(unparsed != _is_unparsed(chosen_options)))
        raise ValueError(f"trial {at} has a position or an option but not both")
    usable = _valid_positions(chosen_positions[~unparsed], n_options)
    counts = np.bincount(usable, minlength=n_options)
    result = {"n_trials": chosen_positions.size, "n_unparsed": int(unparsed.sum())}
    if usable.size == 0:
        return GradeScore(
            grade=0.0, entropy=0.0, choice=0.0, position_counts=tuple(counts.tolist()), **result
        )

    shares = counts[counts > 0] / usable.size
    entropy = float(-(shares * np.log2(shares)).sum() / math.log2(n_options))
    entropy = min(max(entropy, 0.0), 1.0) + 0.0  # clip rounding; + 0.0 turns -0.0 into 0.0
    option_counts = pd.Series(chosen_options[~unparsed]).value_counts()
    choice = float(option_counts.max() / usable.size)
    grade = 0.0 if entropy == 0.0 or choice == 0.0 else 2 * entropy * choice / (entropy + choice)
    return GradeScore(
        grade=grade,
        entropy=entropy,
        choice=choice,
        position_counts=tuple(counts.tolist()),
        **result,
    )


def _valid_positions(values: NDArray[Any], n_options: int) -> NDArray[np.intp]:
    try:
        numeric = values.astype(float)
    except (TypeError, ValueError):
        raise ValueError(
            "positions must be integers (or None / NaN / -1 when unparseable)"
        ) from None
    if not np.all(numeric == np.round(numeric)):
        raise ValueError("positions must be whole numbers")
    if ((numeric < 0) | (numeric >= n_options)).any():
        bad = numeric[(numeric < 0) | (numeric >= n_options)][0]
        raise ValueError(f"positions must be 0-based, from 0 to {n_options - 1}; got {bad:g}")
    return numeric.astype(np.intp)


def grade_score_summary(
    scores: Sequence[GradeScore], *, confidence: float = 0.95
) -> GradeScoreSummary:
    r"""Mean Grade Score, entropy and choice over items, with intervals over items.

    Each mean has a Student-t interval over the items
    (:func:`item_interval`; none with fewer than :data:`MIN_ITEMS`). The
    position histogram pools every usable answer; each position's share has
    an exact binomial interval, and the test that none is preferred agrees
    with them (:func:`position_intervals`; :func:`slot_test` is Pearson's
    χ²). Which items to pass is the caller's: an item with fewer usable
    answers than orders scores a lower entropy by construction (one answer:
    entropy 0), so a Grade Score run leaves such partial items out, counted.

    Parameters
    ----------
    scores : sequence of GradeScore
        One per item, from :func:`grade_score`.
    confidence : float
        Level of the interval.

    Returns
    -------
    GradeScoreSummary

    References
    ----------
    Iourovitski, "Grade Score: Quantifying LLM Performance in Option
    Selection", 2024.
    """
    confidence = check_confidence(confidence)
    items = list(scores)
    if not items:
        raise ValueError("scores is empty: summarise at least one item")
    if not all(isinstance(item, GradeScore) for item in items):
        raise ValueError("scores must be GradeScore results of grade_score()")
    widths = {len(item.position_counts) for item in items}
    if len(widths) > 1:
        raise ValueError(f"items have different numbers of options: {sorted(widths)}")
    grades = [item.grade for item in items]
    entropies = [item.entropy for item in items]
    choices = [item.choice for item in items]
    counts = np.sum([item.position_counts for item in items], axis=0)
    total = counts.sum()
    histogram = counts / total if total else np.zeros(counts.size)
    intervals, slot_p = position_intervals(counts, confidence=confidence)
    return GradeScoreSummary(
        grade_score=float(np.mean(grades)),
        grade_score_ci=item_interval(grades, confidence=confidence),
        entropy=float(np.mean(entropies)),
        choice=float(np.mean(choices)),
        entropy_ci=item_interval(entropies, confidence=confidence),
        choice_ci=item_interval(choices, confidence=confidence),
        items=len(items),
        unparsed=sum(item.n_unparsed for item in items),
        position_histogram=tuple(float(share) for share in histogram),
        confidence=confidence,
        position_counts=tuple(int(c) for c in counts),
        position_ci=intervals,
        slot_test=slot_test(counts),
        slot_p=slot_p,
    )


def mean_interval(
    values: ArrayLike | Sequence[float], *, confidence: float = 0.95
) -> tuple[float, float]:
    r"""Student-t interval for the mean of ``values``, one value per item.

    .. math:: \bar x \pm t_{(1+\text{confidence})/2,\; m-1}\, s / \sqrt{m}

    with m values and sample standard deviation s; (nan, nan) when m < 2. The
    interval :func:`grade_score_summary` gives each mean (Iourovitski, "Grade
    Score: Quantifying LLM Performance in Option Selection", 2024, averages
    the scores over items).

    Parameters
    ----------
    values : array_like
        One number per item; NaN is not allowed.
    confidence : float
        Level of the interval.

    Returns
    -------
    (float, float)
        Lower and upper bound.
    """
    confidence = check_confidence(confidence)
    sample = np.asarray(values, dtype=float)
    if sample.ndim != 1 or np.isnan(sample).any():
        raise ValueError("values must be one-dimensional numbers without NaN")
    if sample.size < 2:
        return (math.nan, math.nan)
    from scipy import stats  # scipy.stats is a slow import (~0.4 s) that most runs never need

    mean = float(sample.mean())
    half = float(
        stats.t.ppf((1 + confidence) / 2, sample.size - 1)
        * sample.std(ddof=1)
        / math.sqrt(sample.size)
    )
    return (mean - half, mean + half)
