"""``biasaudit study`` of decisions runs: the runs read side by side."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from biasaudit.kinds.common import StudyRun, labelled_study_runs
from biasaudit.kinds.decisions.metrics_file import DecisionsMetrics

__all__ = ["DecisionsStudy", "run_study"]


@dataclass(frozen=True)
class DecisionsStudy:
    runs: tuple[StudyRun[DecisionsMetrics], ...]

    def terms(self) -> list[tuple[str, str]]:
        """Every (fill, score level) some run has, in the order first seen."""
        found: dict[tuple[str, str], None] = {}
        for run in self.runs:
            for fill, figures in run.metrics.fills.items():
                for score in figures.scores:
                    found[(fill, score.level)] = None
        return list(found)


def run_study(run_dirs: Sequence[str | Path], *, ndcg_at: int = 3) -> DecisionsStudy:
    """The decisions runs in ``run_dirs``, labelled by model (and folder where two share
    one). ``ndcg_at`` is the allocation study's cutoff: this study ranks no models.

    Raises
    ------
    UsageError
        No runs, or a folder that is not a decisions run.
    """
    runs = labelled_study_runs(run_dirs, DecisionsMetrics, "a decisions run")
    return DecisionsStudy(tuple(runs))
