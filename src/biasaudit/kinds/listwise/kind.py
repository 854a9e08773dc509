"""The listwise kind, declared (:class:`biasaudit.kinds.declare.Kind`): each step
imports the module of this folder that does it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from biasaudit.kinds.declare import Kind
from biasaudit.kinds.listwise.spec import (
    FIGURE_NAMES,
    SCORE_HELP,
    ListwiseEssaySpec,
    ListwiseResumeSpec,
    ListwiseSpec,
    ListwiseTaskSpec,
)

if TYPE_CHECKING:
    from biasaudit.kinds._evidence import Evidence
    from biasaudit.kinds._rounds import Growth
    from biasaudit.kinds.common import RunPair, TaskInfo, UnitDecisions
    from biasaudit.kinds.listwise.imported import ImportOptions, ListwiseImportResult
    from biasaudit.kinds.listwise.metrics_file import ListwiseMetrics
    from biasaudit.kinds.listwise.run import ListwiseResult
    from biasaudit.kinds.listwise.study import ListwiseStudy
    from biasaudit.metrics import ChangeTest
    from biasaudit.providers import ModelRequest, Provider
    from biasaudit.providers.sim import Responder
    from biasaudit.render.document import Document, Figure, Section
    from biasaudit.render.panels import Compared
    from biasaudit.render.text import Block
    from biasaudit.store.runs import Manifest


class Listwise(Kind):
    """The listwise kind's steps."""

    def task_infos(self) -> tuple[TaskInfo, ...]:
        from biasaudit.kinds.listwise.task import TASK_INFOS

        return TASK_INFOS

    def metrics_model(self) -> type[ListwiseMetrics]:
        from biasaudit.kinds.listwise.metrics_file import ListwiseMetrics

        return ListwiseMetrics

    def figure_rows(self, metrics: ListwiseMetrics) -> list[dict[str, Any]]:
        from biasaudit.kinds.listwise.metrics_file import figure_rows

        return figure_rows(metrics)

    def run(
        self,
        spec: ListwiseSpec,
        *,
        provider: Provider | None = None,
        stderr: TextIO | None = None,
        command: Sequence[str] | None = None,
    ) -> ListwiseResult:
        from biasaudit.kinds.listwise.run import run

        return run(spec, provider=provider, stderr=stderr, command=command)

    def plan_requests(self, spec: ListwiseSpec, provider: Provider) -> Iterator[ModelRequest]:
        from biasaudit.kinds.listwise.plan import plan_requests

        return plan_requests(spec, provider)

    def run_table(self, metrics: ListwiseMetrics, run_dir: Path) -> list[Block]:
        from biasaudit.kinds.listwise.table import run_table

        return run_table(metrics, run_dir)

    def headline(self, metrics: ListwiseMetrics) -> str:
        from biasaudit.kinds.listwise.table import headline

        return headline(metrics)

    def run_document(self, run_dir: Path, manifest: Manifest, spec: Mapping[str, Any]) -> Document:
        from biasaudit.kinds.listwise.page import run_document

        return run_document(run_dir, manifest, spec)

    def study(self, run_dirs: Sequence[str | Path], *, ndcg_at: int = 3) -> ListwiseStudy:
        from biasaudit.kinds.listwise.study import run_study

        return run_study(run_dirs, ndcg_at=ndcg_at)

    def study_blocks(self, study: ListwiseStudy) -> list[Block]:
        from biasaudit.kinds.listwise.table import study_blocks

        return study_blocks(study)

    def study_page(self, study: ListwiseStudy) -> tuple[str, list[Section], bool]:
        from biasaudit.kinds.listwise.page import study_page

        return study_page(study)

    def change_tests(self, pair: RunPair) -> list[ChangeTest]:
        from biasaudit.kinds.listwise.changes import change_tests

        return change_tests(pair)

    def compare_figures(
        self, comparison: Compared, names: Mapping[str, str], reference: str, simulated: bool
    ) -> list[Figure]:
        from biasaudit.kinds.listwise.page import compare_figures

        return compare_figures(comparison, names, reference, simulated)

    def plan_power(
        self, spec: ListwiseSpec, cost_at: Callable[[Any], tuple[int, float | None]]
    ) -> list[str]:
        from biasaudit.kinds.listwise.power import plan_power

        return plan_power(spec, cost_at)

    def growth(self, spec: ListwiseSpec) -> Growth:
        from biasaudit.kinds.listwise.power import GROWTH

        return GROWTH

    def shown_names(self, spec: ListwiseSpec) -> tuple[str, ...]:
        from biasaudit.kinds.listwise.plan import shown_names

        return shown_names(spec)

    def score_options(self) -> type[ImportOptions]:
        from biasaudit.kinds.listwise.imported import ImportOptions

        return ImportOptions

    def score(
        self, path: str | Path, options: ImportOptions, *, command: Sequence[str] | None = None
    ) -> ListwiseImportResult:
        from biasaudit.kinds.listwise.imported import score

        return score(path, options, command=command)

    def responder(self) -> Responder:
        from biasaudit.kinds.listwise.sim import RESPONDER

        return RESPONDER

    def evidence(self, run_dir: Path) -> Evidence | None:
        from biasaudit.kinds.listwise.evidence import evidence

        return evidence(run_dir)

    def unit_decisions(self, run_dir: Path) -> UnitDecisions | None:
        from biasaudit.kinds.listwise.evidence import unit_decisions

        return unit_decisions(run_dir)


KIND = Listwise(
    name="listwise",
    specs=(ListwiseResumeSpec, ListwiseEssaySpec, ListwiseTaskSpec), commands=(),
    compared_per="group", scores_file="shown.csv",
    level_figures=("first choice",),
    score_argument="RANKINGS_FILE", score_help=SCORE_HELP,
    figure_names=FIGURE_NAMES,
    in_points=("dp_gap", "first choice"), selects="Appearances in the answers",
)  # fmt: skip
