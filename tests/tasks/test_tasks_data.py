"""The shipped names, jobs, resumes, essays and prompts, and the tasks built from them."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from biasaudit.errors import UsageError
from biasaudit.kinds.allocation.spec import EssayGradingSpec, ResumeScreeningSpec
from biasaudit.kinds.candidates.resume import GROUP_NAMES, read_jobs, read_names
from biasaudit.kinds.candidates.tasks import build_task
from biasaudit.kinds.grade_score.task import load_choice_prompt
from biasaudit.kinds.prompt import PromptTemplate
from biasaudit.kinds.ruted.task import ContextPrompts
from biasaudit.providers.sim import DISADVANTAGED_NAMES
from biasaudit.textfiles import DATA_DIR, PROMPTS_DIR

WORD = re.compile(r"[A-Za-z']+")


def test_names_have_100_full_names_for_each_of_the_eight_groups() -> None:
    names = read_names(DATA_DIR / "names.csv")
    assert list(names) == list(GROUP_NAMES)
    for group, full_names in names.items():
        assert len(full_names) >= 100, group
        assert all(len(name.split()) == 2 for name in full_names), group


def test_black_male_first_names_are_exactly_the_sims_disadvantaged_names() -> None:
    names = read_names(DATA_DIR / "names.csv")
    assert {name.split()[0] for name in names["B_M"]} == set(DISADVANTAGED_NAMES)


def test_no_other_group_name_resume_job_or_prompt_contains_a_disadvantaged_name() -> None:
    names = read_names(DATA_DIR / "names.csv")
    others = " ".join(
        n for group, group_names in names.items() if group != "B_M" for n in group_names
    )
    texts = [others, (DATA_DIR / "resume_screening" / "jobs.yaml").read_text()]
    texts += [(DATA_DIR / "essays_demo.csv").read_text()]
    texts += [path.read_text() for path in PROMPTS_DIR.glob("*.yaml")]
    for text in texts:
        assert not set(WORD.findall(text)) & DISADVANTAGED_NAMES


def test_jobs_have_two_resumes_at_each_level() -> None:
    jobs = read_jobs(DATA_DIR / "resume_screening" / "jobs.yaml")
    assert [job.id for job in jobs] == [
        "software-engineer", "hr-specialist", "financial-analyst", "retail-associate"
    ]  # fmt: skip
    for job in jobs:
        levels = [resume.level for resume in job.resumes]
        assert sorted(levels) == ["high", "high", "low", "low", "medium", "medium"], job.id


def test_demo_essays_avoid_words_that_turn_a_rating_into_a_yes_no_question() -> None:
    essays = pd.read_csv(DATA_DIR / "essays_demo.csv")
    assert set(essays.columns) == {"essay_id", "group", "rating", "text"}
    assert len(essays) == 30 and essays["group"].value_counts().eq(6).all()
    assert not essays["text"].str.contains(r"\b(?:Yes|No)\b").any()


def test_resume_screening_makes_every_resume_and_name_a_candidate() -> None:
    spec = ResumeScreeningSpec(model="sim/biased", names_per_group=3, jobs=("hr-specialist",))
    task = build_task(spec)
    assert len(task.candidates) == 6 * 8 * 3
    assert task.reference_group == "W_M" and task.subtasks == ("hr-specialist",)
    assert sum(c.qualified is True for c in task.candidates) == 2 * 8 * 3
    system, user = task.pointwise_messages(task.candidates[0])
    assert "Human Resources Specialist" in system["content"]
    assert task.candidates[0].name in user["content"] and "Answer with Yes or No" in user["content"]


def test_names_per_group_is_a_seeded_sample() -> None:
    def names(seed: int) -> list[str | None]:
        spec = ResumeScreeningSpec(
            model="sim/biased", names_per_group=4, jobs=("hr-specialist",), seed=seed
        )
        return sorted({c.name for c in build_task(spec).candidates})

    assert names(1) == names(1) != names(2)


def test_unknown_job_and_too_few_names_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no job 'pilot'"):
        build_task(ResumeScreeningSpec(model="sim/biased", jobs=("pilot",)))
    names = tmp_path / "names.csv"
    names.write_text("name,group\nAnn Lee,X\nBo Chan,Y\n")
    with pytest.raises(UsageError, match="group X has 1 names, fewer than --names-per-group 2"):
        build_task(ResumeScreeningSpec(model="sim/biased", names=names, names_per_group=2))


def test_a_names_file_without_the_reference_group_is_a_usage_error(tmp_path: Path) -> None:
    names = tmp_path / "names.csv"
    names.write_text("name,group\nAnn Lee,X\nBo Chan,Y\n")
    with pytest.raises(UsageError, match="reference group 'W_M' is not one of the groups"):
        build_task(ResumeScreeningSpec(model="sim/biased", names=names, names_per_group=1))


def test_essay_grading_qualifies_at_or_above_the_median_rating(tmp_path: Path) -> None:
    corpus = tmp_path / "essays.csv"
    corpus.write_text("text,group,rating\nOne.,L1,1\nTwo.,L1,3\nThree.,L2,2\nFour.,L2,5\n")
    spec = EssayGradingSpec(model="sim/biased", essays=corpus, reference_group="L1", pool_size=4)
    task = build_task(spec)
    assert [c.qualified for c in task.candidates] == [False, True, False, True]  # median 2.5
    assert task.qualified_rule == "rating at or above the median of the rated essays (2.5)"
    assert [c.id for c in task.candidates] == [
        "essay-0001",
        "essay-0002",
        "essay-0003",
        "essay-0004",
    ]


def test_essay_grading_qualifies_at_a_threshold_given(tmp_path: Path) -> None:
    corpus = tmp_path / "essays.csv"
    corpus.write_text("text,group,rating\nOne.,L1,1\nTwo.,L1,3\nThree.,L2,2\nFour.,L2,5\n")
    spec = EssayGradingSpec(
        model="sim/biased", essays=corpus, reference_group="L1", qualified_at_least="3",
        pool_size=4,
    )  # fmt: skip
    task = build_task(spec)
    assert [c.qualified for c in task.candidates] == [False, True, False, True]
    assert task.qualified_rule == "rating at or above 3"


def test_essay_grading_with_paper_conventions_qualifies_above_53_of_100(tmp_path: Path) -> None:
    """The authors' code: pd.cut at (0, 40, 53, 100], 'Good' qualified, so 53 is not."""
    corpus = tmp_path / "essays.csv"
    rows = [("A", 40), ("A", 53), ("B", 53.5), ("B", 90), ("A", "")]
    corpus.write_text(
        "text,group,rating\n" + "".join(f"Essay {i}.,{g},{r}\n" for i, (g, r) in enumerate(rows))
    )
    spec = EssayGradingSpec(
        model="sim/biased", essays=corpus, reference_group="A", conventions="paper", pool_size=2
    )
    task = build_task(spec)
    assert [c.qualified for c in task.candidates] == [False, False, True, True, None]
    assert task.qualified_rule is not None and "above 53 of 100" in task.qualified_rule
    # A threshold given wins over the convention.
    given = spec.model_copy(update={"qualified_at_least": 53.0})
    assert [c.qualified for c in build_task(given).candidates][:2] == [False, True]


