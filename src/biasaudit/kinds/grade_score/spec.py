"""The Grade Score audit's spec."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from biasaudit.engine.options import sizing_field
from biasaudit.kinds._planning import PlanningFields, UntilFields
from biasaudit.kinds.runspec import RunSpec, relative_path

__all__ = ["GRADE_SCORE_PROMPTS", "GradeScoreSpec"]

GRADE_SCORE_PROMPTS = ("1", "2", "3", "4")


class GradeScoreSpec(RunSpec, PlanningFields, UntilFields):
    """Grade Score: does a judge choose among options by position or by content?

    Each item's options are shown in every cyclic order; prints the mean Grade
    Score, entropy and choice scores with intervals, the slots chosen, and per
    item (Iourovitski, "Grade Score: Quantifying LLM Performance in Option
    Selection", 2024).
    """

    task: Literal["grade-score"] = "grade-score"
    PATHS: ClassVar[tuple[str, ...]] = ("runs_dir", "cache", "items")
    items: Path = Field(
        description="JSONL of {id, prompt, options[, preferred | ranks]}; 'demo' for the "
        "shipped demo."
    )
    prompt: str = Field(
        "1",
        description="Judge prompt: 1 select then explain, 2 evaluate each then select, 3 told "
        "to ignore the order, 4 grade each 0-5 then select; or a prompt file.",
    )
    random_option: bool = Field(
        False, description="Add one unrelated option drawn from another item (seeded by seed)."
    )
    permutations: Literal["cyclic", "all"] = Field(
        "cyclic", description="Every rotation of the options, or all n! orders (n <= 6)."
    )
    replicates: int = sizing_field(1, ge=1, le=100, description="Times each order is asked.")
    item_limit: int | None = sizing_field(
        None, ge=1, le=1_000_000,
        description="Audit N items of the file, drawn at random (seeded; nested: a larger N "
        "keeps every item a smaller one drew) [default: every item; with --until: the "
        "first round's, --round-items or 10]."
    )  # fmt: skip
    round_items: int | None = sizing_field(
        None, ge=1, le=1_000_000,
        description="--until: items added each round [default: the first round's]."
    )  # fmt: skip
    max_items: int | None = sizing_field(
        None, ge=1, le=1_000_000,
        description="--until: the most items to reach [default: every item of the file]."
    )  # fmt: skip
    temperature: float = Field(
        0.3,
        ge=0.0,
        le=2.0,
        allow_inf_nan=False,
        description="The judge's sampling temperature (the paper's: 0.3).",
    )
    max_tokens: int | None = Field(
        None, ge=1, le=32768, description="Longest answer [default: the prompt's]."
    )

    @classmethod
    def relative_to(cls, data: dict[str, Any], folder: Path) -> dict[str, Any]:
        """Also a judge prompt given as a file (not one of the shipped 1-4)."""
        resolved = super().relative_to(data, folder)
        judge = resolved.get("prompt")
        if isinstance(judge, str) and judge not in GRADE_SCORE_PROMPTS:
            resolved["prompt"] = relative_path(judge, folder)
        return resolved

    @model_validator(mode="before")
    @classmethod
    def _first_round(cls, data: Any) -> Any:
        # --until grows by items: the first round audits some of them.
        if isinstance(data, dict) and data.get("until") and not data.get("item_limit"):
            data = {**data, "item_limit": data.get("round_items") or 10}
        return data

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt_number(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


SCORE_HELP = """The Grade Score of a judge's answers in TRIALS_FILE, a CSV of item,shown,slot.

    ``shown``: the item's options in the order shown (space-separated indices or
    labels); ``slot``: the one chosen, 1 = shown first (empty: no usable answer);
    optional ``preferred`` and ``replicate``. Writes a run directory as an audit
    does and prints the table and ``run: <dir>``.
    """
"""The help of ``biasaudit score grade-score``: the file a user brings and what is written."""


FIGURE_NAMES = {"grade_score": "Grade Score", "entropy": "entropy score", "choice": "choice score"}
"""How reports name the figures of the kind's change tests."""
