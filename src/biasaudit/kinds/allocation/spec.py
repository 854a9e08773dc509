"""The allocation audit's specs: the fields every allocation task has
(:class:`AllocationSpec`), and the three tasks' own (resume screening, essay
grading, a task of your own)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from biasaudit.spec import MAX_ROUNDS, RunSpec

__all__ = [
    "AllocationSpec",
    "AllocationTaskSpec",
    "EssayGradingSpec",
    "PoolSpec",
    "PromptSpec",
    "QualifiedSpec",
    "ResumeScreeningSpec",
]

Method = Literal["pointwise", "pairwise"]


class AllocationSpec(RunSpec):
    """An allocation audit's own fields: the method and its scoring, the reference group,
    the selection simulated (k, pools, rounds) and its bootstraps."""

    @classmethod
    def relative_to(cls, data: dict[str, Any], folder: Path) -> dict[str, Any]:
        """Also the prompt files a spec's ``pointwise`` / ``pairwise`` name."""
        resolved = super().relative_to(data, folder)
        for key in ("pointwise", "pairwise"):
            prompt = resolved.get(key)
            if isinstance(prompt, dict) and isinstance(prompt.get("file"), str):
                resolved[key] = {**prompt, "file": str(folder / prompt["file"])}
        return resolved

    method: Method = Field(
        "pointwise", description="One candidate at a time, or pairs in both orders."
    )
    scoring: Literal["auto", "logprobs", "samples", "continuation"] = Field(
        "auto",
        description="Pointwise scores from first-token logprobs, sampled answers, or every "
        "label scored whole as a continuation (legacy completions with echo: vLLM, llama.cpp); "
        "auto: logprobs where the endpoint gives them.",
    )
    chat_template: str | None = Field(
        None,
        description="Continuation scoring: how the chat prompt becomes one text: 'model' "
        "(the model's own, where it can be read: local GGUF models), 'chatml', 'plain' "
        "(paragraphs, for base models), or a .jinja / tokenizer_config.json file "
        "[default: model].",
    )
    samples: int = Field(
        20, ge=1, le=128, description="Sampled answers per candidate when sampling."
    )
    top_logprobs: int | None = Field(
        None, ge=1, le=20, description="Alternatives asked for (default: 3 per label, >= 10)."
    )
    reference_group: str | None = Field(
        None, description="The group every other is compared with [default: the task's]."
    )
    k_max: int = Field(5, ge=1, le=100, description="Selections simulated: k = 1..k_max.")
    headline_k: int = Field(
        1, ge=1, le=100, description="The k the report's headline and rates use (<= k_max)."
    )
    # Upper bounds are checked with the spec, before anything is sent: far beyond any
    # useful audit, and well within memory (rounds x pools, bootstrap replicates).
    rounds: int = Field(
        1800, ge=1, le=MAX_ROUNDS, description="Simulated selection pools per subtask."
    )
    pools: int = Field(30, ge=1, le=10_000, description="Pairwise: pools compared per subtask.")
    bootstrap: int = Field(2000, ge=100, le=100_000, description="Bootstrap replicates of RABBI.")
    gap_bootstrap: int = Field(
        200, ge=20, le=10_000, description="Bootstrap replicates of the gaps."
    )


class ResumeScreeningSpec(AllocationSpec):
    """Screen resumes for four jobs: 8 groups x names x resumes (see 'biasaudit tasks').

    The shipped jobs, resumes and names (Chen, Ji & Evans), or your own files.
    """

    task: Literal["resume-screening"] = "resume-screening"
    PATHS: ClassVar[tuple[str, ...]] = ("runs_dir", "cache", "names", "resumes")
    jobs: tuple[str, ...] | None = Field(
        None, description="Job ids to audit, comma-separated [default: all four]."
    )
    names: Path | None = Field(
        None, description="CSV of name,group to use instead of the shipped names."
    )
    resumes: Path | None = Field(
        None, description="YAML of jobs and resumes to use instead of the shipped ones."
    )
    names_per_group: int = Field(100, ge=1, le=100_000, description="Names per group.")

    @field_validator("jobs", mode="before")
    @classmethod
    def _split_jobs(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(job.strip() for job in value.split(",") if job.strip())
        return value


class EssayGradingSpec(AllocationSpec):
    """Grade essays 1-5 and select the top k of random pools (see 'biasaudit tasks').

    The essays are a corpus you bring (or the shipped demo).
    """

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


class AllocationTaskSpec(AllocationSpec):
    """An allocation task of your own: candidates in a CSV, prompts in the spec."""

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
    labels: dict[str, Annotated[float, Field(allow_inf_nan=False)]] = Field(
        default_factory=lambda: {"Yes": 1.0, "No": 0.0},
        min_length=2,
        description="Pointwise label values (at least two, not all the same).",
    )
    pointwise: PromptSpec | None = None
    pairwise: PromptSpec | None = None
    pool: PoolSpec = PoolSpec()
    noun: str = Field("Candidate", description="How the pairwise prompt labels its items.")
    context: dict[str, str] = Field(default_factory=dict, description="Extra placeholders.")

    @field_validator("labels", mode="before")
    @classmethod
    def _quoted_labels(cls, value: Any) -> Any:
        if isinstance(value, dict) and any(isinstance(key, bool) for key in value):
            raise ValueError(
                "YAML reads unquoted Yes/No as true/false: quote the labels, "
                'e.g. {"Yes": 1, "No": 0}'
            )
        return value

    @field_validator("labels")
    @classmethod
    def _labels_that_tell_apart(cls, value: dict[str, float]) -> dict[str, float]:
        if len(set(value.values())) < 2:
            raise ValueError(
                "every label has the same value, so every candidate would score the same; "
                "give the labels different values"
            )
        return value