def test_the_papers_essay_threshold_refuses_another_scale(tmp_path: Path) -> None:
    corpus = tmp_path / "essays.csv"
    corpus.write_text("text,group,rating\nOne.,ENS,1\nTwo.,ENS,150\n")
    spec = EssayGradingSpec(model="sim/biased", essays=corpus, conventions="paper", pool_size=2)
    with pytest.raises(UsageError, match=r"ratings run from 1 to 150.*--qualified-at-least"):
        build_task(spec)


def test_essay_grading_without_ens_needs_a_reference(tmp_path: Path) -> None:
    corpus = tmp_path / "essays.csv"
    corpus.write_text("text,group\nOne.,L1\nTwo.,L2\n")
    with pytest.raises(
        UsageError, match="no group 'ENS': name the reference with --reference-group"
    ):
        build_task(EssayGradingSpec(model="sim/biased", essays=corpus))


def test_essay_ratings_must_be_numbers(tmp_path: Path) -> None:
    corpus = tmp_path / "essays.csv"
    corpus.write_text("text,group,rating\nOne.,ENS,good\n")
    with pytest.raises(UsageError, match="row 2, column 'rating': 'good' is not a number"):
        build_task(EssayGradingSpec(model="sim/biased", essays=corpus))


@pytest.mark.parametrize("path", sorted(PROMPTS_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_prompt_loads(path: Path) -> None:
    if path.name.startswith("grade-score."):  # a judge prompt: the template and its max_tokens
        assert load_choice_prompt(path.name.split(".")[1]).max_tokens >= 1
        return
    if path.name.startswith("ruted."):  # one RUTEd context: its ten templates and max_tokens
        prompts = ContextPrompts.load(path.name.split(".")[1])
        assert len(prompts.templates) == 10 and prompts.max_tokens >= 1
        return
    prompt = PromptTemplate.load(path)
    if ".pairwise." in path.name:
        assert {"first", "second"} <= prompt.placeholders("user") and prompt.candidate


def test_a_prompt_with_an_unknown_placeholder_names_it(tmp_path: Path) -> None:
    bad = PromptTemplate.from_mapping({"system": "Hi", "user": "Rate {essay}"}, "my prompt")
    with pytest.raises(UsageError, match=r"my prompt, field 'user': unknown placeholder \{essay\}"):
        bad.check("user", {"text"})
