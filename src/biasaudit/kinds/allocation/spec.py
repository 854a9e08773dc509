"""The allocation audit's specs: the fields every allocation task has
(:class:`AllocationSpec`), and the three tasks' own (resume screening, essay
grading, a task of your own)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from biasaudit.engine.options import computing_field, sizing_field
from biasaudit.kinds._planning import PlanningFields, UntilFields
from biasaudit.kinds.candidates.spec import (
    CandidatesData,
    CustomData,
    EssayData,
    PoolRounds,
    PoolSpec,
    PromptSpec,
    QualifiedSpec,
    ResumeData,
)
from biasaudit.kinds.runspec import MAX_ROUNDS, relative_path

__all__ = [
    "FIGURE_NAMES",
    "SCORE_HELP",
    "SPECS",
    "AllocationSpec",
    "AllocationTaskSpec",
    "EssayGradingSpec",
    "PoolSpec",
    "PromptSpec",
    "QualifiedSpec",
    "ResumeScreeningSpec",
]

Method = Literal["pointwise", "pairwise"]


class AllocationSpec(CandidatesData, PlanningFields, UntilFields, PoolRounds):
    """An allocation audit's own fields: the method and its scoring, the reference group,
    the selection simulated (k, pools, rounds) and its bootstraps."""

    @model_validator(mode="before")
    @classmethod
    def _nested_units(cls, data: Any) -> Any:
        # --until grows by names (pointwise resume screening), candidates of a file (other
        # pointwise tasks) or pools (pairwise): every round keeps the units of the rounds
        # before it.
        if isinstance(data, dict) and data.get("until"):
            if data.get("method") == "pairwise":
                data = {**data, "pools_drawn": data.get("pools_drawn") or "nested"}
            elif "names_drawn" in cls.model_fields:
                data = {**data, "names_drawn": data.get("names_drawn") or "nested"}
            elif "candidates_per_group" in cls.model_fields:  # the first round: some of them
                first = data.get("candidates_per_group") or data.get("round_candidates") or 10
                data = {**data, "candidates_per_group": first}
        return data

    @classmethod
    def relative_to(cls, data: dict[str, Any], folder: Path) -> dict[str, Any]:
        """Also the prompt files a spec's ``pointwise`` / ``pairwise`` name."""
        resolved = super().relative_to(data, folder)
        for key in ("pointwise", "pairwise"):
            prompt = resolved.get(key)
            if isinstance(prompt, dict) and isinstance(prompt.get("file"), str):
                resolved[key] = {**prompt, "file": relative_path(prompt["file"], folder)}
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
        None,
        ge=1,
        le=100,
        description="Alternatives asked for (default: 3 per label, >= 10); above 20 where "
        "the endpoint gives more (llama.cpp, local/ models).",
    )
    round_names: int | None = sizing_field(
        None, ge=1, le=10_000,
        description="--until: names per group added each round [default: the first "
        "round's, --names-per-group]."
    )  # fmt: skip
    max_names: int = sizing_field(
        100, ge=1, le=100_000, description="--until: the most names per group to reach."
    )
    k_max: int = Field(5, ge=1, le=100, description="Selections simulated: k = 1..k_max.")
    headline_k: int = Field(
        1, ge=1, le=100, description="The k the report's headline and rates use (<= k_max)."
    )
    # Upper bounds are checked with the spec, before anything is sent: far beyond any
    # useful audit, and well within memory (rounds x pools, bootstrap replicates).
    rounds: int = sizing_field(
        1800, ge=1, le=MAX_ROUNDS, description="Simulated selection pools per subtask."
    )
    pools: int = sizing_field(
        30, ge=1, le=10_000, description="Pairwise: pools compared per subtask."
    )
    bootstrap: int = computing_field(
        2000, ge=100, le=100_000, description="Bootstrap replicates of RABBI."
    )
    gap_bootstrap: int = computing_field(
        200, ge=20, le=10_000, description="Bootstrap replicates of the gaps."
    )


class ResumeScreeningSpec(ResumeData, AllocationSpec):
    """Screen resumes for four jobs: 8 groups x names x resumes (see 'biasaudit tasks').

    The shipped jobs, resumes and names (Chen, Ji & Evans), or your own files.
    """


class EssayGradingSpec(EssayData, AllocationSpec):
    """Grade essays 1-5 and select the top k of random pools (see 'biasaudit tasks').

    The essays are a corpus you bring (or the shipped demo).
    """


class AllocationTaskSpec(CustomData, AllocationSpec):
    """An allocation task of your own: candidates in a CSV, prompts in the spec."""

    labels: dict[str, Annotated[float, Field(allow_inf_nan=False)]] = Field(
        default_factory=lambda: {"Yes": 1.0, "No": 0.0},
        min_length=2,
        description="Pointwise label values (at least two, not all the same).",
    )
    pointwise: PromptSpec | None = None
    pairwise: PromptSpec | None = None

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


SCORE_HELP = """Every allocation figure of SCORES_FILE, a CSV of candidate,group,score.

    Optional columns: qualified (true/false; empty: not rated), subtask, name,
    item, pool. Writes a run directory as an audit does (the manifest says the
    scores were imported), prints the table and ``run: <dir>``; a malformed
    file exits 2 naming its line and column.
    """
"""The help of ``biasaudit score allocation``: the file a user brings and what is written."""

SPECS = (ResumeScreeningSpec, EssayGradingSpec, AllocationTaskSpec)
"""The kind's specs, the default (resume screening) first."""

FIGURE_NAMES = {
    "rabbi": "RABBI",
    "avg_gap": "δ (mean score gap)",
    "dp_gap": "ΔDP",
    "eo_gap": "ΔEO",
}
"""How reports name the figures the kind's change tests key."""
