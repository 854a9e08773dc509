"""The toy kind, declared."""

from __future__ import annotations

from biasaudit.kinds.kit import Kind
from toy_kind.spec import ToySpec

KIND = Kind(
    __name__, name="toy", specs=(ToySpec,), commands=("toy-yesno",), compared_per="figure",
    scores_file="answers.csv", score_argument="FILE", score_help="",
)  # fmt: skip
