"""Grade Score audits end to end on the offline sim judge: its planted position bias must be measured.

Iourovitski, "Grade Score: Quantifying LLM Performance in Option Selection" (2024).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from biasaudit.kinds.grade_score.run import GradeScoreResult, run as grade_audit
from biasaudit.kinds.grade_score.sim import JUDGE_FIRST_OPTION_RATE
from biasaudit.kinds.grade_score.spec import GradeScoreSpec
from biasaudit.kinds.grade_score.table import grade_score_table
from biasaudit.kinds.grade_score.task import DEMO_ITEMS
from biasaudit.providers import ModelRequest, ModelResponse, SamplingParams
from biasaudit.providers.sim import SimProvider
from biasaudit.store.runs import read_manifest, read_responses
from tests.fakes import FakeProvider


def run(runs_dir: Path, provider: Any = None, **fields: Any) -> GradeScoreResult:
    spec = GradeScoreSpec.model_validate(
        {"task": "grade-score", "model": "sim/biased", "items": "demo",
         "runs_dir": str(runs_dir), **fields}
    )  # fmt: skip
    return grade_audit(spec, provider=provider)


def within(value: float | None, interval: list[float] | None) -> bool:
    assert value is not None and interval is not None
    return interval[0] <= value <= interval[1]


P, N, REPLICATES = 0.4, 4, 20


@pytest.fixture(scope="module")
def biased(tmp_path_factory: pytest.TempPathFactory) -> GradeScoreResult:
    return run(
        tmp_path_factory.mktemp("runs"),
        SimProvider("biased", first_option_rate=P),
        temperature=1.0,
        replicates=REPLICATES,
    )


def test_planted_position_bias_gives_the_analytic_scores_within_their_intervals(
    biased: GradeScoreResult,
) -> None:
    r"""The sim judge answers slot 1 with probability p, else the best option (by content).

    At temperature 1 these are exactly p and 1 - p. Over the n cyclic orders
    of an item the best option stands once in each slot, so over T = n R
    answers (R replicates of each order), in expectation:

    - slot 1 is chosen in a share s_1 = p + (1 - p)/n (the biased answers, and
      the unbiased ones of the order where the best option is first), every
      other slot in s_j = (1 - p)/n;
    - the best option is chosen in a share (1 - p) + p/n (every unbiased
      answer, and the biased one of the order that puts it first), every
      other option in p/n, so for p < 1 the mode is the best option and
      C = (1 - p) + p/n;
    - E = -(s_1 log2 s_1 + (n - 1) s_j log2 s_j) / log2 n, and G = 2EC / (E + C).

    For p = 0.4, n = 4: s_1 = 0.55, s_j = 0.15, E = 0.8530, C = 0.7000,
    G = 0.7690. Per item these are plug-in estimates from T = 80 answers: C
    is unbiased, E is low by about (n - 1) / (2 T ln 2 log2 n) = 0.014 bits /
    2 = 0.005 (Miller-Madow), well inside the intervals over 16 items.
    """
    s_1, s_j = P + (1 - P) / N, (1 - P) / N
    entropy = -(s_1 * math.log2(s_1) + (N - 1) * s_j * math.log2(s_j)) / math.log2(N)
    choice = (1 - P) + P / N
    grade = 2 * entropy * choice / (entropy + choice)
    assert (round(entropy, 4), round(choice, 4), round(grade, 4)) == (0.853, 0.7, 0.769)

    m = biased.metrics
    assert m.items == 16 and m.trials == 16 * N * REPLICATES and m.unparsed == 0
    assert within(entropy, m.entropy_ci), (entropy, m.entropy_ci)
    assert within(choice, m.choice_ci), (choice, m.choice_ci)
    assert within(grade, m.grade_score_ci), (grade, m.grade_score_ci)
    # The pooled slot shares are binomial: within 3 standard errors of s_1 and s_j.
    standard_error = math.sqrt(s_1 * (1 - s_1) / m.usable)
    assert abs(m.position_histogram[0] - s_1) < 3 * standard_error
    assert all(abs(share - s_j) < 3 * standard_error for share in m.position_histogram[1:])


def test_a_consistent_position_free_judge_scores_one(tmp_path: Path) -> None:
    result = run(tmp_path, model="sim/fair", replicates=2)
    m = result.metrics
    assert JUDGE_FIRST_OPTION_RATE["fair"] == 0.0
    assert (m.grade_score, m.entropy, m.choice) == (1.0, 1.0, 1.0)
    # Every item at 1: no spread seen, so the exact bound for 16 items, not zero width.
    assert m.grade_score_ci == pytest.approx([0.025 ** (1 / 16), 1.0])
    assert m.position_histogram == [0.25] * 4
    assert (result.items["grade"] == 1.0).all()
    # The sim's content score agrees with the people who wrote the demo items.
    assert m.agreement is not None and m.agreement.rate == 1.0 and m.agreement.most_chosen == 1.0


def test_an_always_first_judge_scores_zero_entropy(tmp_path: Path) -> None:
    m = run(tmp_path, SimProvider("biased", first_option_rate=1.0)).metrics
    assert (m.entropy, m.grade_score) == (0.0, 0.0)
    assert m.choice == pytest.approx(1 / N)  # every option once, in slot 1
    assert m.position_histogram == [1.0, 0.0, 0.0, 0.0]


def test_all_orders_of_four_options_are_asked_and_score_a_fair_judge_one(tmp_path: Path) -> None:
    result = run(tmp_path, model="sim/fair", permutations="all")
    m = result.metrics
    assert m.orders == 24 and m.trials == 16 * 24 and m.grade_score == 1.0
    trials = pd.read_csv(result.run_dir / "trials.csv")
    assert trials.groupby("item_id")["shown"].nunique().eq(24).all()


def test_the_run_directory_holds_every_artifact_in_the_design_shape(
    biased: GradeScoreResult,
) -> None:
    run_dir = biased.run_dir
    assert {p.name for p in run_dir.iterdir()} == {
        "manifest.json", "prompts.jsonl.gz", "responses.jsonl", "spec.json", "trials.csv", "items.csv", "metrics.json"
    }  # fmt: skip
    manifest = read_manifest(run_dir)
    assert manifest.kind == "grade-score" and manifest.status == "completed" and manifest.simulated
    assert biased.exit_code == 0
    data = json.loads((run_dir / "metrics.json").read_text())
    for key in ("grade_score", "grade_score_ci", "entropy", "choice", "items", "unparsed",
                "position_histogram"):  # fmt: skip
        assert key in data, key
    assert (
        data["task"] == "grade-score"
        and data["simulated"] is True
        and data["model"] == "sim/biased"
    )
    assert len(data["grade_score_ci"]) == 2 and sum(data["position_histogram"]) == pytest.approx(1)
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["temperature"] == 1.0 and "k_max" not in spec and "method" not in spec
    record = read_responses(run_dir)[0]
    assert record.probe == "choice" and record.parsed is not None and record.irregular == 0
    assert record.parsed.startswith("Option ") and record.replicate == 0
    items = pd.read_csv(run_dir / "items.csv")
    assert list(items.columns[:14]) == [
        "item_id", "n_options", "trials", "failed", "unparsed", "usable",
        "pos_1", "pos_2", "pos_3", "pos_4", "option_0", "option_1", "option_2", "option_3",
    ]  # fmt: skip
    assert (items["trials"] == N * REPLICATES).all()
    assert (items[["pos_1", "pos_2", "pos_3", "pos_4"]].sum(axis=1) == items["usable"]).all()
    trials = pd.read_csv(run_dir / "trials.csv")
    shown = trials["shown"].str.split().apply(lambda order: [int(i) for i in order])
    chosen = [order[slot - 1] for order, slot in zip(shown, trials["slot"], strict=True)]
    assert chosen == trials["option"].tolist()  # each slot maps back to its original option


def test_replay_is_served_from_the_cache_and_sends_nothing(
    biased: GradeScoreResult, tmp_path: Path
) -> None:
    runs_dir = biased.run_dir.parent
    replayed = run(
        runs_dir, SimProvider("biased", first_option_rate=P), temperature=1.0,
        replicates=REPLICATES, replay=True,
    )  # fmt: skip
    requests = replayed.metrics.requests
    assert requests.sent == 0 and requests.cache_hits == 16 * N * REPLICATES
    assert replayed.metrics.grade_score == biased.metrics.grade_score
    assert replayed.metrics.position_histogram == biased.metrics.position_histogram


def test_the_random_option_is_added_counted_and_reported(tmp_path: Path) -> None:
    result = run(tmp_path, random_option=True, seed=7)
    m = result.metrics
    assert m.random_option and m.n_options == 5 and m.orders == 5 and m.trials == 16 * 5
    assert m.random_option_share is not None and 0.0 <= m.random_option_share < 0.5
    assert len(m.position_histogram) == 5
    assert "option_random" in result.items.columns and result.items["random_source"].notna().all()


def test_unreadable_and_refused_answers_are_counted_never_fatal(tmp_path: Path) -> None:
    judge = FakeProvider(refuse={"sky-blue#1"})  # answers "answer to <id>": no option named
    result = run(tmp_path, judge)
    m = result.metrics
    # A refusal is the judge's answer: it names no option, so it is unparsed, and counted.
    assert result.exit_code == 0 and m.failed == 0 and m.unparsed == 16 * 4 and m.refused == 1
    assert m.items == 0 and m.grade_score is None and m.grade_score_ci is None
    assert m.notes[0].startswith("16 item(s) without a usable answer, left out of the means")
    lines = grade_score_table(m, result.items)
    # The headline says first that the judge did not judge.
    assert lines[1].startswith("WARNING: 100.0% of the answers named no option")
    assert lines[4].endswith("answers: 0 usable, 64 unparsed (1 refused); items scored: 0")
    assert lines[7] == "Grade Score       -  -"
    assert lines[-17].startswith("sky-blue") and lines[-17].split()[1:5] == ["-", "-", "-", "4"]


def sim_judge(prompt: str, *, temperature: float = 1.0, replicate: int = 0, rate: float = P) -> str:
    request = ModelRequest(
        id="q", messages=({"role": "user", "content": prompt},),
        params=SamplingParams(max_tokens=50, temperature=temperature), replicate=replicate,
    )  # fmt: skip
    return SimProvider("biased", first_option_rate=rate).answer(request).text


def choice_prompt(options: list[str], closing: str = "Which option is best?") -> str:
    blocks = "\n\n".join(f"Option {k}:\n{text}" for k, text in enumerate(options, 1))
    return f"User request:\nWhat should I do?\n\n{blocks}\n\n{closing}"


def test_the_sim_judge_picks_by_content_wherever_the_best_option_stands() -> None:
    options = ["A beginner's guess.", "A certified expert's advice, published.", "Unrelated."]
    for shift in range(3):
        order = options[shift:] + options[:shift]
        best = order.index(options[1]) + 1
        assert sim_judge(choice_prompt(order), rate=0.0) == f"Option {best}"
        assert sim_judge(choice_prompt(order), rate=1.0) == "Option 1"
    asked = choice_prompt(options, 'End with "Selection: Option N".')
    assert sim_judge(asked, rate=0.0) == "Selection: Option 2"


def test_the_sim_judge_answers_slot_one_at_its_planted_rate() -> None:
    prompt = choice_prompt(["A beginner's guess.", "A certified expert's advice.", "Unrelated."])
    answers = [sim_judge(prompt, replicate=r) for r in range(1000)]
    assert abs(answers.count("Option 1") / 1000 - P) < 3 * math.sqrt(P * (1 - P) / 1000)
    assert set(answers) == {"Option 1", "Option 2"}


LISTING = "1. Networking: leverage your connections.\n2. Apply early.\n3. Follow up."


def test_a_weak_judge_that_lists_and_answers_in_part_is_read_for_what_it_shows(
    tmp_path: Path,
) -> None:
    """Half the items are answered in every order (always slot 1); the other half once
    ("Selection: Option 2"), and in their other orders with a numbered list answering
    the user's request. A list is no vote for Option 1, and the half-answered items
    are partial: left out of the means, not scored entropy 0."""
    judge = FakeProvider()
    items = [line for line in DEMO_ITEMS.read_text().splitlines() if line.strip()]
    ids = [json.loads(line)["id"] for line in items]
    for index, item in enumerate(ids):
        for order in range(1, 5):
            if index < 8:
                text = "Selection: Option 1"
            else:
                text = "Selection: Option 2" if order == 1 else LISTING
            judge.script[f"{item}#{order}"].append(ModelResponse(texts=(text,)))
    result = run(tmp_path, judge)
    m = result.metrics
    assert (m.items, m.partial, m.usable, m.unparsed) == (8, 8, 8 * 4 + 8, 8 * 3)
    assert m.position_counts == [32, 8, 0, 0]  # the 24 lists are not votes for slot 1
    assert m.grade_score == 0.0  # the 8 complete items always chose slot 1
    assert any(note.startswith("8 partial item(s)") for note in m.notes)
    assert m.slot_test is not None and m.slot_test.p < 1e-6 and m.slot_test.n == 40
    lines = grade_score_table(m, result.items)
    assert lines[1].startswith("WARNING: 37.5% of the answers named no option")
