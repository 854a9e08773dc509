"""Tasks: the domains audited, their candidates, prompts and data.

A task knows its domain (candidates, groups, qualification, prompt templates)
and nothing of HTTP. :data:`TASKS` lists the built-in tasks for
``biasaudit tasks``; :func:`build_task` turns a validated spec into an
:class:`AllocationTask`.
"""

from __future__ import annotations

from dataclasses import dataclass

from biasaudit.errors import UsageError
from biasaudit.spec import AllocationTaskSpec, AuditSpec, EssayGradingSpec, ResumeScreeningSpec
from biasaudit.tasks._allocation import AllocationTask, Candidate, Pool, PoolDesign, PromptTemplate
from biasaudit.tasks._custom import build_custom_task
from biasaudit.tasks._essay import DEMO_ESSAYS, build_essay_grading
from biasaudit.tasks._files import DATA_DIR, PROMPTS_DIR
from biasaudit.tasks._grade_score import (
    DEMO_ITEMS,
    JUDGE_PROMPTS,
    GradeItem,
    GradeScorePlan,
    GradeScoreTask,
    build_grade_score_task,
    plan_grade_score,
)
from biasaudit.tasks._resume import JOBS_PATH, NAMES_PATH, build_resume_screening
from biasaudit.tasks._ruted import (
    GENERATION_CONTEXTS,
    OCCUPATIONS_PATH,
    ContextPrompts,
    Occupation,
    RutedTask,
    build_ruted_task,
    read_occupations,
)
from biasaudit.tasks._ruted_plan import OCCUPATION_COLUMNS, RutedPlan, plan_ruted
from biasaudit.tasks._scoring import PairwisePlan, PointwisePlan, ScoringPlan, plan_scoring

__all__ = [
    "DATA_DIR",
    "DEMO_ITEMS",
    "GENERATION_CONTEXTS",
    "JUDGE_PROMPTS",
    "OCCUPATIONS_PATH",
    "OCCUPATION_COLUMNS",
    "PROMPTS_DIR",
    "TASKS",
    "AllocationTask",
    "Candidate",
    "ContextPrompts",
    "GradeItem",
    "GradeScorePlan",
    "GradeScoreTask",
    "Occupation",
    "PairwisePlan",
    "PointwisePlan",
    "Pool",
    "PoolDesign",
    "PromptTemplate",
    "RutedPlan",
    "RutedTask",
    "ScoringPlan",
    "TaskInfo",
    "build_grade_score_task",
    "build_ruted_task",
    "build_task",
    "plan_grade_score",
    "plan_ruted",
    "plan_scoring",
    "read_occupations",
]


@dataclass(frozen=True)
class TaskInfo:
    """What ``biasaudit tasks`` shows about one task."""

    name: str
    summary: str
    groups: str
    pools: str
    data: tuple[tuple[str, str], ...]
    prompts: tuple[str, ...]
    usage: str


def _prompts(task: str) -> tuple[str, ...]:
    return tuple(str(PROMPTS_DIR / f"{task}.{probe}.yaml") for probe in ("pointwise", "pairwise"))


TASKS: dict[str, TaskInfo] = {
    "resume-screening": TaskInfo(
        name="resume-screening",
        summary="Screen resumes for four job postings; is a group's applicant picked less often?",
        groups="W_F W_M B_F B_M A_F A_M H_F H_M (race x gender); reference W_M",
        pools="one candidate per group (8); qualified = a resume of high fit",
        data=(
            ("names", f"{NAMES_PATH} (100 per group; first names from SSA and "
                      "race-by-name studies, surnames from the 2010 Census)"),
            ("resumes", f"{JOBS_PATH} (4 postings x 6 resumes, written for biasaudit)"),
        ),
        prompts=_prompts("resume-screening"),
        usage="biasaudit run resume-screening --model MODEL "
              "[--names FILE.csv] [--resumes FILE.yaml]",
    ),
    "essay-grading": TaskInfo(
        name="essay-grading",
        summary="Grade essays 1-5; is a group of writers passed over for the top k?",
        groups="the corpus's 'group' column; reference ENS (or --reference-group)",
        pools="10 essays at random; qualified = rating at or above the median",
        data=(
            ("essays", "yours: --essays FILE.csv with text, group[, rating] "
                       "(the paper used ICNALE, which cannot be shipped)"),
            ("demo", f"{DEMO_ESSAYS} (30 essays, written for biasaudit; --essays demo)"),
        ),
        prompts=_prompts("essay-grading"),
        usage="biasaudit run essay-grading --essays FILE.csv --model MODEL",
    ),
    "allocation": TaskInfo(
        name="allocation",
        summary="Your own allocation task: candidates in a CSV, prompts and labels in a spec",
        groups="the column the spec names; reference from the spec",
        pools="one per group, or random pools of a size the spec gives",
        data=(("candidates", "yours: the CSV the spec names"),),
        prompts=("written in the spec (or files it names)",),
        usage="biasaudit run SPEC.yaml   (task: allocation)",
    ),
    "grade-score": TaskInfo(
        name="grade-score",
        summary="A judge picks the best of an item's options, shown in every cyclic order: "
                "by position or by content? (Grade Score)",
        groups="none: the judge's choices by slot and by option are audited",
        pools="each item's n options in its n cyclic orders (all n! with --permutations all)",
        data=(
            ("items", "yours: --items FILE.jsonl with id, prompt, options[, preferred | ranks]"),
            ("demo", f"{DEMO_ITEMS} (16 items x 4 options, written for biasaudit; --items demo)"),
        ),
        prompts=tuple(
            f"{PROMPTS_DIR / f'grade-score.{key}.yaml'} ({key}: {role})"
            for key, role in JUDGE_PROMPTS.items()
        ),
        usage="biasaudit run grade-score --items FILE.jsonl --model MODEL [--prompt 1|2|3|4|FILE]",
    ),
    "ruted": TaskInfo(
        name="ruted",
        summary="Gender-occupation neutrality, skew and stereotype: the next-word trick test "
                "beside bedtime stories, user personas and ESL exercises (RUTEd)",
        groups="male / female: next words (he, his, boy, ...) and third-person pronouns of texts",
        pools="none: per occupation, next-word probabilities and 30 texts per template",
        data=(
            ("data", f"{OCCUPATIONS_PATH} (the 40 WinoBias occupations with their majority "
                     "gender; --occupations FILE.csv of occupation,majority)"),
        ),
        prompts=tuple(
            f"{PROMPTS_DIR / f'ruted.{context}.yaml'} (10 templates; 0 is the main one)"
            for context in GENERATION_CONTEXTS
        ),
        usage="biasaudit run ruted --model MODEL [--contexts standard,bedtime,personas,esl] "
              "[--replicates 30] [--templates 0|all]",
    ),
}  # fmt: skip


def build_task(spec: AuditSpec) -> AllocationTask:
    """The task a validated spec describes, with its candidates loaded.

    Raises
    ------
    UsageError
        A data file is missing or malformed, or the spec and the data disagree.
    """
    if isinstance(spec, ResumeScreeningSpec):
        return build_resume_screening(spec)
    if isinstance(spec, EssayGradingSpec):
        return build_essay_grading(spec)
    if isinstance(spec, AllocationTaskSpec):
        return build_custom_task(spec)
    raise UsageError(f"no task for spec {type(spec).__name__}")
