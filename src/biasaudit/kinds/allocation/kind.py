"""The allocation kind as the registry sees it (:class:`biasaudit.kinds.registry.AuditKind`).

Resume screening, essay grading and a task of your own are one kind: their
runs share the manifest kind ``allocation``, one ``metrics.json`` shape, one
table and one report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from biasaudit.kinds.allocation.metrics import AllocationMetrics

if TYPE_CHECKING:
    import numpy as np
    from rich.console import RenderableType

    from biasaudit.kinds.allocation.run import AuditResult
    from biasaudit.providers import ModelRequest, Provider
    from biasaudit.reports.changes import ChangeTest
    from biasaudit.reports.compare import Comparison
    from biasaudit.reports.html._document import Document, Figure, Section
    from biasaudit.reports.text import Block
    from biasaudit.store.runs import Manifest

from biasaudit.kinds.allocation.spec import (
    AllocationSpec,
    AllocationTaskSpec,
    EssayGradingSpec,
    ResumeScreeningSpec,
)
from biasaudit.spec import AuditSpec

NAME = "allocation"
SPECS = (ResumeScreeningSpec, EssayGradingSpec, AllocationTaskSpec)
"""The specs of this kind's tasks, each with its ``task`` name."""
METRICS = AllocationMetrics

COMPARED_PER = "group"
"""What the compare page shows its differences per."""
COMPARE_NOTE = " ΔDP and ΔEO in percentage points."
"""Added to the caption of the compare page's table of tests."""


def owns(spec: AuditSpec) -> bool:
    """Whether a run of ``spec`` is of this kind."""
    return isinstance(spec, AllocationSpec)


def run(
    spec: AuditSpec,
    *,
    provider: Provider | None = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
) -> AuditResult:
    """Run ``spec``: task, scoring plan, engine, figures, run directory."""
    from biasaudit.kinds.allocation.run import audit

    assert isinstance(spec, AllocationSpec)
    return audit(spec, provider=provider, stderr=stderr, command=command)


def plan(spec: AuditSpec, provider: Provider) -> list[ModelRequest]:
    """The requests a run of ``spec`` would send to ``provider`` (nothing is sent)."""
    from biasaudit.kinds.allocation.scoring import plan_scoring
    from biasaudit.kinds.allocation.tasks import build_task

    assert isinstance(spec, AllocationSpec)
    task = build_task(spec)
    task.prompt(spec.method)
    return list(plan_scoring(task, spec, provider).requests)


def table(metrics: Any, run_dir: Path) -> list[str]:
    """The plain table ``biasaudit run`` prints."""
    from biasaudit.kinds.allocation.report import allocation_table

    return allocation_table(metrics)


def view(metrics: Any, run_dir: Path) -> RenderableType:
    """The same table, drawn with rich on a terminal."""
    from biasaudit.kinds.allocation.report import allocation_view

    return allocation_view(metrics)


def document(run_dir: Path, manifest: Manifest, spec: Mapping[str, Any]) -> Document:
    """The run's HTML / Markdown report."""
    from biasaudit.kinds.allocation.html import allocation_document

    return allocation_document(run_dir, manifest, spec)


def study_blocks(run_dirs: Sequence[Path], *, ndcg_at: int) -> list[Block]:
    """What ``biasaudit study`` prints for allocation runs."""
    from biasaudit.kinds.allocation.report import study_blocks as blocks
    from biasaudit.kinds.allocation.study import run_study

    return blocks(run_study(run_dirs, ndcg_at=ndcg_at))


def study_sections(run_dirs: Sequence[Path], *, ndcg_at: int) -> tuple[str, list[Section], bool]:
    """The study page: its title, its sections, and whether a run is simulated."""
    from biasaudit.kinds.allocation.html import allocation_study_sections
    from biasaudit.kinds.allocation.study import run_study

    study = run_study(run_dirs, ndcg_at=ndcg_at)
    simulated = any(r.metrics.simulated for r in study.runs)
    title = f"Allocation study of {len(run_dirs)} runs"
    return title, allocation_study_sections(study, ndcg_at), simulated


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
    from biasaudit.kinds.allocation.changes import change_tests as tests

    return tests(path_a, path_b, metrics_a, metrics_b, rng=rng, bootstrap=bootstrap, notes=notes)


def headline(metrics: Any) -> str:
    """One line of the figures that matter most, for ``biasaudit history``."""
    rabbis = {g: f.rabbi for g, f in metrics.groups.items() if f.rabbi is not None}
    if not rabbis:
        return "(no RABBI)"
    worst = min(rabbis, key=lambda g: rabbis[g])
    p_value = metrics.groups[worst].rabbi_p
    shown = "-" if p_value is None else f"{p_value:.2g}"
    return f"lowest RABBI {worst} {rabbis[worst]:+.3f} (p {shown})"


def compare_figures(
    comparison: Comparison, names: Mapping[str, str], reference: str, simulated: bool
) -> list[Figure]:
    """The compare page's figures of B - A for runs of this kind."""
    from biasaudit.kinds.allocation.html import compare_figures as figures

    return figures(comparison, names, reference, simulated)
