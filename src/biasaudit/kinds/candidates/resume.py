"""Resume screening: does a screener pass over some groups' applicants?

Four job postings, six resumes each at three levels of fit (two ``high`` =
qualified, two ``medium``, two ``low``), and names typical of eight groups
{White, Black, Asian, Hispanic} x {female, male}. Every resume x name pair is a
candidate; pools hold one candidate per group; the reference is White men.
The setting of Chen, Ji & Evans, "The Mismeasure of Man and Models" (2024).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from biasaudit.errors import UsageError
from biasaudit.kinds.candidates.spec import ResumeData
from biasaudit.kinds.candidates.task import AllocationTask, Candidate, PoolDesign
from biasaudit.kinds.prompt import PromptTemplate
from biasaudit.textfiles import (
    DATA_DIR,
    PROMPTS_DIR,
    load_yaml,
    read_table,
    require_columns,
    require_values,
)

__all__ = [
    "CATEGORIES",
    "GROUP_NAMES",
    "JOBS_PATH",
    "NAMES_PATH",
    "build_resume_screening",
    "read_jobs",
    "read_names",
]

NAMES_PATH = DATA_DIR / "names.csv"
JOBS_PATH = DATA_DIR / "resume_screening" / "jobs.yaml"
GROUP_NAMES = {
    "W_F": "White female",
    "W_M": "White male",
    "B_F": "Black female",
    "B_M": "Black male",
    "A_F": "Asian female",
    "A_M": "Asian male",
    "H_F": "Hispanic female",
    "H_M": "Hispanic male",
}
CATEGORIES = {
    "race": {code: name.rpartition(" ")[0] for code, name in GROUP_NAMES.items()},
    "sex": {code: name.rpartition(" ")[2] for code, name in GROUP_NAMES.items()},
}
"""The race / ethnicity and the sex of each group, for impact ratios per category
(New York City's Local Law 144 asks for both and for their intersections)."""
DEFAULT_REFERENCE = "W_M"
LABELS = {"Yes": 1.0, "No": 0.0}


class Resume(BaseModel):
    """One resume of a job: its level of fit and its text (no name)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    level: Literal["high", "medium", "low"]
    text: str = Field(min_length=1)


class Job(BaseModel):
    """One job posting with the resumes screened for it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    title: str = Field(min_length=1)
    posting: str = Field(min_length=1)
    resumes: tuple[Resume, ...] = Field(min_length=1)


class JobsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    jobs: tuple[Job, ...] = Field(min_length=1)


def read_jobs(path: str | Path) -> tuple[Job, ...]:
    """Read a jobs-and-resumes YAML file, naming the field of the first problem."""
    data = load_yaml(path, "resumes")
    try:
        return JobsFile.model_validate(data).jobs
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise UsageError(f"resumes {path}, field '{where}': {first['msg']}") from None


def read_names(path: str | Path) -> dict[str, list[str]]:
    """Names by group from a ``name,group`` CSV, in file order."""
    frame = read_table(path, "names")
    require_columns(frame, ["name", "group"], what="names", path=path)
    require_values(frame, ["name", "group"], what="names", path=path)
    duplicated = frame["name"].duplicated()
    if duplicated.any():
        raise UsageError(f"names {path}: '{frame['name'][duplicated].iloc[0]}' appears twice")
    return {str(g): list(rows["name"]) for g, rows in frame.groupby("group", sort=False)}


def _sample_names(
    names: dict[str, list[str]], per_group: int, seed: int, path: Path, *, nested: bool = False
) -> dict[str, list[str]]:
    """``per_group`` names of each group, drawn with ``seed``; ``nested``: the first of a
    seeded order of each group's names, so a larger draw holds every name of a smaller one."""
    rng = np.random.default_rng(seed)
    chosen = {}
    for group, pool in names.items():
        if len(pool) < per_group:
            raise UsageError(
                f"names {path}: group {group} has {len(pool)} names, fewer than "
                f"--names-per-group {per_group}"
            )
        if nested:
            picked = sorted(rng.permutation(len(pool))[:per_group])
        else:
            picked = sorted(rng.choice(len(pool), size=per_group, replace=False))
        chosen[group] = [pool[i] for i in picked]
    return chosen


def _select_jobs(jobs: tuple[Job, ...], wanted: tuple[str, ...] | None) -> tuple[Job, ...]:
    if not wanted:
        return jobs
    by_id = {job.id: job for job in jobs}
    unknown = [job for job in wanted if job not in by_id]
    if unknown:
        raise UsageError(f"no job '{unknown[0]}' (jobs: {', '.join(by_id)})")
    return tuple(by_id[job] for job in wanted)


def _ordered_groups(groups: list[str]) -> tuple[str, ...]:
    known = [g for g in GROUP_NAMES if g in groups]
    return tuple(known + [g for g in groups if g not in GROUP_NAMES])


def build_resume_screening(spec: ResumeData) -> AllocationTask:
    """The resume-screening task for ``spec``: every resume x name pair a candidate."""
    names_path = spec.names or NAMES_PATH
    jobs = _select_jobs(read_jobs(spec.resumes or JOBS_PATH), spec.jobs)
    names = _sample_names(read_names(names_path), spec.names_per_group, spec.seed, names_path,
                          nested=spec.names_drawn == "nested")  # fmt: skip
    groups = _ordered_groups(list(names))
    candidates = [
        Candidate(
            id=f"{resume.id}/{name}",
            group=group,
            subtask=job.id,
            qualified=resume.level == "high",
            fields={"name": name, "resume": resume.text.strip()},
            name=name,
            item=resume.id,
        )
        for job in jobs
        for resume in job.resumes
        for group in groups
        for name in names[group]
    ]
    return AllocationTask(
        name="resume-screening",
        candidates=tuple(candidates),
        groups=groups,
        reference_group=spec.reference_group or DEFAULT_REFERENCE,
        labels=LABELS,
        pointwise_prompt=PromptTemplate.load(PROMPTS_DIR / "resume-screening.pointwise.yaml"),
        pairwise_prompt=PromptTemplate.load(PROMPTS_DIR / "resume-screening.pairwise.yaml"),
        pool=PoolDesign("one_per_group"),
        context={
            job.id: {"job_title": job.title, "job_posting": job.posting.strip()} for job in jobs
        },
        group_names=GROUP_NAMES,
        noun="Candidate",
        item_column="resume_id",
        categories=CATEGORIES,
    )
