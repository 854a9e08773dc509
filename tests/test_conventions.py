"""`conventions: paper` beyond allocation: each switch against a hand computation.

The allocation switches are checked against the authors' own numbers
(tests/test_allocation_results.py, tests/test_score_import.py); these are
checked against their definitions as the README's table states them.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biasaudit.kinds.grade_score.metrics_file import GradeScoreMetrics
from biasaudit.kinds.ruted.metrics_file import least_biased_value, ties_as_female
from biasaudit.metrics import ndcg_at


def test_ruted_ties_count_female_under_the_papers_conventions() -> None:
    rows = pd.DataFrame(
        {"context": ["esl", "esl", "standard"], "occupation": ["nurse", "CEO", "nurse"],
         "male": [2, 1, None], "female": [1, 0, None], "tied": [1, 3, None],
         "n": [3, 1, None], "p_male": [2 / 3, 1.0, 0.3]}
    )  # fmt: skip
    found = ties_as_female(rows)
    assert found["p_male"].tolist()[:2] == pytest.approx([2 / 4, 1 / 4])
    assert found["female"].tolist()[:2] == [2, 3] and found["n"].tolist()[:2] == [4, 4]
    assert found["p_male"].iloc[2] == 0.3  # the standard test's share has no ties to count


def test_ruted_least_biased_is_the_most_negative_under_the_papers_conventions() -> None:
    assert least_biased_value("skew", -0.4) == pytest.approx(0.4)
    assert least_biased_value("skew", -0.4, "paper") == pytest.approx(-0.4)
    assert least_biased_value("neutrality", 0.2, "paper") == pytest.approx(0.2)
    assert least_biased_value("skew", math.nan, "paper") == math.inf


def test_ndcg_relevance_runs_from_m_minus_one_to_zero_in_the_paper() -> None:
    ideal, ranking = ["a", "b", "c"], ["b", "a", "c"]
    discount = 1 / np.log2([2, 3, 4])
    ours = (np.array([2, 3, 1]) @ discount) / (np.array([3, 2, 1]) @ discount)
    paper = (np.array([1, 2, 0]) @ discount) / (np.array([2, 1, 0]) @ discount)
    assert ndcg_at(ranking, ideal, 3) == pytest.approx(ours)
    assert ndcg_at(ranking, ideal, 3, convention="paper") == pytest.approx(paper)


def test_grade_score_counts_items_without_an_answer_as_zero_in_the_paper(tmp_path: Path) -> None:
    from biasaudit.kinds.grade_score.run import run as grade_audit
    from biasaudit.kinds.grade_score.spec import GradeScoreSpec
    from biasaudit.providers import ModelResponse
    from tests.fakes import FakeProvider

    def run(conventions: str) -> GradeScoreMetrics:
        judge = FakeProvider()  # "answer to <id>": no option named, except as scripted
        for item in ("sky-blue", "capital-australia"):
            for order in range(1, 5):
                judge.script[f"{item}#{order}"].append(ModelResponse(texts=("Option 1",)))
        spec = GradeScoreSpec.model_validate(
            {"task": "grade-score", "model": "sim/biased", "items": "demo",
             "runs_dir": str(tmp_path / conventions), "conventions": conventions}
        )  # fmt: skip
        return grade_audit(spec, provider=judge).metrics

    ours, paper = run("biasaudit"), run("paper")
    assert ours.items == 2 and ours.grade_score == 0.0  # slot 1 always: entropy 0
    assert paper.items == 16 and paper.grade_score == 0.0 and paper.conventions == "paper"
    assert ours.entropy == paper.entropy == 0.0


def test_the_papers_regular_share_leaves_ties_out() -> None:
    from biasaudit.kinds.allocation.run import regular_share
    from biasaudit.metrics import PairwiseOutputStats

    # 100 prompts, 90 parsed, of which 20% ties: 90% regular, 72% answered with a winner.
    stats = PairwiseOutputStats(
        n_prompts=100, n_pairs=50, regular=0.9, ties=0.2, flipped=0.1, inconsistent=0.2
    )
    assert regular_share(stats, "biasaudit") == pytest.approx(0.9)
    assert regular_share(stats, "paper") == pytest.approx(0.72)


def test_a_ruted_run_under_the_papers_conventions_drops_no_tie(tmp_path: Path) -> None:
    from biasaudit.kinds.ruted.run import run as ruted_audit
    from biasaudit.kinds.ruted.spec import RutedSpec
    from biasaudit.spec import parse_spec

    found = {}
    for conventions in ("biasaudit", "paper"):
        spec = parse_spec(
            {"task": "ruted", "model": "sim/biased", "contexts": "esl", "replicates": 8,
             "runs_dir": str(tmp_path / conventions), "conventions": conventions}
        )  # fmt: skip
        assert isinstance(spec, RutedSpec)
        found[conventions] = ruted_audit(spec).metrics
    ours, paper = found["biasaudit"].contexts["esl"], found["paper"].contexts["esl"]
    assert found["paper"].conventions == "paper"
    ties = (ours.dropped_reasons or {}).get("tied", 0)
    assert ties > 0 and (paper.dropped_reasons or {}).get("tied", 0) == 0
    assert paper.gendered == ours.gendered + ties
