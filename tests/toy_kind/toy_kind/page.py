"""The toy run's report page."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from biasaudit.kinds.kit import Document, Manifest, Paragraph, Section, read_run_metrics
from toy_kind.metrics_file import ToyMetrics
from toy_kind.table import run_table


def run_document(run_dir: Path, manifest: Manifest, spec: Mapping[str, Any]) -> Document:
    metrics = read_run_metrics(run_dir, ToyMetrics)
    document = Document(f"Toy audit of {metrics.model}", f"run {manifest.run_id}",
                        metrics.simulated)  # fmt: skip
    lines = run_table(metrics, run_dir)
    document.sections = [Section("Headline", "headline", [Paragraph(lines[1], strong=True)])]
    return document


def study_page(study: list[tuple[str, ToyMetrics]]) -> tuple[str, list[Section], bool]:
    lines = [f"{name}: yes share {m.yes_share:.3f} (n = {m.n})" for name, m in study]
    sections = [Section("Runs", "runs", [Paragraph(line) for line in lines])]
    return "Toy study", sections, all(m.simulated for _, m in study)
