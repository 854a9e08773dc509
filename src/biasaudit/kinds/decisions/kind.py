"""The decisions kind, declared (:class:`biasaudit.kinds.declare.Kind`)."""

from __future__ import annotations

from biasaudit.kinds.decisions.spec import SCORE_HELP, DecisionsSpec
from biasaudit.kinds.declare import Kind

KIND = Kind(
    __name__, name="decisions", specs=(DecisionsSpec,), commands=("decisions",),
    compared_per="figure", scores_file="persons.csv",
    score_argument="OUTPUTS_FILE", score_help=SCORE_HELP,
)  # fmt: skip
