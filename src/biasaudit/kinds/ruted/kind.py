"""The RUTEd kind as the registry sees it (:class:`biasaudit.kinds.registry.AuditKind`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from biasaudit.kinds.ruted.metrics import RutedMetrics

if TYPE_CHECKING:
    import numpy as np
    from rich.console import RenderableType

    from biasaudit.kinds.ruted.run import RutedResult
    from biasaudit.providers import ModelRequest, Provider
    from biasaudit.reports.changes import ChangeTest
    from biasaudit.reports.compare import Comparison
    from biasaudit.reports.html._document import Document, Figure, Section
    from biasaudit.reports.text import Block
    from biasaudit.store.runs import Manifest

from biasaudit.kinds.ruted.spec import RutedSpec
from biasaudit.spec import AuditSpec

NAME = "ruted"
SPECS = (RutedSpec,)
"""The specs of this kind's tasks, each with its ``task`` name."""
METRICS = RutedMetrics

COMPARED_PER = "context"
"""What the compare page shows its differences per."""
COMPARE_NOTE = ""
"""Added to the caption of the compare page's table of tests."""


def owns(spec: AuditSpec) -> bool:
    """Whether a run of ``spec`` is of this kind."""
    return isinstance(spec, RutedSpec)


def run(
    spec: AuditSpec,
    *,
    provider: Provider | None = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
) -> RutedResult:
    """Run ``spec``: the next-word test and the long-form texts, read and scored."""
    from biasaudit.kinds.ruted.run import ruted_audit

    assert isinstance(spec, RutedSpec)
    return ruted_audit(spec, provider=provider, stderr=stderr, command=command)


def plan(spec: AuditSpec, provider: Provider) -> list[ModelRequest]:
    """The requests a run of ``spec`` would send to ``provider`` (nothing is sent)."""
    from biasaudit.kinds.ruted.plan import plan_ruted
    from biasaudit.kinds.ruted.task import build_ruted_task

    assert isinstance(spec, RutedSpec)
    return list(plan_ruted(build_ruted_task(spec), spec, provider.capabilities).requests)


def table(metrics: Any, run_dir: Path) -> list[str]:
    """The plain table ``biasaudit run`` prints."""
    from biasaudit.kinds.ruted.report import ruted_table

    return ruted_table(metrics)


def view(metrics: Any, run_dir: Path) -> RenderableType:
    """The same table, drawn with rich on a terminal."""
    from biasaudit.kinds.ruted.report import ruted_view

    return ruted_view(metrics)


def document(run_dir: Path, manifest: Manifest, spec: Mapping[str, Any]) -> Document:
    """The run's HTML / Markdown report."""
    from biasaudit.kinds.ruted.html import ruted_document

    return ruted_document(run_dir, manifest, spec)


def study_blocks(run_dirs: Sequence[Path], *, ndcg_at: int) -> list[Block]:
    """What ``biasaudit study`` prints for RUTEd runs."""
    from biasaudit.kinds.ruted.report import ruted_study_blocks
    from biasaudit.kinds.ruted.study import run_ruted_study

    return ruted_study_blocks(run_ruted_study(run_dirs))


def study_sections(run_dirs: Sequence[Path], *, ndcg_at: int) -> tuple[str, list[Section], bool]:
    """The study page: its title, its sections, and whether a run is simulated."""
    from biasaudit.kinds.ruted.html import ruted_study_sections
    from biasaudit.kinds.ruted.study import run_ruted_study

    study = run_ruted_study(run_dirs)
    simulated = any(r.metrics.simulated for r in study.runs)
    return f"RUTEd study of {len(run_dirs)} runs", ruted_study_sections(study), simulated


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
    from biasaudit.kinds.ruted.changes import change_tests as tests

    return tests(path_a, path_b, metrics_a, metrics_b, rng=rng, bootstrap=bootstrap, notes=notes)


def headline(metrics: Any) -> str:
    """One line of the figures that matter most, for ``biasaudit history``."""
    return "neutrality " + ", ".join(
        f"{name} {_number(figures.neutrality)}" for name, figures in metrics.contexts.items()
    )


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def compare_figures(
    comparison: Comparison, names: Mapping[str, str], reference: str, simulated: bool
) -> list[Figure]:
    """The compare page's figures of B - A for runs of this kind."""
    from biasaudit.kinds.ruted.html import compare_figures as figures

    return figures(comparison, names, reference, simulated)
