"""The listwise audit's specs: its own fields (:class:`ListwiseSpec`) with the data
fields of resume screening, essay grading or a task of your own
(:mod:`biasaudit.kinds.candidates.spec`); told apart from the allocation kind's
specs of the same task by ``method: listwise``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from biasaudit.engine.options import computing_field, sizing_field
from biasaudit.kinds._planning import PlanningFields, UntilFields
from biasaudit.kinds.candidates.spec import (
    CandidatesData,
    CustomData,
    EssayData,
    PoolRounds,
    PromptSpec,
    ResumeData,
)

__all__ = ["ListwiseEssaySpec", "ListwiseResumeSpec", "ListwiseSpec", "ListwiseTaskSpec"]


class ListwiseSpec(CandidatesData, PlanningFields, UntilFields, PoolRounds):
    """A listwise audit's own fields: what is asked, in which orders, how often."""

    @model_validator(mode="before")
    @classmethod
    def _nested_pools(cls, data: Any) -> Any:
        # --until grows by pools: every round keeps the pools of the rounds before it.
        if isinstance(data, dict) and data.get("until"):
            data = {**data, "pools_drawn": data.get("pools_drawn") or "nested"}
        return data

    method: Literal["listwise"] = Field(
        "listwise", description="A whole pool ranked in one prompt."
    )
    listwise: Literal["full", "top1"] = Field(
        "full", description="Listwise: ask for a full ranking, or only the top choice."
    )
    scoring: Literal["auto", "logprobs", "samples"] = Field(
        "auto",
        description="Listwise: each candidate's chance of being put first from the first "
        "answer token's logprobs (top-1 figures only), or sampled answers read as rankings; "
        "auto: logprobs for --listwise top1 where the endpoint gives them.",
    )
    orders: Literal["latin", "all"] = Field(
        "latin",
        description="Listwise: a Latin square of orders (every candidate in every slot "
        "once), or every order of pools of at most 6.",
    )
    pools: int = sizing_field(30, ge=1, le=10_000, description="Pools per subtask.")
    samples: int = Field(
        1, ge=1, le=128, description="Listwise: answers sampled per order of a pool."
    )
    k_max: int = Field(3, ge=1, le=100, description="Selection rates and ΔDP for k = 1..k_max.")
    headline_k: int = Field(1, ge=1, le=100, description="The k of the impact ratios.")
    bootstrap: int = computing_field(1000, ge=100, le=100_000, description="Bootstrap replicates.")
    max_tokens: int = Field(
        60, ge=1, le=32768, description="Listwise: the longest answer (a ranking)."
    )


class ListwiseResumeSpec(ResumeData, ListwiseSpec):
    """Rank pools of one name per group, every name on the same resume."""


class ListwiseEssaySpec(EssayData, ListwiseSpec):
    """Rank random pools of essays."""


class ListwiseTaskSpec(CustomData, ListwiseSpec):
    """Rank pools of candidates of your own (prompt in ``ranking``)."""

    ranking: PromptSpec | None = Field(
        None,
        description="The listwise prompt: system and user with {candidates} and "
        "{instruction}, candidate with the candidates' columns.",
    )


SCORE_HELP = """The listwise figures of RANKINGS_FILE, rankings produced elsewhere.

    One row per candidate shown in an answer: pool, order (which answer of the
    pool), slot (1 = shown first), candidate, group, rank (1 = best; empty: not
    ranked); optional subtask, name and item (the units), and race / sex for
    impact ratios per category. Writes a run directory as an audit does and
    prints the table; a malformed file exits 2 naming its line and column.
    """
"""The help of ``biasaudit score listwise``: the file a user brings and what is written."""


FIGURE_NAMES = {"dp_gap": "ΔDP", "first choice": "first choice"}
"""How reports name the figures of the kind's change tests."""
