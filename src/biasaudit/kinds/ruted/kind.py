"""The RUTEd kind, declared (:class:`biasaudit.kinds.declare.Kind`)."""

from __future__ import annotations

from biasaudit.kinds.declare import Kind
from biasaudit.kinds.ruted.spec import SCORE_HELP, RutedSpec

KIND = Kind(
    __name__, name="ruted", specs=(RutedSpec,), commands=("ruted",),
    compared_per="context", scores_file="occupations.csv",
    score_argument="OUTPUTS_FILE", score_help=SCORE_HELP,
)  # fmt: skip
