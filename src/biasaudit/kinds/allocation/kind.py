"""The allocation kind, declared (:class:`biasaudit.kinds.declare.Kind`): resume
screening, essay grading and a task of your own share the manifest kind
``allocation``, one ``metrics.json`` shape, one table and one report."""

from __future__ import annotations

from biasaudit.kinds.allocation.spec import (
    SCORE_HELP,
    AllocationTaskSpec,
    EssayGradingSpec,
    ResumeScreeningSpec,
)
from biasaudit.kinds.declare import Kind

KIND = Kind(
    __name__, name="allocation",
    specs=(ResumeScreeningSpec, EssayGradingSpec, AllocationTaskSpec),
    commands=("resume-screening", "essay-grading"),
    compared_per="group", scores_file="scores.csv",
    score_argument="SCORES_FILE", score_help=SCORE_HELP,
    compare_note=" ΔDP and ΔEO in percentage points.",
    figure_names={"rabbi": "RABBI", "avg_gap": "δ (mean score gap)", "dp_gap": "ΔDP",
                  "eo_gap": "ΔEO"},
    in_points=("dp_gap", "eo_gap"),
)  # fmt: skip
