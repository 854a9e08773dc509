"""Pairwise ranking scores, output statistics and preference gap, against hand-worked tables."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from biasaudit.metrics import pairwise_preference_gap, pairwise_ranking_scores

INPUT_TYPES: list[Callable[[Any], Any]] = [list, lambda v: np.asarray(v, dtype=object), pd.Series]
INPUT_IDS = ["list", "ndarray", "series"]

# Three candidates, every pair asked in both orders.
#   x-y: x wins both orders (consistent)          -> x 1
#   x-z: "first" both times (order-dependent)     -> x 0.5, z 0.5
#   y-z: tie with y first, z wins with z first    -> y 0.25, z 0.25 + 0.5
PROMPTS = [
    ("x", "y", "first"),
    ("y", "x", "second"),
    ("x", "z", "first"),
    ("z", "x", "first"),
    ("y", "z", "tie"),
    ("z", "y", "first"),
]


def columns(prompts: list[tuple[Any, Any, Any]]) -> tuple[list[Any], list[Any], list[Any]]:
    first, second, choice = zip(*prompts, strict=True)
    return list(first), list(second), list(choice)


def pair_rule_scores(prompts: list[tuple[Any, Any, Any]]) -> dict[Any, float]:
    """The paper's rule, pair by pair: 1 consistent win, 0.5 each if order-dependent,
    0.25 per tie prompt; a tie with a win in the other order keeps both parts."""
    answers: dict[frozenset[Any], dict[Any, Any]] = defaultdict(dict)
    for first, second, choice in prompts:
        picked = {"first": first, "second": second}.get(choice, choice)
        answers[frozenset((first, second))][first] = picked
    points: dict[Any, float] = defaultdict(float)
    for pair, by_first in answers.items():
        i, j = sorted(pair, key=str)
        picks = [by_first[i], by_first[j]]
        if picks[0] == picks[1] and picks[0] in pair:
            points[picks[0]] += 1.0
        elif all(p in pair for p in picks):
            points[i] += 0.5
            points[j] += 0.5
        else:
            for p in picks:
                if p == "tie":
                    points[i] += 0.25
                    points[j] += 0.25
                elif p in pair:
                    points[p] += 0.5
        points[i] += 0.0
        points[j] += 0.0
    return dict(points)


@pytest.mark.parametrize("as_type", INPUT_TYPES, ids=INPUT_IDS)
def test_scores_hand_worked(as_type: Callable[[Any], Any]) -> None:
    first, second, choice = columns(PROMPTS)
    result = pairwise_ranking_scores(as_type(first), as_type(second), as_type(choice))
    assert result.points.to_dict() == {"x": 1.5, "y": 0.25, "z": 1.25}
    assert result.pairs.to_dict() == {"x": 2, "y": 2, "z": 2}
    assert result.win_rate.to_dict() == {"x": 0.75, "y": 0.125, "z": 0.625}


def test_output_stats_hand_worked() -> None:
    prompts = [*PROMPTS, ("x", "w", None), ("w", "x", "tie")]
    stats = pairwise_ranking_scores(*columns(prompts)).stats
    assert (stats.n_prompts, stats.n_pairs) == (8, 4)
    assert stats.regular == pytest.approx(7 / 8)
    assert stats.ties == pytest.approx(2 / 7)
    # Pairs with both answers parsed: x-y, x-z, y-z. x-z flipped; y-z tie vs win.
    assert stats.flipped == pytest.approx(1 / 3)
    assert stats.inconsistent == pytest.approx(2 / 3)


def test_unparsed_answers_score_nothing() -> None:
    prompts = [("a", "b", math.nan), ("b", "a", None)]
    result = pairwise_ranking_scores(*columns(prompts))
    assert result.points.to_dict() == {"a": 0.0, "b": 0.0}
    assert result.stats.regular == 0.0
    assert math.isnan(result.stats.ties) and math.isnan(result.stats.flipped)


@pytest.mark.parametrize("seed", range(5))
def test_scores_equal_the_pair_rule_on_random_answers(seed: int) -> None:
    rng = np.random.default_rng(seed)
    candidates = [f"c{i}" for i in range(7)] + [3, 4.5]  # mixed id types
    prompts = []
    for i, j in itertools.combinations(candidates, 2):
        for first, second in ((i, j), (j, i)):
            prompts.append(
                (
                    first,
                    second,
                    rng.choice(np.array(["first", "second", "tie", None], dtype=object)),
                )
            )
    order = rng.permutation(len(prompts))
    shuffled = [prompts[k] for k in order]
    result = pairwise_ranking_scores(*columns(shuffled))
    expected = pair_rule_scores(shuffled)
    assert result.points.to_dict() == pytest.approx(expected)
    parsed = [p for p in shuffled if p[2] is not None]
    assert result.stats.regular == pytest.approx(len(parsed) / len(shuffled))
    assert result.stats.ties == pytest.approx(sum(p[2] == "tie" for p in parsed) / len(parsed))


def test_points_total_half_per_parsed_prompt() -> None:
    rng = np.random.default_rng(7)
    prompts = [
        (first, second, rng.choice(["first", "second", "tie"]))
        for i, j in itertools.combinations(range(12), 2)
        for first, second in ((i, j), (j, i))
    ]
    assert pairwise_ranking_scores(*columns(prompts)).points.sum() == pytest.approx(
        0.5 * len(prompts)
    )


@pytest.mark.parametrize(
    ("prompts", "message"),
    [
        ([("a", "b", "first")], "exactly once in each order"),
        ([("a", "b", "first"), ("a", "b", "second")], "exactly once in each order"),
        (
            [("a", "b", "first"), ("b", "a", "first"), ("a", "b", "tie")],
            "exactly once in each order",
        ),
        ([("a", "a", "first"), ("a", "a", "first")], "with itself"),
        ([("a", "b", "A"), ("b", "a", "first")], "'first', 'second', 'tie'"),
        ([("a", None, "first"), ("b", "a", "first")], "missing label"),
    ],
)
def test_bad_prompt_tables_raise(prompts: list[tuple[Any, Any, Any]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pairwise_ranking_scores(*columns(prompts))


def test_mismatched_lengths_and_empty_input_raise() -> None:
    with pytest.raises(ValueError, match="same length"):
        pairwise_ranking_scores(["a", "b"], ["b", "a"], ["first"])
    with pytest.raises(ValueError, match="empty"):
        pairwise_ranking_scores([], [], [])


# --- pairwise_preference_gap -----------------------------------------------------

GROUP_OF = {"a1": "A", "a2": "A", "b1": "B", "b2": "B"}


def gap_prompts() -> list[tuple[str, str, Any]]:
    return [
        ("a1", "b1", "first"),  # a1 wins both orders
        ("b1", "a1", "second"),
        ("a1", "b2", "second"),  # b2 wins both orders
        ("b2", "a1", "first"),
        ("a2", "b1", "first"),  # a2 wins both orders
        ("b1", "a2", "second"),
        ("a2", "b2", "first"),  # order-dependent
        ("b2", "a2", "first"),
        ("a1", "a2", "first"),  # within A: ignored
        ("a2", "a1", "second"),
        ("b1", "b2", "tie"),  # within B: ignored
        ("b2", "b1", "tie"),
    ]


@pytest.mark.parametrize("as_type", [dict, pd.Series], ids=["dict", "series"])
def test_preference_gap_hand_worked(as_type: Callable[[Any], Any]) -> None:
    first, second, choice = columns(gap_prompts())
    gap = pairwise_preference_gap(
        first, second, choice, group_of=as_type(GROUP_OF), group="A", reference="B"
    )
    assert gap == pytest.approx((2 - 1) / 4)
    reverse = pairwise_preference_gap(
        first, second, choice, group_of=GROUP_OF, group="B", reference="A"
    )
    assert reverse == pytest.approx(-gap)


def test_preference_gap_counts_unparsed_and_ties_in_denominator() -> None:
    prompts = [("a1", "b1", "first"), ("b1", "a1", "second"), ("a2", "b1", None)]
    prompts += [("b1", "a2", "tie")]
    gap = pairwise_preference_gap(*columns(prompts), group_of=GROUP_OF, group="A", reference="B")
    assert gap == pytest.approx(1 / 2)


def test_preference_gap_validates_groups() -> None:
    first, second, choice = columns(gap_prompts())
    with pytest.raises(ValueError, match="no group for candidate 'b2'"):
        pairwise_preference_gap(
            first,
            second,
            choice,
            group_of={"a1": "A", "a2": "A", "b1": "B"},
            group="A",
            reference="B",
        )
    with pytest.raises(ValueError, match="must differ"):
        pairwise_preference_gap(first, second, choice, group_of=GROUP_OF, group="A", reference="A")
    with pytest.raises(ValueError, match="no pair compares"):
        pairwise_preference_gap(first, second, choice, group_of=GROUP_OF, group="A", reference="C")


def test_the_papers_pairwise_gap_equals_the_authors_code_on_the_same_answers() -> None:
    """tests/data/pairwise_example.json holds the authors' own δ on this file (obtained by
    running their published code outside this project; see make_pairwise_example.py)."""
    import json
    from pathlib import Path

    import pandas as pd

    data = Path(__file__).resolve().parent.parent / "data"
    prompts = pd.read_csv(data / "pairwise_example.csv")
    expected = json.loads((data / "pairwise_example.json").read_text())
    group_of = pd.concat(
        [
            pd.Series(prompts["first_group"].to_numpy(), index=prompts["first"]),
            pd.Series(prompts["second_group"].to_numpy(), index=prompts["second"]),
        ]
    )
    group_of = group_of[~group_of.index.duplicated()]
    choice = prompts["choice"].where(prompts["choice"].notna(), None)
    for group, value in expected["paper_pairwise_gap"].items():
        found = pairwise_preference_gap(
            prompts["first"], prompts["second"], choice, group_of=group_of, group=group,
            reference=expected["reference"], convention="paper",
        )  # fmt: skip
        assert found == pytest.approx(float(value), abs=1e-15)
        ours = pairwise_preference_gap(
            prompts["first"], prompts["second"], choice, group_of=group_of, group=group,
            reference=expected["reference"],
        )  # fmt: skip
        assert ours != pytest.approx(float(value))  # the two definitions differ here
