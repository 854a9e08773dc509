"""``biasaudit study`` of listwise runs: the runs read side by side."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from biasaudit.errors import UsageError
from biasaudit.kinds.common import load_study_metrics
from biasaudit.kinds.listwise.metrics import ListwiseMetrics

__all__ = ["ListwiseStudy", "StudyRun", "run_study"]


@dataclass(frozen=True)
class StudyRun:
    path: Path
    label: str
    metrics: ListwiseMetrics


@dataclass(frozen=True)
class ListwiseStudy:
    runs: tuple[StudyRun, ...]


def run_study(run_dirs: Sequence[str | Path], *, ndcg_at: int = 3) -> ListwiseStudy:
    """The listwise runs in ``run_dirs``, labelled by model (and folder where two share
    one). ``ndcg_at`` is the allocation study's cutoff: this study ranks no models.

    Raises
    ------
    UsageError
        No runs, or a folder that is not a listwise run.
    """
    if not run_dirs:
        raise UsageError("give at least one listwise run directory")
    found = [
        (Path(p), load_study_metrics(Path(p), ListwiseMetrics, "a listwise run")) for p in run_dirs
    ]
    models = [metrics.model for _, metrics in found]
    runs = tuple(
        StudyRun(path, metrics.model if models.count(metrics.model) == 1
                 else f"{metrics.model} ({path.name})", metrics)
        for path, metrics in found
    )  # fmt: skip
    return ListwiseStudy(runs)
