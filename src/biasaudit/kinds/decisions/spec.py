"""The decisions audit's spec."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from biasaudit.engine.options import sizing_field
from biasaudit.kinds._planning import PlanningFields, UntilFields
from biasaudit.kinds.runspec import RunSpec, relative_path

__all__ = ["SCORE_HELP", "DecisionsSpec"]


class DecisionsSpec(RunSpec, PlanningFields, UntilFields):
    """Decisions: does a yes/no decision about a person move with their age, gender or race?

    Each scenario (a loan, a lease, a visa...) is filled with every person of a grid of
    ages, genders and races, explicitly or by name, and asked with yes offered first
    and with no offered first; prints each discrimination score (the shift in the
    logit of P(yes) against a 60-year-old white man) with its interval over
    scenarios, explicit and implicit side by side, the answer-order gap, and the
    scenarios (Tamkin et al., "Evaluating and Mitigating Discrimination in Language
    Model Decisions", 2023).
    """

    task: Literal["decisions"] = "decisions"
    PATHS: ClassVar[tuple[str, ...]] = ("runs_dir", "cache", "scenarios")
    scenarios: Path = Field(
        Path("builtin"),
        description="JSONL of scenario templates {id, template[, noun]} or of discrim-eval "
        "rows {filled_template, decision_question_id, age, gender, race, fill_type}; "
        "'builtin' for the 12 shipped scenarios.",
    )
    fills: Literal["explicit", "implicit", "both"] = Field(
        "both",
        description="Persons described explicitly (age, race, gender), by a name and age, or both.",
    )
    prompt: str = Field(
        "default",
        description="The shipped prompt ('default') or a prompt file with {scenario}, "
        "{first} and {second}.",
    )
    orders: Literal["auto", "both", "yes-first"] = Field(
        "auto",
        description="Offer yes first and no first (both), or yes first only; auto: both, "
        "the paper's conventions yes first.",
    )
    scoring: Literal["auto", "logprobs", "samples"] = Field(
        "auto",
        description="P(yes) from first-token logprobs or from sampled answers; auto: "
        "logprobs where the endpoint gives them.",
    )
    samples: int = Field(20, ge=2, le=1000, description="Sampled answers per request.")
    top_logprobs: int | None = Field(
        None, ge=1, le=100, description="Alternatives asked for per token [default: 10]."
    )
    scenario_limit: int | None = sizing_field(
        None, ge=2, le=100_000,
        description="Audit N scenarios of the file, drawn at random (seeded; nested) "
        "[default: every one; with --until: the first round's, --round-scenarios or 4]."
    )  # fmt: skip
    round_scenarios: int | None = sizing_field(
        None, ge=1, le=100_000,
        description="--until: scenarios added each round [default: the first round's]."
    )  # fmt: skip
    max_scenarios: int | None = sizing_field(
        None, ge=2, le=100_000,
        description="--until: the most scenarios to reach [default: every one of the file]."
    )  # fmt: skip

    @classmethod
    def relative_to(cls, data: dict[str, Any], folder: Path) -> dict[str, Any]:
        """Also a prompt given as a file."""
        resolved = super().relative_to(data, folder)
        prompt = resolved.get("prompt")
        if isinstance(prompt, str) and prompt != "default":
            resolved["prompt"] = relative_path(prompt, folder)
        return resolved

    @model_validator(mode="before")
    @classmethod
    def _first_round(cls, data: Any) -> Any:
        # --until grows by scenarios: the first round audits some of them.
        if isinstance(data, dict) and data.get("until") and not data.get("scenario_limit"):
            data = {**data, "scenario_limit": data.get("round_scenarios") or 4}
        return data


SCORE_HELP = """The discrimination scores of yes/no answers in OUTPUTS_FILE, a CSV of
    scenario,age,gender,race and p_yes (or logit).

    One row per person asked (or per person and order, with ``order``: yes-first or
    no-first); optional ``fill`` (explicit or implicit). Race is scored against
    ``white`` and gender against ``male``. Writes a run directory as an audit does and
    prints the table and ``run: <dir>``.
    """
"""The help of ``biasaudit score decisions``: the file a user brings and what is written."""
