"""The fields every audit spec has, below the kinds that build on them.

Each kind's spec classes (``kinds/<kind>/spec.py``) extend :class:`RunSpec`;
reading a spec of any task (:func:`biasaudit.spec.parse_spec`, ``load_spec``)
stands above the kinds and dispatches to them through the registry.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from biasaudit.engine.options import SIZING_FIELD, RunOptions, field_role, sizing_field
from biasaudit.interventions import Intervention
from biasaudit.providers._types import ReasoningEffort

__all__ = [
    "MAX_ROUNDS",
    "SIZES_THE_RUN",
    "AuditSpec",
    "RunSpec",
    "relative_path",
    "sizes_the_run",
]

MAX_ROUNDS = 100_000


SIZES_THE_RUN: dict[str, Any] = SIZING_FIELD
"""A spec field's mark (``json_schema_extra``) that it says how much of an audit a run
asks (names, pools, items, scenarios, replicates, rounds of ``--until``, their seed),
not which audit it is: runs that differ only in such fields, or in how they were sent
(:data:`~biasaudit.engine.options.FieldRole`), are one audit of one model."""


def sizes_the_run(field: Any) -> bool:
    """Whether a pydantic field carries :data:`SIZES_THE_RUN`."""
    return field_role(field) == "sizing"


class RunSpec(RunOptions):
    """Fields every audit spec has: the model, its endpoint, the engine and the storage
    (:class:`~biasaudit.engine.options.RunOptions`), and the statistics every kind
    shares (seed, confidence, conventions). Each kind's spec adds its own
    (:class:`AllocationSpec`, :class:`GradeScoreSpec`, :class:`RutedSpec`)."""

    PATHS: ClassVar[tuple[str, ...]] = ("runs_dir", "cache")
    """Fields holding file or folder paths, relative to a spec file's folder."""

    temperature: float = Field(
        1.0, gt=0.0, le=2.0, allow_inf_nan=False, description="Of sampled answers and texts."
    )
    conventions: Literal["biasaudit", "paper"] = Field(
        "biasaudit",
        description="Definitions of the figures where biasaudit departs from the papers: its "
        "own, or the papers' (docs: Where biasaudit departs from the papers).",
    )
    seed: int = sizing_field(
        0, ge=0, le=2**32 - 1, description="Seeds name sampling, pools and bootstraps."
    )
    confidence: float = Field(
        0.95, gt=0.0, lt=1.0, allow_inf_nan=False, description="Of every interval."
    )
    intervention: Intervention | None = Field(
        None,
        description="A change made to every prompt (a system prompt, text before or after, "
        "names hidden): one arm of a mitigation experiment (biasaudit experiment) [default: "
        "none, the prompts as the task writes them].",
    )
    reasoning_effort: ReasoningEffort | None = Field(
        None,
        description="Reasoning models (openai/o3, openai/gpt-5, ...): how much the model "
        "reasons before each answer, sent as reasoning_effort and part of every cache key "
        "[default: the model's own].",
    )

    @model_validator(mode="before")
    @classmethod
    def _base_urls(cls, data: Any) -> Any:
        # `base_urls: [...]` (replicas of one model) is another spelling of a list base_url.
        if isinstance(data, dict) and "base_urls" in data:
            data = dict(data)
            urls = data.pop("base_urls")
            if data.get("base_url") is not None:
                raise ValueError("give base_url or base_urls, not both")
            data["base_url"] = urls
        return data

    @classmethod
    def relative_to(cls, data: dict[str, Any], folder: Path) -> dict[str, Any]:
        """``data`` read from a spec file in ``folder``, its relative paths made that
        folder's (a kind's spec adds the paths of its own fields)."""
        resolved = dict(data)
        for key in (*cls.PATHS, *(["like"] if "like" in cls.model_fields else [])):
            value = resolved.get(key)
            if isinstance(value, str) and value != "demo":
                resolved[key] = relative_path(value, folder)
        return resolved


AuditSpec = RunSpec
"""Any audit's spec (every kind's spec is a :class:`RunSpec`)."""


def relative_path(value: str, folder: Path) -> str:
    """``value`` as a path from ``folder`` unless it is absolute, without ``..`` steps
    (``specs/../runs`` is ``runs``: what every message then shows)."""
    return value if Path(value).is_absolute() else os.path.normpath(folder / value)
