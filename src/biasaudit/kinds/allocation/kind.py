"""The allocation kind, declared (:class:`biasaudit.kinds.declare.Kind`): each step
imports the module of this folder that does it: resume
screening, essay grading and a task of your own share one ``metrics.json`` shape."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from biasaudit.kinds.allocation import spec
from biasaudit.kinds.allocation.spec import AllocationSpec
from biasaudit.kinds.declare import Kind

if TYPE_CHECKING:
    from biasaudit.kinds._evidence import Evidence
    from biasaudit.kinds._rounds import Growth
    from biasaudit.kinds.allocation.imported import ImportOptions, ImportResult
    from biasaudit.kinds.allocation.metrics_file import AllocationMetrics
    from biasaudit.kinds.allocation.run import AuditResult
    from biasaudit.kinds.allocation.study import StudyResult
    from biasaudit.kinds.common import RunPair, TaskInfo, UnitDecisions
    from biasaudit.metrics import ChangeTest
    from biasaudit.providers import ModelRequest, Provider
    from biasaudit.providers.sim import Responder
    from biasaudit.render.document import Document, Figure, Section
    from biasaudit.render.panels import Compared
    from biasaudit.render.text import Block
    from biasaudit.store.runs import Manifest


class Allocation(Kind):
    """The allocation kind's steps."""

    def task_infos(self) -> tuple[TaskInfo, ...]:
        from biasaudit.kinds.allocation.task import TASK_INFOS

        return TASK_INFOS

    def metrics_model(self) -> type[AllocationMetrics]:
        from biasaudit.kinds.allocation.metrics_file import AllocationMetrics

        return AllocationMetrics

    def figure_rows(self, metrics: AllocationMetrics) -> list[dict[str, Any]]:
        from biasaudit.kinds.allocation.metrics_file import figure_rows

        return figure_rows(metrics)

    def run(
        self,
        spec: AllocationSpec,
        *,
        provider: Provider | None = None,
        stderr: TextIO | None = None,
        command: Sequence[str] | None = None,
    ) -> AuditResult:
        from biasaudit.kinds.allocation.run import run

        return run(spec, provider=provider, stderr=stderr, command=command)

    def plan_requests(self, spec: AllocationSpec, provider: Provider) -> Iterator[ModelRequest]:
        from biasaudit.kinds.allocation.plan import plan_requests

        return plan_requests(spec, provider)

    def run_table(self, metrics: AllocationMetrics, run_dir: Path) -> list[Block]:
        from biasaudit.kinds.allocation.table import run_table

        return run_table(metrics, run_dir)

    def headline(self, metrics: AllocationMetrics) -> str:
        from biasaudit.kinds.allocation.table import headline

        return headline(metrics)

    def run_document(self, run_dir: Path, manifest: Manifest, spec: Mapping[str, Any]) -> Document:
        from biasaudit.kinds.allocation.page import run_document

        return run_document(run_dir, manifest, spec)

    def study(self, run_dirs: Sequence[str | Path], *, ndcg_at: int = 3) -> StudyResult:
        from biasaudit.kinds.allocation.study import run_study

        return run_study(run_dirs, ndcg_at=ndcg_at)

    def study_blocks(self, study: StudyResult) -> list[Block]:
        from biasaudit.kinds.allocation.table import study_blocks

        return study_blocks(study)

    def study_page(self, study: StudyResult) -> tuple[str, list[Section], bool]:
        from biasaudit.kinds.allocation.page import study_page

        return study_page(study)

    def change_tests(self, pair: RunPair) -> list[ChangeTest]:
        from biasaudit.kinds.allocation.changes import change_tests

        return change_tests(pair)

    def compare_figures(
        self, comparison: Compared, names: Mapping[str, str], reference: str, simulated: bool
    ) -> list[Figure]:
        from biasaudit.kinds.allocation.page import compare_figures

        return compare_figures(comparison, names, reference, simulated)

    def plan_power(
        self, spec: AllocationSpec, cost_at: Callable[[Any], tuple[int, float | None]]
    ) -> list[str]:
        from biasaudit.kinds.allocation.power import plan_power

        return plan_power(spec, cost_at)

    def growth(self, spec: AllocationSpec) -> Growth:
        from biasaudit.kinds.allocation.power import growth

        return growth(spec)

    def shown_names(self, spec: AllocationSpec) -> tuple[str, ...]:
        from biasaudit.kinds.allocation.plan import shown_names

        return shown_names(spec)

    def score_options(self) -> type[ImportOptions]:
        from biasaudit.kinds.allocation.imported import ImportOptions

        return ImportOptions

    def score(
        self, path: str | Path, options: ImportOptions, *, command: Sequence[str] | None = None
    ) -> ImportResult:
        from biasaudit.kinds.allocation.imported import score

        return score(path, options, command=command)

    def responder(self) -> Responder:
        from biasaudit.kinds.allocation.sim import RESPONDER

        return RESPONDER

    def evidence(self, run_dir: Path) -> Evidence | None:
        from biasaudit.kinds.allocation.evidence import evidence

        return evidence(run_dir)

    def unit_decisions(self, run_dir: Path) -> UnitDecisions | None:
        from biasaudit.kinds.allocation.evidence import unit_decisions

        return unit_decisions(run_dir)


KIND = Allocation(
    name="allocation", specs=spec.SPECS, commands=("resume-screening", "essay-grading"),
    compared_per="group", scores_file="scores.csv", score_argument="SCORES_FILE",
    score_help=spec.SCORE_HELP, compare_note=" ΔDP and ΔEO in percentage points.",
    figure_names=spec.FIGURE_NAMES, in_points=("dp_gap", "eo_gap"), selects="Candidates",
)  # fmt: skip
