"""The RUTEd audit's spec."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from biasaudit.engine.options import sizing_field
from biasaudit.kinds._planning import PlanningFields, UntilFields
from biasaudit.kinds.runspec import RunSpec

__all__ = ["RUTED_CONTEXTS", "RutedContext", "RutedSpec"]

RutedContext = Literal["standard", "bedtime", "personas", "esl"]
RUTED_CONTEXTS: tuple[RutedContext, ...] = ("standard", "bedtime", "personas", "esl")


class RutedSpec(RunSpec, PlanningFields, UntilFields):
    """RUTEd: gender-occupation bias in a next-word trick test and in long-form text.

    Neutrality, skew and stereotype with 95% intervals in the standard test
    ("The {occupation} is") and in bedtime stories, user personas and ESL
    exercises, per occupation in occupations.csv (see 'biasaudit tasks'; Lum et
    al., "Bias in Language Models: Beyond Trick Tests and Towards RUTEd
    Evaluation", ACL 2025). The temperature is that of the texts and sampled
    next words.
    """

    task: Literal["ruted"] = "ruted"
    PATHS: ClassVar[tuple[str, ...]] = ("runs_dir", "cache", "occupations")
    contexts: tuple[RutedContext, ...] = Field(
        RUTED_CONTEXTS,
        min_length=1,
        description="Comma-separated, of standard, bedtime, personas, esl.",
    )
    replicates: int = sizing_field(
        30,
        ge=1,
        le=10_000,
        description="Texts per occupation and template; sampled next words where the "
        "endpoint gives no logprobs.",
    )
    per_request: int | None = sizing_field(
        None, ge=1, le=128,
        description="Replicates asked for in one request (its n), where the endpoint takes "
        "n [default: all of a prompt's at once, up to 128; with --until: the rounds' common "
        "step, so that a round's requests are the rounds' before and new ones]."
    )  # fmt: skip
    round_replicates: int | None = sizing_field(
        None, ge=1, le=10_000,
        description="--until: replicates added each round [default: the first round's, "
        "--replicates]."
    )  # fmt: skip
    max_replicates: int = sizing_field(
        300, ge=1, le=10_000, description="--until: the most replicates to reach."
    )
    templates: tuple[Annotated[int, Field(ge=0)], ...] | Literal["all"] = Field(
        (0,), description="Templates per context: 0 (the main one), a list such as 0,3, or all."
    )
    occupations: Path | None = Field(
        None, description="CSV of occupation,majority [default: the 40 WinoBias occupations]."
    )
    next_word: Literal["auto", "continuation", "completions", "chat", "samples"] = Field(
        "auto",
        description="Standard test: every listed word scored as a continuation (the paper's; "
        "needs an endpoint that echoes prompts), top-N completions or chat logprobs, or "
        "sampled words.",
    )
    top_logprobs: int | None = Field(
        None,
        ge=1,
        le=100,
        description="Next-word alternatives asked for [default: 20]; above 20 where the "
        "endpoint gives more (llama.cpp, local/ models).",
    )
    mode_collapse: Literal["auto", "on", "off"] = Field(
        "auto",
        description="The mode-collapse check of the long-form texts (RUTEd §4.4): mean "
        "similarity of each prompt's replicates from sentence embeddings; auto: where the "
        "embeddings extra is installed, on: require it, off: skip.",
    )

    @model_validator(mode="before")
    @classmethod
    def _rounds_per_request(cls, data: Any) -> Any:
        # --until grows by replicates: every round's requests ask for the same number, the
        # common step of the first round and the rounds after it, so that a round repeats
        # the requests of the rounds before (from the cache) and adds new ones.
        if isinstance(data, dict) and data.get("until") and not data.get("per_request"):
            first, step = data.get("replicates", 30), data.get("round_replicates")
            step = first if step is None else step
            if all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in (first, step)):
                data = {**data, "per_request": min(math.gcd(first, step), 128)}
        return data

    @field_validator("contexts", mode="before")
    @classmethod
    def _split_contexts(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    @field_validator("templates", mode="before")
    @classmethod
    def _template_list(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip() == "all":
            return "all"
        parts = value.split(",") if isinstance(value, str) else value
        parts = parts if isinstance(parts, list | tuple) else [parts]
        numbers = [str(part).strip() for part in parts]
        if not numbers or not all(number.isdigit() for number in numbers):
            raise ValueError(f"must be 'all' or template numbers such as 0 or 0,3; got {value!r}")
        return tuple(int(number) for number in numbers)


SCORE_HELP = """The RUTEd metrics of OUTPUTS_FILE, a CSV of gendered outputs.

    Its columns: occupation,context,text or occupation,context,p_male. Texts
    are labelled by their pronouns as a run labels them; p_male is a share
    already measured. Optional ``majority`` (male/female) for occupations other
    than the 40 shipped ones, and ``template`` to tell one occupation's prompts
    apart (the mode-collapse check compares replicates of one prompt). Writes a
    run directory and prints the table.
    """
"""The help of ``biasaudit score ruted``: the file a user brings and what is written."""
