"""``compare.json``: two runs compared (``biasaudit compare``, a re-audit's comparison kept
in its new run), modelled so that the JSON Schemas list it and a damaged one is named."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["SCHEMA_VERSION", "ChangeRecord", "ComparisonRecord", "VersionsRecord"]

SCHEMA_VERSION = 1


class VersionsRecord(BaseModel):
    """What each run's endpoint reported about the model behind the name."""

    versions_a: list[str]
    versions_b: list[str]
    fingerprints_a: list[str]
    fingerprints_b: list[str]
    changed: bool = Field(False, description="Either set differs (derived; not read back).")


class ChangeRecord(BaseModel):
    """One test of "no change" of one figure between A and B."""

    metric: str
    group: str | None = None
    before: float | None = None
    after: float | None = None
    difference: float
    ci: tuple[float, float]
    p_value: float
    method: str
    p_adjusted: float = Field(1.0, description="Adjusted over the comparison's tests (Holm).")
    changed: bool = Field(False, description="p_adjusted below alpha (derived; not read back).")


class ComparisonRecord(BaseModel):
    """``compare.json``: two runs compared, every test, and the verdict."""

    schema_version: int = SCHEMA_VERSION
    run_a: str
    run_b: str
    kind: str
    model_a: str
    model_b: str
    versions: VersionsRecord
    tests: list[ChangeRecord]
    alpha: float
    notes: list[str] = Field(default_factory=list)
    different_settings: list[str] = Field(
        default_factory=list, description="What the runs asked differently (no verdict then)."
    )
    allow_different_settings: bool = False
    verdict: str = Field("", description="Derived; not read back.")
    changed_groups: list[str] = Field(default_factory=list, description="Derived.")
