"""The audit kinds behind one call: run a spec, plan it, read a run's metrics, print
its table, draw it, write its report.

:data:`KINDS` maps each manifest kind to the module that describes it, one line a
kind; every such module follows :class:`AuditKind`. ``biasaudit run``,
``replay``, ``reaudit``, ``report`` and ``run --max-cost`` reach a kind only
through here, so a new kind is a folder under ``kinds/`` with its ``kind.py``,
and one line below.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO, cast

from pydantic import BaseModel

from biasaudit.errors import UsageError
from biasaudit.kinds.allocation.tasks import ALLOCATION_TASKS
from biasaudit.kinds.common import TaskInfo, read_run_metrics
from biasaudit.kinds.grade_score.task import TASK_INFO as GRADE_SCORE_TASK
from biasaudit.kinds.ruted.task import TASK_INFO as RUTED_TASK
from biasaudit.providers import ModelRequest, Provider
from biasaudit.spec import AuditSpec
from biasaudit.store.runs import Manifest

if TYPE_CHECKING:
    import numpy as np
    from rich.console import RenderableType

    from biasaudit.reports.changes import ChangeTest
    from biasaudit.reports.compare import Comparison
    from biasaudit.reports.html._document import Document, Figure, Section
    from biasaudit.reports.text import Block

__all__ = [
    "AUDIT_KINDS",
    "KINDS",
    "SPECS",
    "TASKS",
    "TASK_NAMES",
    "AuditKind",
    "FinishedAudit",
    "audit_kind",
    "kind_of_spec",
    "kind_of_spec_class",
    "plan_requests",
    "read_metrics",
    "run_kind",
    "run_spec",
    "study_kind",
    "table_of",
]

KINDS: dict[str, str] = {
    "allocation": "biasaudit.kinds.allocation.kind",
    "grade-score": "biasaudit.kinds.grade_score.kind",
    "ruted": "biasaudit.kinds.ruted.kind",
}
"""Each audit kind (the manifest's ``kind``) and the module that describes it."""
AUDIT_KINDS = tuple(KINDS)


def _specs() -> dict[str, type[AuditSpec]]:
    found: dict[str, type[AuditSpec]] = {}
    for module in KINDS.values():
        for spec_class in importlib.import_module(module).SPECS:
            found[spec_class.model_fields["task"].default] = spec_class
    return found


SPECS: dict[str, type[AuditSpec]] = _specs()
"""Each task's spec class, by the ``task`` a spec names."""
TASK_NAMES = tuple(SPECS)
TASKS: dict[str, TaskInfo] = {
    **ALLOCATION_TASKS,
    GRADE_SCORE_TASK.name: GRADE_SCORE_TASK,
    RUTED_TASK.name: RUTED_TASK,
}
"""The built-in tasks, as ``biasaudit tasks`` lists them."""


class _Ran(Protocol):
    run_dir: Path
    manifest: Manifest
    metrics: Any


class AuditKind(Protocol):
    """What a kind's ``kind.py`` defines (see ``kinds/allocation/kind.py``)."""

    NAME: str
    SPECS: tuple[type[AuditSpec], ...]
    METRICS: type[BaseModel]
    COMPARED_PER: str
    COMPARE_NOTE: str

    def owns(self, spec: AuditSpec) -> bool:
        """Whether a run of ``spec`` is of this kind."""

    def run(
        self,
        spec: AuditSpec,
        *,
        provider: Provider | None = None,
        stderr: TextIO | None = None,
        command: Sequence[str] | None = None,
    ) -> _Ran:
        """Run ``spec`` into a run directory."""

    def plan(self, spec: AuditSpec, provider: Provider) -> list[ModelRequest]:
        """The requests a run would send (nothing is sent)."""

    def table(self, metrics: Any, run_dir: Path) -> list[str]:
        """The plain table ``biasaudit run`` prints."""

    def view(self, metrics: Any, run_dir: Path) -> RenderableType:
        """The same table, drawn with rich."""

    def document(self, run_dir: Path, manifest: Manifest, spec: Mapping[str, Any]) -> Document:
        """The run's report."""

    def change_tests(
        self,
        path_a: Path,
        path_b: Path,
        metrics_a: Any,
        metrics_b: Any,
        *,
        rng: np.random.Generator,
        bootstrap: int,
        notes: list[str],
    ) -> list[ChangeTest]:
        """The tests of "no change" of ``biasaudit compare``, B - A."""

    def compare_figures(
        self, comparison: Comparison, names: Mapping[str, str], reference: str, simulated: bool
    ) -> list[Figure]:
        """The compare page's figures of B - A."""

    def headline(self, metrics: Any) -> str:
        """One line of the figures that matter most (``biasaudit history``)."""

    def study_blocks(self, run_dirs: Sequence[Path], *, ndcg_at: int) -> list[Block]:
        """What ``biasaudit study`` prints for runs of this kind."""

    def study_sections(
        self, run_dirs: Sequence[Path], *, ndcg_at: int
    ) -> tuple[str, list[Section], bool]:
        """The study page: its title, its sections, and whether a run is simulated."""


def audit_kind(name: str) -> AuditKind:
    """The kind a manifest names.

    Raises
    ------
    UsageError
        No such audit kind (a fan-out run, say).
    """
    module = KINDS.get(name)
    if module is None:
        raise UsageError(f"'{name}' is not an audit kind ({', '.join(KINDS)})")
    return cast(AuditKind, importlib.import_module(module))


def kind_of_spec_class(spec_class: type[AuditSpec]) -> str:
    """The audit kind whose tasks ``spec_class`` describes."""
    for name, module in KINDS.items():
        if spec_class in importlib.import_module(module).SPECS:
            return name
    raise UsageError(f"no audit kind has the spec {spec_class.__name__}")


def kind_of_spec(spec: AuditSpec) -> AuditKind:
    """The kind a run of ``spec`` is."""
    for name in KINDS:
        kind = audit_kind(name)
        if kind.owns(spec):
            return kind
    raise UsageError(f"no audit kind runs a {type(spec).__name__}")


@dataclass(frozen=True)
class FinishedAudit:
    """A finished audit of any kind: its run, manifest, metrics and printed table."""

    kind: str
    run_dir: Path
    manifest: Manifest
    metrics: BaseModel
    table: list[str]

    @property
    def exit_code(self) -> int:
        """0 when every request got an answer, 1 when some did not."""
        counts = self.manifest.counts
        return 0 if self.manifest.status == "completed" and counts.failures == 0 else 1


def study_kind(run_dirs: Sequence[str | Path]) -> str:
    """The kind of run the folders hold (their manifest's ``kind``), e.g. ``grade-score``.

    A folder without a readable manifest counts as an allocation run, and the
    allocation study says what is wrong with it.

    Raises
    ------
    UsageError
        The folders hold runs of different kinds.
    """
    from biasaudit.store.runs import read_manifest

    kinds: dict[str, str] = {}
    for path in run_dirs:
        try:
            kind = read_manifest(path).kind
        except UsageError:
            kind = "allocation"
        kinds.setdefault(kind, str(path))
    if len(kinds) > 1:
        found = "; ".join(f"{path} is a {kind} run" for kind, path in kinds.items())
        raise UsageError(f"a study compares runs of one kind: {found}")
    return next(iter(kinds), "allocation")


def run_kind(spec: AuditSpec) -> str:
    """The manifest kind a run of ``spec`` gets."""
    return kind_of_spec(spec).NAME


def run_spec(
    spec: AuditSpec,
    *,
    provider: Provider | None = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
) -> FinishedAudit:
    """Run the audit ``spec`` describes, whatever its kind."""
    kind = kind_of_spec(spec)
    ran = kind.run(spec, provider=provider, stderr=stderr, command=command)
    table = kind.table(ran.metrics, ran.run_dir)
    return FinishedAudit(kind.NAME, ran.run_dir, ran.manifest, ran.metrics, table)


def plan_requests(spec: AuditSpec, provider: Provider) -> list[ModelRequest]:
    """The requests a run of ``spec`` would send to ``provider`` (nothing is sent)."""
    return kind_of_spec(spec).plan(spec, provider)


def read_metrics(run_dir: Path, kind: str) -> Any:
    """The ``metrics.json`` of an audit run, as its pydantic model.

    Raises
    ------
    UsageError
        The run has no metrics (it stopped early) or is not an audit run.
    """
    if kind not in KINDS:
        raise UsageError(f"{run_dir}: a '{kind}' run has no audit metrics")
    return read_run_metrics(run_dir, audit_kind(kind).METRICS)


def table_of(kind: str, metrics: BaseModel, run_dir: Path) -> list[str]:
    """The table ``biasaudit run`` prints for a run of this kind."""
    return audit_kind(kind).table(metrics, run_dir)
