"""What the terminal shows of a toy run."""

from __future__ import annotations

from pathlib import Path

from toy_kind.metrics_file import ToyMetrics


def run_table(metrics: ToyMetrics, run_dir: Path) -> list[str]:
    low, high = metrics.yes_share_ci
    return [f"toy-yesno audit of {metrics.model}",
            f"yes share {metrics.yes_share:.3f} [{low:.3f}, {high:.3f}] (n = {metrics.n})"]  # fmt: skip


def study_blocks(study: list[tuple[str, ToyMetrics]]) -> list[str]:
    return [f"{name}: yes share {metrics.yes_share:.3f} (n = {metrics.n})"
            for name, metrics in study]  # fmt: skip
