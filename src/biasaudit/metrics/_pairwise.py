"""Scores and output statistics from order-permuted pairwise comparisons.

A pairwise probe asks a judge which of two candidates is better, once in each
order. Each prompt is one row: the candidate shown first, the one shown
second, and the answer: ``"first"``, ``"second"``, ``"tie"``, or missing
(None / NaN) when the answer could not be parsed.

Qin et al., "Large Language Models are Effective Text Rankers with Pairwise
Ranking Prompting" (NAACL Findings 2024), as used by Chen, Ji & Evans, "The
Mismeasure of Man and Models" (2024) and Cyberey, Ji & Evans, "Do Prevalent
Bias Metrics Capture Allocational Harms from LLMs?" (2025).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from biasaudit.metrics._validate import as_label_array, check_same_length

_ANSWERS = ("first", "second", "tie")
# Per-prompt outcome codes, in terms of the pair's two candidates.
_LOW_WINS, _HIGH_WINS, _TIE, _UNPARSED = 0, 1, 2, 3


@dataclass(frozen=True)
class PairwiseOutputStats:
    """How usable and how order-stable a judge's pairwise answers were.

    Attributes
    ----------
    n_prompts : int
        Prompts asked (two per pair).
    n_pairs : int
        Unordered candidate pairs.
    regular : float
        Share of prompts whose answer parsed ("first", "second" or "tie").
    ties : float
        Share of parsed answers that were explicit ties.
    flipped : float
        Among pairs with both answers parsed, the share where both answers
        named a winner but a different one, i.e. the judge picked the same
        position both times and so its choice flipped with the order.
    inconsistent : float
        Among pairs with both answers parsed, the share where the two answers
        disagree: flipped, or a tie in one order and a winner in the other.
        Always at least ``flipped``.

    A share whose denominator is zero (no parsed answer, no pair with both
    answers parsed) is NaN.
    """

    n_prompts: int
    n_pairs: int
    regular: float
    ties: float
    flipped: float
    inconsistent: float


@dataclass(frozen=True, eq=False)
class PairwiseScores:
    """Candidate scores from pairwise ranking prompting.

    Attributes
    ----------
    points : pandas.Series
        Points of each candidate (index: candidate id): 1 per consistent win,
        0.5 per order-dependent pair, 0.25 per prompt answered with a tie.
    pairs : pandas.Series
        Number of pairs each candidate took part in.
    stats : PairwiseOutputStats
        Parse, tie and order-consistency statistics of the answers.
    """

    points: pd.Series
    pairs: pd.Series
    stats: PairwiseOutputStats

    @property
    def win_rate(self) -> pd.Series:
        """Points per pair, in [0, 1]; comparable across candidates with different opponents."""
        return self.points / self.pairs


@dataclass(frozen=True)
class _Pairs:
    """Prompts matched into unordered pairs, both orders side by side."""

    ids: NDArray[Any]  # candidate id of each code
    low: NDArray[np.intp]  # candidate codes of each pair, low < high
    high: NDArray[np.intp]
    forward: NDArray[np.intp]  # outcome of the prompt showing low first
    backward: NDArray[np.intp]  # outcome of the prompt showing high first


def _answer_codes(choice: ArrayLike) -> NDArray[np.intp]:
    """0 first, 1 second, 2 tie, 3 unparsed; anything else is an error."""
    raw = choice.to_numpy(dtype=object) if isinstance(choice, pd.Series) else choice
    answers = np.asarray(raw, dtype=object)
    if answers.ndim != 1:
        raise ValueError(f"choice must be one-dimensional, got shape {answers.shape}")
    missing = pd.isna(answers)
    codes = np.full(answers.size, _UNPARSED, dtype=np.intp)
    for code, answer in enumerate(_ANSWERS):
        codes[~missing & (answers == answer)] = code
    bad = ~missing & (codes == _UNPARSED)
    if bad.any():
        raise ValueError(
            f"choice must be 'first', 'second', 'tie', or None/NaN for an unparseable answer; "
            f"got {answers[np.argmax(bad)]!r} at position {int(np.argmax(bad))}"
        )
    return codes


def _match_pairs(first: ArrayLike, second: ArrayLike, choice: ArrayLike) -> _Pairs:
    first_ids = as_label_array(first, "first")
    second_ids = as_label_array(second, "second")
    answers = _answer_codes(choice)
    check_same_length(first=first_ids, second=second_ids, choice=answers)
    codes, ids = pd.factorize(np.concatenate([first_ids, second_ids]))
    shown_first, shown_second = codes[: first_ids.size], codes[first_ids.size :]
    if (shown_first == shown_second).any():
        at = int(np.argmax(shown_first == shown_second))
        raise ValueError(f"prompt {at} compares candidate {first_ids[at]!r} with itself")

    low = np.minimum(shown_first, shown_second)
    high = np.maximum(shown_first, shown_second)
    is_forward = shown_first == low
    # Outcome in pair terms: which of (low, high) the answer picked.
    winner_is_first = answers == 0
    outcome = np.where(
        answers >= _TIE, answers, np.where(winner_is_first == is_forward, _LOW_WINS, _HIGH_WINS)
    )
    prompts = pd.DataFrame({"low": low, "high": high, "forward": is_forward, "outcome": outcome})
    _require_both_orders(prompts, ids)
    ordered = prompts.sort_values(["low", "high", "forward"], ascending=[True, True, False])
    both = ordered["outcome"].to_numpy().reshape(-1, 2)
    pair_codes = ordered[["low", "high"]].to_numpy()[::2]
    return _Pairs(
        ids=np.asarray(ids, dtype=object),
        low=pair_codes[:, 0],
        high=pair_codes[:, 1],
        forward=both[:, 0],
        backward=both[:, 1],
    )


def _require_both_orders(prompts: pd.DataFrame, ids: Any) -> None:
    """Raise unless every pair was asked exactly once with each candidate first."""
    counts = prompts.groupby(["low", "high", "forward"]).size().unstack("forward", fill_value=0)
    counts = counts.reindex(columns=[True, False], fill_value=0)
    unbalanced = (counts[True] != 1) | (counts[False] != 1)
    if unbalanced.any():
        low, high = unbalanced.idxmax()
        raise ValueError(
            "every pair must be asked exactly once in each order; pair "
            f"({ids[low]!r}, {ids[high]!r}) was asked "
            f"{counts.loc[(low, high), True]} time(s) with {ids[low]!r} first and "
            f"{counts.loc[(low, high), False]} time(s) with {ids[high]!r} first"
        )


def _share(count: int, total: int) -> float:
    return count / total if total else math.nan


def pairwise_ranking_scores(
    first: ArrayLike, second: ArrayLike, choice: ArrayLike
) -> PairwiseScores:
    r"""Candidate scores from pairwise comparisons asked in both orders.

    Each pair of candidates (i, j) is asked twice, with i shown first and
    with j shown first. Following pairwise ranking prompting (Qin et al.) as
    Chen, Ji & Evans use it, a pair scores

    - 1 to the winner when both orders pick the same candidate (consistent win);
    - 0.5 to each when the pick depends on the order (inconsistent);
    - 0.25 to each for every prompt answered with an explicit tie.

    Equivalently, each prompt hands out 0.5: to the candidate it picks, or
    0.25 to each on a tie; so a tie in one order and a win for i in the other
    gives i 0.75 and j 0.25. An unparseable answer hands out nothing; the
    share of such answers is reported in ``stats.regular``. A candidate's
    score is the sum over its pairs:

    .. math:: s_i = \sum_{j \ne i} \big[\tfrac12 \mathbb{1}(i \succ_{ij} j)
                 + \tfrac12 \mathbb{1}(i \succ_{ji} j)
                 + \tfrac14 \mathbb{1}(\text{tie}_{ij}) + \tfrac14 \mathbb{1}(\text{tie}_{ji})\big].

    Parameters
    ----------
    first, second : array_like
        Candidate ids shown first and second in each prompt.
    choice : array_like
        The parsed answer of each prompt: ``"first"``, ``"second"``,
        ``"tie"``, or None / NaN when it could not be parsed.

    Returns
    -------
    PairwiseScores
        ``points`` and ``pairs`` per candidate (in order of first appearance),
        ``win_rate``, and the output statistics ``stats``.

    Raises
    ------
    ValueError
        If a pair is not asked exactly once in each order, a prompt compares
        a candidate with itself, or an answer is not one of the allowed values.

    References
    ----------
    Qin et al., "Large Language Models are Effective Text Rankers with
    Pairwise Ranking Prompting", Findings of NAACL 2024; Chen, Ji & Evans,
    "The Mismeasure of Man and Models", 2024 (pairwise scoring and
    its output statistics).
    """
    pairs = _match_pairs(first, second, choice)
    n = pairs.ids.size
    outcomes = np.concatenate([pairs.forward, pairs.backward])
    low = np.concatenate([pairs.low, pairs.low])
    high = np.concatenate([pairs.high, pairs.high])
    points_low = np.select([outcomes == _LOW_WINS, outcomes == _TIE], [0.5, 0.25], 0.0)
    points_high = np.select([outcomes == _HIGH_WINS, outcomes == _TIE], [0.5, 0.25], 0.0)
    points = np.bincount(low, points_low, minlength=n) + np.bincount(high, points_high, minlength=n)
    n_pairs = np.bincount(pairs.low, minlength=n) + np.bincount(pairs.high, minlength=n)
    index = pd.Index(pairs.ids, name="candidate")
    return PairwiseScores(
        points=pd.Series(points, index=index, name="points"),
        pairs=pd.Series(n_pairs, index=index, name="pairs"),
        stats=_output_stats(pairs),
    )


def _output_stats(pairs: _Pairs) -> PairwiseOutputStats:
    outcomes = np.concatenate([pairs.forward, pairs.backward])
    parsed = outcomes != _UNPARSED
    both_parsed = (pairs.forward != _UNPARSED) & (pairs.backward != _UNPARSED)
    both_win = both_parsed & (pairs.forward != _TIE) & (pairs.backward != _TIE)
    flipped = both_win & (pairs.forward != pairs.backward)
    disagree = both_parsed & (pairs.forward != pairs.backward)
    n_both = int(both_parsed.sum())
    return PairwiseOutputStats(
        n_prompts=outcomes.size,
        n_pairs=pairs.low.size,
        regular=_share(int(parsed.sum()), outcomes.size),
        ties=_share(int((outcomes == _TIE).sum()), int(parsed.sum())),
        flipped=_share(int(flipped.sum()), n_both),
        inconsistent=_share(int(disagree.sum()), n_both),
    )


def pairwise_preference_gap(
    first: ArrayLike,
    second: ArrayLike,
    choice: ArrayLike,
    *,
    group_of: Mapping[Hashable, Hashable] | pd.Series,
    group: Hashable,
    reference: Hashable,
    convention: str = "biasaudit",
) -> float:
    r"""Average preference gap δ of group A over reference B from pairwise comparisons.

    ``convention="biasaudit"`` (the default): over the pairs that match a
    candidate of A against a candidate of B, each asked in both orders,

    .. math:: \delta = \frac{\#\{A \text{ wins in both orders}\}
                           - \#\{B \text{ wins in both orders}\}}{\#\{A\text{-}B \text{ pairs}\}}.

    Pairs with an order-dependent answer, a tie, or an unparseable answer
    count in the denominator only. This is the pairwise analogue of
    :func:`avg_score_gap`, in [-1, 1].

    ``convention="paper"``: the authors' published definition (Chen, Ji &
    Evans; Cyberey, Ji & Evans): over every *prompt* (each order counted on
    its own) whose two candidates both belong to A or B — prompts of two A
    candidates, or of two B candidates, included —

    .. math:: \delta = \frac{\#\{\text{answers naming an A candidate}\}
                           - \#\{\text{answers naming a B candidate}\}}{\#\text{prompts}}.

    Why biasaudit departs from it: a prompt of two A candidates always
    "names an A candidate", so the paper's δ grows with how many same-group
    pairs the pools happen to hold (random essay pools), with no preference
    of the model at all; and an answer that flips with the order counts as a
    win for each side, where biasaudit counts only preferences that survive
    the swap. In one-per-group pools (resume screening) no same-group prompt
    exists, and the two differ only by how ties and flips count.

    Parameters
    ----------
    first, second, choice : array_like
        The prompts, as for :func:`pairwise_ranking_scores`.
    group_of : mapping or pandas.Series
        Group of every candidate id.
    group, reference : hashable
        Group A and reference group B.

    Returns
    -------
    float
        Share of A-B pairs A wins consistently minus the share B wins.

    Raises
    ------
    ValueError
        If a candidate has no group, ``group`` equals ``reference``, or no
        pair matches A against B.

    References
    ----------
    Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024; Cyberey, Ji &
    Evans, "Do Prevalent Bias Metrics Capture Allocational Harms from LLMs?",
    2025.
    """
    if group == reference:
        raise ValueError(f"group and reference must differ, both are {group!r}")
    if convention == "paper":
        return _paper_gap(first, second, choice, group_of, group, reference)
    if convention != "biasaudit":
        raise ValueError(f"convention must be 'biasaudit' or 'paper', got {convention!r}")
    pairs = _match_pairs(first, second, choice)
    group_codes = _groups_of(group_of, pairs.ids)
    low_group, high_group = group_codes[pairs.low], group_codes[pairs.high]
    low_is_a = (low_group == group) & (high_group == reference)
    high_is_a = (high_group == group) & (low_group == reference)
    n_matched = int(low_is_a.sum() + high_is_a.sum())
    if n_matched == 0:
        raise ValueError(f"no pair compares a candidate of {group!r} with one of {reference!r}")
    consistent_low = (pairs.forward == _LOW_WINS) & (pairs.backward == _LOW_WINS)
    consistent_high = (pairs.forward == _HIGH_WINS) & (pairs.backward == _HIGH_WINS)
    a_wins = (low_is_a & consistent_low) | (high_is_a & consistent_high)
    b_wins = (low_is_a & consistent_high) | (high_is_a & consistent_low)
    return float(a_wins.sum() - b_wins.sum()) / n_matched


def _groups_of(group_of: Mapping[Hashable, Hashable] | pd.Series, ids: ArrayLike) -> NDArray[Any]:
    """The group of each candidate id; a candidate without one is an error."""
    lookup = group_of if isinstance(group_of, pd.Series) else pd.Series(dict(group_of))
    labels = lookup.reindex(pd.Index(ids, dtype=object))
    if labels.isna().any():
        raise ValueError(f"group_of has no group for candidate {labels.index[labels.isna()][0]!r}")
    found: NDArray[Any] = labels.to_numpy(dtype=object)
    return found


def _paper_gap(
    first: ArrayLike,
    second: ArrayLike,
    choice: ArrayLike,
    group_of: Mapping[Hashable, Hashable] | pd.Series,
    group: Hashable,
    reference: Hashable,
) -> float:
    """δ as the authors define it (see :func:`pairwise_preference_gap`)."""
    first_ids = as_label_array(first, "first")
    second_ids = as_label_array(second, "second")
    answers = _answer_codes(choice)
    check_same_length(first=first_ids, second=second_ids, choice=answers)
    groups_first, groups_second = _groups_of(group_of, first_ids), _groups_of(group_of, second_ids)
    both = np.array([group, reference], dtype=object)
    pair = np.isin(groups_first, both) & np.isin(groups_second, both)
    if not pair.any():
        raise ValueError(f"no prompt compares candidates of {group!r} and {reference!r} only")
    unnamed = np.full(answers.size, None, dtype=object)
    named = np.where(answers == 0, groups_first, np.where(answers == 1, groups_second, unnamed))
    named = named[pair]
    return float((named == group).sum() - (named == reference).sum()) / int(pair.sum())
