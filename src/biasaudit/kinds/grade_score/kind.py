"""The Grade Score kind, declared (:class:`biasaudit.kinds.declare.Kind`)."""

from __future__ import annotations

from biasaudit.kinds.declare import Kind
from biasaudit.kinds.grade_score.spec import SCORE_HELP, GradeScoreSpec

KIND = Kind(
    __name__, name="grade-score", specs=(GradeScoreSpec,), commands=("grade-score",),
    compared_per="figure", scores_file="items.csv",
    score_argument="TRIALS_FILE", score_help=SCORE_HELP,
    figure_names={"grade_score": "Grade Score", "entropy": "entropy score",
                  "choice": "choice score"},
)  # fmt: skip
