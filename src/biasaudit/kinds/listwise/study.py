"""``biasaudit study`` of listwise runs: the runs read side by side."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from biasaudit.kinds.common import StudyRun, labelled_study_runs
from biasaudit.kinds.listwise.metrics_file import ListwiseMetrics

__all__ = ["ListwiseStudy", "run_study"]


@dataclass(frozen=True)
class ListwiseStudy:
    runs: tuple[StudyRun[ListwiseMetrics], ...]


def run_study(run_dirs: Sequence[str | Path], *, ndcg_at: int = 3) -> ListwiseStudy:
    """The listwise runs in ``run_dirs``, labelled by model (and folder where two share
    one). ``ndcg_at`` is the allocation study's cutoff: this study ranks no models.

    Raises
    ------
    UsageError
        No runs, or a folder that is not a listwise run.
    """
    runs = labelled_study_runs(run_dirs, ListwiseMetrics, "a listwise run")
    return ListwiseStudy(tuple(runs))
