"""The built-in allocation tasks (resume screening, essay grading, a task of your
own): what ``biasaudit tasks`` says of each, and :func:`build_task`, which turns a
validated spec into an :class:`~biasaudit.kinds.candidates.task.AllocationTask`.
"""

from __future__ import annotations

import dataclasses

from biasaudit.errors import UsageError
from biasaudit.kinds.candidates.custom import build_custom_task
from biasaudit.kinds.candidates.essay import DEMO_ESSAYS, build_essay_grading
from biasaudit.kinds.candidates.resume import JOBS_PATH, NAMES_PATH, build_resume_screening
from biasaudit.kinds.candidates.spec import CustomData, EssayData, ResumeData
from biasaudit.kinds.candidates.task import AllocationTask
from biasaudit.kinds.common import TaskInfo
from biasaudit.kinds.runspec import AuditSpec
from biasaudit.textfiles import PROMPTS_DIR

__all__ = ["ALLOCATION_TASKS", "TASK_INFOS", "build_task"]


def _prompts(task: str) -> tuple[str, ...]:
    methods = ("pointwise", "pairwise", "listwise")
    return tuple(str(PROMPTS_DIR / f"{task}.{probe}.yaml") for probe in methods)


ALLOCATION_TASKS: dict[str, TaskInfo] = {
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
              "[--method pointwise|pairwise|listwise] [--names FILE.csv] [--resumes FILE.yaml]",
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
        usage="biasaudit run essay-grading --essays FILE.csv --model MODEL "
              "[--method pointwise|pairwise|listwise]",
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
}  # fmt: skip


def build_task(spec: AuditSpec) -> AllocationTask:
    """The task a validated spec describes, with its candidates loaded.

    Raises
    ------
    UsageError
        A data file is missing or malformed, or the spec and the data disagree.
    """
    if isinstance(spec, ResumeData):
        return build_resume_screening(spec)
    if isinstance(spec, EssayData):
        task = build_essay_grading(spec)
    elif isinstance(spec, CustomData):
        task = build_custom_task(spec)
    else:
        raise UsageError(f"no task for spec {type(spec).__name__}")
    if spec.candidates_per_group is None:
        return task
    return drawn_candidates(task, spec.candidates_per_group, seed=spec.seed)


def drawn_candidates(task: AllocationTask, per_group: int, *, seed: int) -> AllocationTask:
    """``task`` with at most ``per_group`` candidates of each group in each subtask, in
    the file's order, drawn at random with ``seed``: the first of one seeded shuffle per
    group and subtask, so that a larger ``per_group`` keeps every candidate a smaller one
    drew (the rounds of ``--until``).

    Raises
    ------
    UsageError
        Too few candidates left to fill the task's pools.
    """
    import zlib

    import numpy as np

    strata: dict[tuple[str, str], list[int]] = {}
    for index, candidate in enumerate(task.candidates):
        strata.setdefault((candidate.subtask, candidate.group), []).append(index)
    kept: list[int] = []
    for (subtask, group), members in strata.items():
        rng = np.random.default_rng([seed, zlib.crc32(f"{subtask}/{group}".encode())])
        kept += [members[i] for i in rng.permutation(len(members))[:per_group]]
    return dataclasses.replace(task, candidates=tuple(task.candidates[i] for i in sorted(kept)))


def most_per_group(task: AllocationTask) -> int:
    """The most candidates any group has in any subtask (where growing stops adding)."""
    counts: dict[tuple[str, str], int] = {}
    for candidate in task.candidates:
        key = (candidate.subtask, candidate.group)
        counts[key] = counts.get(key, 0) + 1
    return max(counts.values(), default=0)


TASK_INFOS = tuple(ALLOCATION_TASKS.values())
"""The built-in tasks of candidates, as ``biasaudit tasks`` lists them."""
