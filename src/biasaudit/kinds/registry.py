"""The three audit kinds behind one call: run a spec, read a run's metrics, print its table.

``biasaudit replay``, ``reaudit`` and ``run --max-cost`` work on any audit;
this module is where they learn which function runs a spec (allocation,
Grade Score, RUTEd) and which table shows its result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import pandas as pd
from pydantic import BaseModel

from biasaudit.errors import UsageError
from biasaudit.kinds.allocation.metrics import AllocationMetrics
from biasaudit.kinds.allocation.tasks import ALLOCATION_TASKS
from biasaudit.kinds.common import TaskInfo
from biasaudit.kinds.grade_score.run import GradeScoreMetrics
from biasaudit.kinds.grade_score.task import TASK_INFO as GRADE_SCORE_TASK
from biasaudit.kinds.ruted.metrics import RutedMetrics
from biasaudit.kinds.ruted.task import TASK_INFO as RUTED_TASK
from biasaudit.providers import ModelRequest, Provider
from biasaudit.spec import AuditSpec, GradeScoreSpec, RutedSpec
from biasaudit.store.runs import Manifest

__all__ = [
    "AUDIT_KINDS",
    "TASKS",
    "FinishedAudit",
    "plan_requests",
    "read_metrics",
    "run_kind",
    "run_spec",
    "table_of",
]

AUDIT_KINDS = ("allocation", "grade-score", "ruted")
TASKS: dict[str, TaskInfo] = {
    **ALLOCATION_TASKS,
    GRADE_SCORE_TASK.name: GRADE_SCORE_TASK,
    RUTED_TASK.name: RUTED_TASK,
}
"""The built-in tasks, as ``biasaudit tasks`` lists them."""
_METRICS: dict[str, type[BaseModel]] = {
    "allocation": AllocationMetrics,
    "grade-score": GradeScoreMetrics,
    "ruted": RutedMetrics,
}


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


def run_kind(spec: AuditSpec) -> str:
    """The manifest kind a run of ``spec`` gets."""
    if isinstance(spec, GradeScoreSpec):
        return "grade-score"
    if isinstance(spec, RutedSpec):
        return "ruted"
    return "allocation"


def run_spec(
    spec: AuditSpec,
    *,
    provider: Provider | None = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
) -> FinishedAudit:
    """Run the audit ``spec`` describes, whatever its kind."""
    if isinstance(spec, GradeScoreSpec):
        from biasaudit.kinds.grade_score.report import grade_score_table
        from biasaudit.kinds.grade_score.run import grade_audit

        graded = grade_audit(spec, provider=provider, stderr=stderr, command=command)
        table = grade_score_table(graded.metrics, graded.items)
        return FinishedAudit("grade-score", graded.run_dir, graded.manifest, graded.metrics, table)
    if isinstance(spec, RutedSpec):
        from biasaudit.kinds.ruted.run import ruted_audit

        ruted = ruted_audit(spec, provider=provider, stderr=stderr, command=command)
        return _finished("ruted", ruted.run_dir, ruted.manifest, ruted.metrics)
    from biasaudit.kinds.allocation.run import audit

    allocated = audit(spec, provider=provider, stderr=stderr, command=command)
    return _finished("allocation", allocated.run_dir, allocated.manifest, allocated.metrics)


def plan_requests(spec: AuditSpec, provider: Provider) -> list[ModelRequest]:
    """The requests a run of ``spec`` would send to ``provider`` (nothing is sent)."""
    if isinstance(spec, GradeScoreSpec):
        from biasaudit.kinds.grade_score.task import build_grade_score_task, plan_grade_score

        return list(plan_grade_score(build_grade_score_task(spec), spec).requests)
    if isinstance(spec, RutedSpec):
        from biasaudit.kinds.ruted.plan import plan_ruted
        from biasaudit.kinds.ruted.task import build_ruted_task

        return list(plan_ruted(build_ruted_task(spec), spec, provider.capabilities).requests)
    from biasaudit.kinds.allocation.scoring import plan_scoring
    from biasaudit.kinds.allocation.tasks import build_task

    allocation = build_task(spec)
    allocation.prompt(spec.method)
    return list(plan_scoring(allocation, spec, provider).requests)


def _finished(kind: str, run_dir: Path, manifest: Manifest, metrics: BaseModel) -> FinishedAudit:
    return FinishedAudit(kind, run_dir, manifest, metrics, table_of(kind, metrics, run_dir))


def read_metrics(run_dir: Path, kind: str) -> Any:
    """The ``metrics.json`` of an audit run, as its pydantic model.

    Raises
    ------
    UsageError
        The run has no metrics (it stopped early) or is not an audit run.
    """
    model = _METRICS.get(kind)
    if model is None:
        raise UsageError(f"{run_dir}: a '{kind}' run has no audit metrics")
    path = run_dir / "metrics.json"
    if not path.is_file():
        raise UsageError(f"{run_dir} has no metrics.json (the run stopped before its metrics)")
    return model.model_validate_json(path.read_text(encoding="utf-8"))


def table_of(kind: str, metrics: BaseModel, run_dir: Path) -> list[str]:
    """The table ``biasaudit run`` prints for a run of this kind."""
    if isinstance(metrics, GradeScoreMetrics):
        from biasaudit.kinds.grade_score.report import grade_score_table

        return grade_score_table(metrics, pd.read_csv(run_dir / "items.csv"))
    if isinstance(metrics, RutedMetrics):
        from biasaudit.kinds.ruted.report import ruted_table

        return ruted_table(metrics)
    from biasaudit.kinds.allocation.report import allocation_table

    assert isinstance(metrics, AllocationMetrics), kind
    return allocation_table(metrics)
