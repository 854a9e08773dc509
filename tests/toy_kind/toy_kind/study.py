"""The toy kind's study: its runs side by side."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from biasaudit.kinds.kit import read_run_metrics
from toy_kind.metrics_file import ToyMetrics


def run_study(run_dirs: Sequence[str | Path], *, ndcg_at: int) -> list[tuple[str, ToyMetrics]]:
    return [(Path(p).name, read_run_metrics(Path(p), ToyMetrics)) for p in run_dirs]
