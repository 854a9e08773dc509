"""``experiment.json``: a mitigation experiment's arms, paired effects and costs (the file
:mod:`biasaudit.experiments` writes; below it, so that the JSON Schemas can list it); and
``experiment-compare.json``, two experiments compared (:mod:`biasaudit.reports.experiment`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from biasaudit.interventions import Intervention
from biasaudit.store.comparisons import ChangeRecord, ComparisonRecord

__all__ = [
    "EXPERIMENT_COMPARE_FILE",
    "EXPERIMENT_FILE",
    "SCHEMA_VERSION",
    "Arm",
    "ArmComparison",
    "Cost",
    "Effect",
    "Experiment",
    "ExperimentComparisonRecord",
]

EXPERIMENT_FILE = "experiment.json"
EXPERIMENT_COMPARE_FILE = "experiment-compare.json"
"""The record of two experiments compared, in the folder ``compare`` writes (each shared
arm's own comparison in ``arm-<name>/compare.json`` beside it)."""
SCHEMA_VERSION = 1


class Arm(BaseModel):
    """One run of the experiment: the baseline (no intervention) or one intervention."""

    name: str = Field(description="'baseline', or the intervention's name.")
    intervention: Intervention | None = Field(None, description="None for the baseline.")
    run_dir: str = Field(description="Its run folder.")


class Effect(BaseModel):
    """What one intervention did to one figure: the paired change from the baseline."""

    arm: str
    figure: str
    group: str | None = None
    baseline: float | None = None
    under: float | None = Field(None, description="The figure under the intervention.")
    change: float = Field(description="Under the intervention minus the baseline.")
    ci: tuple[float, float]
    p: float
    p_adjusted: float = Field(description="Holm-adjusted over every arm and figure.")
    beyond_noise: bool = Field(description="p_adjusted below the experiment's alpha.")
    method: str
    fair: float = Field(
        0.0,
        description="The figure's value without bias: 0 for a gap, 1 for a score of "
        "consistency (Grade Score's).",
    )
    bias: bool = Field(
        True,
        description="A disparity between groups (False: the decisions' level or an order "
        "effect, shown beside the bias but not counted as bias removed).",
    )


class Cost(BaseModel):
    """What one intervention cost, beside what it fixed."""

    arm: str
    decision: str = Field("", description="What the decision's level is (mean score, ...).")
    level_baseline: float | None = None
    level_under: float | None = None
    level_change: float | None = None
    level_ci: tuple[float, float] | None = None
    spread_ratio: float | None = Field(
        None,
        description="The standard deviation of the clusters' mean decisions (scenarios, "
        "resumes) under the intervention over the baseline's: below 0.5, the "
        "intervention flattens them (the decision no longer depends on the case).",
    )
    validity: str = Field("", description="The ground truth the validity is taken against.")
    validity_baseline: float | None = Field(
        None, description="Mean decision of the stronger units minus the weaker ones'."
    )
    validity_under: float | None = None
    validity_change: float | None = None
    validity_ci: tuple[float, float] | None = None
    irregular_baseline: float | None = Field(
        None, description="Share of units without a usable answer (unread, refused, failed)."
    )
    irregular_under: float | None = None
    refusals_baseline: int = 0
    refusals_under: int = 0
    tokens_baseline: int = Field(
        0,
        description="Input and output tokens of the whole run, estimated alike for every "
        "arm whatever the cache held (output: an upper bound).",
    )
    tokens_under: int = 0
    cost_baseline: float | None = Field(
        None, description="Its cost at list price, estimated alike (None: price unknown)."
    )
    cost_under: float | None = None
    bias_removed: float | None = Field(
        None,
        description="The share of the bias figures' summed absolute values removed, 1 - "
        "sum |under| / sum |baseline| (1: all, 0: none, below 0: bias grew).",
    )
    bias_removed_beyond_noise: int = Field(
        0, description="Bias figures whose paired change is beyond noise."
    )
    verdict: str = Field(description="One line: what the intervention did, at what cost.")
    flattens: bool = False


class Experiment(BaseModel):
    """A mitigation experiment: an audit under each intervention, read side by side."""

    schema_version: int = SCHEMA_VERSION
    kind: str
    task: str
    model: str
    simulated: bool
    confidence: float
    alpha: float
    bootstrap: int = Field(1000, description="Replicates of the paired bootstraps.")
    seed: int = Field(0, description="Their seed (the spec's).")
    replay_of: str | None = Field(None, description="The experiment this one replays.")
    arms: list[Arm]
    effects: list[Effect] = Field(default_factory=list)
    costs: list[Cost] = Field(default_factory=list)
    family: str = Field("", description="What the Holm adjustment is over.")
    notes: list[str] = Field(default_factory=list)

    def arm(self, name: str) -> Arm:
        return next(arm for arm in self.arms if arm.name == name)

    def run_dir(self, name: str, folder: Path) -> Path:
        """An arm's run folder, relative to the experiment's ``folder`` where it was
        recorded relative."""
        path = Path(self.arm(name).run_dir)
        return path if path.is_absolute() else (folder / path).resolve()


class ArmComparison(BaseModel):
    """One arm both experiments ran, its two runs compared as ``biasaudit compare`` does."""

    name: str
    verdict: str
    comparison: ComparisonRecord = Field(description="The arm's two runs compared.")


class ExperimentComparisonRecord(BaseModel):
    """``experiment-compare.json``: two mitigation experiments compared (``biasaudit
    compare EXP_A EXP_B``, a re-audit of an experiment)."""

    schema_version: int = SCHEMA_VERSION
    folder_a: str
    folder_b: str
    alpha: float
    verdict: str = Field(description="'no change', 'changed: ...', or a version change.")
    drift: bool = Field(description="An arm's audit changed, or an intervention's effect.")
    version_changed: bool
    arms: list[ArmComparison]
    effects: list[ChangeRecord] = Field(
        description="Each intervention's effect on each figure, A against B ('<arm>: <figure>')."
    )
    notes: list[str] = Field(default_factory=list)
