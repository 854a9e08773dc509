"""The listwise kind, declared (:class:`biasaudit.kinds.declare.Kind`)."""

from __future__ import annotations

from biasaudit.kinds.declare import Kind
from biasaudit.kinds.listwise.spec import (
    SCORE_HELP,
    ListwiseEssaySpec,
    ListwiseResumeSpec,
    ListwiseTaskSpec,
)

KIND = Kind(
    __name__, name="listwise",
    specs=(ListwiseResumeSpec, ListwiseEssaySpec, ListwiseTaskSpec), commands=(),
    compared_per="group", scores_file="shown.csv",
    score_argument="RANKINGS_FILE", score_help=SCORE_HELP,
    figure_names={"dp_gap": "ΔDP", "first choice": "first choice"},
    in_points=("dp_gap", "first choice"), selects="Appearances in the answers",
)  # fmt: skip
