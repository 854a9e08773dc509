"""The allocation kind, declared (:class:`biasaudit.kinds.declare.Kind`): resume
screening, essay grading and a task of your own share one ``metrics.json`` shape."""

from __future__ import annotations

from biasaudit.kinds.allocation import spec
from biasaudit.kinds.declare import Kind

KIND = Kind(
    __name__, name="allocation", specs=spec.SPECS, commands=("resume-screening", "essay-grading"),
    compared_per="group", scores_file="scores.csv", score_argument="SCORES_FILE",
    score_help=spec.SCORE_HELP, compare_note=" ΔDP and ΔEO in percentage points.",
    figure_names=spec.FIGURE_NAMES, in_points=("dp_gap", "eo_gap"), selects="Candidates",
)  # fmt: skip
