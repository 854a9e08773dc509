"""The Grade Score kind as the registry sees it (:class:`biasaudit.kinds.registry.AuditKind`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import pandas as pd

from biasaudit.kinds.grade_score.run import GradeScoreMetrics

if TYPE_CHECKING:
    import numpy as np
    from rich.console import RenderableType

    from biasaudit.kinds.grade_score.run import GradeScoreResult
    from biasaudit.providers import ModelRequest, Provider
    from biasaudit.reports.changes import ChangeTest
    from biasaudit.reports.compare import Comparison
    from biasaudit.reports.html._document import Document, Figure, Section
    from biasaudit.reports.text import Block
    from biasaudit.store.runs import Manifest

from biasaudit.kinds.grade_score.spec import GradeScoreSpec
from biasaudit.spec import AuditSpec

NAME = "grade-score"
SPECS = (GradeScoreSpec,)
"""The specs of this kind's tasks, each with its ``task`` name."""
METRICS = GradeScoreMetrics

COMPARED_PER = "figure"
"""What the compare page shows its differences per."""
COMPARE_NOTE = ""
"""Added to the caption of the compare page's table of tests."""


def owns(spec: AuditSpec) -> bool:
    """Whether a run of ``spec`` is of this kind."""
    return isinstance(spec, GradeScoreSpec)


def run(
    spec: AuditSpec,
    *,
    provider: Provider | None = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
) -> GradeScoreResult:
    """Run ``spec``: every item in every order, the judge's choices read, the scores."""
    from biasaudit.kinds.grade_score.run import grade_audit

    assert isinstance(spec, GradeScoreSpec)
    return grade_audit(spec, provider=provider, stderr=stderr, command=command)


def plan(spec: AuditSpec, provider: Provider) -> list[ModelRequest]:
    """The requests a run of ``spec`` would send to ``provider`` (nothing is sent)."""
    from biasaudit.kinds.grade_score.task import build_grade_score_task, plan_grade_score

    assert isinstance(spec, GradeScoreSpec)
    return list(plan_grade_score(build_grade_score_task(spec), spec).requests)


def table(metrics: Any, run_dir: Path) -> list[str]:
    """The plain table ``biasaudit run`` prints (it reads the run's ``items.csv``)."""
    from biasaudit.kinds.grade_score.report import grade_score_table

    return grade_score_table(metrics, pd.read_csv(run_dir / "items.csv"))


def view(metrics: Any, run_dir: Path) -> RenderableType:
    """The same table, drawn with rich on a terminal."""
    from biasaudit.kinds.grade_score.report import grade_score_view

    return grade_score_view(metrics, pd.read_csv(run_dir / "items.csv"))


def document(run_dir: Path, manifest: Manifest, spec: Mapping[str, Any]) -> Document:
    """The run's HTML / Markdown report."""
    from biasaudit.kinds.grade_score.html import grade_document

    return grade_document(run_dir, manifest, spec)


def study_blocks(run_dirs: Sequence[Path], *, ndcg_at: int) -> list[Block]:
    """What ``biasaudit study`` prints for Grade Score runs."""
    from biasaudit.kinds.grade_score.report import grade_study_blocks
    from biasaudit.kinds.grade_score.study import run_grade_study

    return grade_study_blocks(run_grade_study(run_dirs))


def study_sections(run_dirs: Sequence[Path], *, ndcg_at: int) -> tuple[str, list[Section], bool]:
    """The study page: its title, its sections, and whether a run is simulated."""
    from biasaudit.kinds.grade_score.html import grade_study_sections
    from biasaudit.kinds.grade_score.study import run_grade_study

    study = run_grade_study(run_dirs)
    simulated = any(r.metrics.simulated for r in study.runs)
    return f"Grade Score study of {len(run_dirs)} runs", grade_study_sections(study), simulated


def change_tests(
    path_a: Path,
    path_b: Path,
    metrics_a: Any,
    metrics_b: Any,
    *,
    rng: np.random.Generator,
    bootstrap: int,
    notes: list[str],
) -> list[ChangeTest]:
    """The tests of "no change" ``biasaudit compare`` adjusts and reports."""
    from biasaudit.kinds.grade_score.changes import change_tests as tests

    return tests(path_a, path_b, metrics_a, metrics_b, rng=rng, bootstrap=bootstrap, notes=notes)


def headline(metrics: Any) -> str:
    """One line of the figures that matter most, for ``biasaudit history``."""
    return f"Grade Score {_number(metrics.grade_score)}, entropy {_number(metrics.entropy)}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def compare_figures(
    comparison: Comparison, names: Mapping[str, str], reference: str, simulated: bool
) -> list[Figure]:
    """The compare page's figures of B - A for runs of this kind."""
    from biasaudit.kinds.grade_score.html import compare_figures as figures

    return figures(comparison, names, reference, simulated)
