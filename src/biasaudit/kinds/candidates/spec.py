"""The data fields of the tasks whose candidates a kind ranks or scores, shared by the
kinds that take them (each kind's spec is its own fields and one of these)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from biasaudit.engine.options import sizing_field
from biasaudit.kinds.runspec import RunSpec

__all__ = [
    "CandidatesData",
    "CustomData",
    "DrawnCandidates",
    "EssayData",
    "PoolRounds",
    "PoolSpec",
    "PromptSpec",
    "QualifiedSpec",
    "ResumeData",
]


class CandidatesData(RunSpec):
    """What every task of candidates has: the group the others are compared with."""

    reference_group: str | None = Field(
        None, description="The group every other is compared with [default: the task's]."
    )


class QualifiedSpec(BaseModel):
    """Who is qualified: a boolean column, or a number column at or above a threshold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    column: str
    at_least: float | Literal["median"] | None = Field(
        None, description="Qualified when the column is at least this (or its median)."
    )


class PromptSpec(BaseModel):
    """A prompt written in the spec; ``file`` reads it from a prompt file instead."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: Path | None = None
    system: str | None = None
    user: str | None = None
    candidate: str | None = None


class PoolSpec(BaseModel):
    """How candidates are pooled for selection."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    design: Literal["one_per_group", "random"] = "one_per_group"
    size: int | None = Field(None, ge=2, le=1000, description="Pool size of random pools.")


class ResumeData(CandidatesData):
    """Resume screening's data: the shipped jobs, resumes and names (Chen, Ji &
    Evans), or your own files."""

    task: Literal["resume-screening"] = "resume-screening"
    PATHS: ClassVar[tuple[str, ...]] = ("runs_dir", "cache", "names", "resumes")
    jobs: tuple[str, ...] | None = sizing_field(
        None, description="Job ids to audit, comma-separated [default: all four]."
    )
    names: Path | None = Field(
        None, description="CSV of name,group to use instead of the shipped names."
    )
    resumes: Path | None = Field(
        None, description="YAML of jobs and resumes to use instead of the shipped ones."
    )
    names_per_group: int = sizing_field(100, ge=1, le=100_000, description="Names per group.")
    names_drawn: Literal["sample", "nested"] = sizing_field(
        "sample",
        description="How the names are drawn (seeded): 'nested' keeps, at a larger "
        "--names-per-group, every name a smaller one drew (the rounds of --until).",
    )

    @field_validator("jobs", mode="before")
    @classmethod
    def _split_jobs(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(job.strip() for job in value.split(",") if job.strip())
        return value


class PoolRounds(BaseModel):
    """How the pools compared (pairwise) or ranked (listwise) are drawn, and how
    ``--until`` grows them: by pools per subtask, each round keeping the pools before."""

    pools_drawn: Literal["sequence", "nested"] = sizing_field(
        "sequence",
        description="Pairwise and listwise: how the pools are drawn (seeded): 'nested' draws "
        "each subtask's from its own stream, so that a larger --pools keeps every pool a "
        "smaller one drew (the rounds of --until); 'sequence' (one stream for every "
        "subtask) is how runs before it drew them.",
    )
    round_pools: int | None = sizing_field(
        None, ge=1, le=10_000,
        description="Pairwise and listwise --until: pools per subtask added each round "
        "[default: the first round's, --pools]."
    )  # fmt: skip
    max_pools: int = sizing_field(
        300, ge=1, le=10_000,
        description="Pairwise and listwise --until: the most pools per subtask to reach."
    )  # fmt: skip


class DrawnCandidates(BaseModel):
    """A subset of a file's candidates: the tasks whose candidates come from a file
    (essays, your own) audit some of them, and ``--until`` grows a pointwise audit by
    them."""

    candidates_per_group: int | None = sizing_field(
        None, ge=1, le=1_000_000,
        description="Audit N candidates of each group (in each subtask) of the file, drawn "
        "at random (seeded; nested: a larger N keeps every candidate a smaller one drew) "
        "[default: every one; pointwise --until: the first round's, --round-candidates or "
        "10]."
    )  # fmt: skip
    round_candidates: int | None = Field(
        None, ge=1, le=1_000_000,
        description="Pointwise --until: candidates per group added each round [default: "
        "the first round's].",
    )  # fmt: skip
    max_candidates: int | None = Field(
        None, ge=1, le=1_000_000,
        description="Pointwise --until: the most candidates per group to reach [default: "
        "every one of the file].",
    )  # fmt: skip


class EssayData(CandidatesData, DrawnCandidates):
    """Essay grading's data: a corpus you bring (or the shipped demo)."""

    task: Literal["essay-grading"] = "essay-grading"
    PATHS: ClassVar[tuple[str, ...]] = ("runs_dir", "cache", "essays")
    essays: Path = Field(
        description="CSV with text, group and optional rating; 'demo' for the shipped demo."
    )
    topic: str = Field(
        "It is important for college students to have a part-time job.",
        description="The essay prompt the rubric names (a 'topic' column overrides it).",
    )
    pool_size: int = Field(10, ge=2, le=1000, description="Essays per pool.")
    qualified_at_least: float | Literal["median"] | None = Field(
        None,
        description="An essay is qualified when its rating is at least this; 'median': the "
        "median of the rated essays. Unset: 'median', or with conventions: paper the "
        "authors' rule (above 53 of ICNALE's 0-100 overall rating, their 'Good' band).",
    )


class CustomData(CandidatesData, DrawnCandidates):
    """A task of your own: candidates in a CSV (its columns named here)."""

    task: Literal["allocation"] = "allocation"
    PATHS: ClassVar[tuple[str, ...]] = ("runs_dir", "cache", "candidates")
    name: str = Field("allocation", description="What reports call the task.")
    candidates: Path = Field(description="CSV with one row per candidate.")
    id_column: str | None = None
    group_column: str = "group"
    name_column: str | None = Field(None, description="Names pairwise answers may give.")
    subtask_column: str | None = None
    qualified: QualifiedSpec | str | None = None
    reference_group: str = Field(description="The group every other is compared with.")
    pool: PoolSpec = PoolSpec()
    noun: str = Field("Candidate", description="How the pairwise prompt labels its items.")
    context: dict[str, str] = Field(default_factory=dict, description="Extra placeholders.")
