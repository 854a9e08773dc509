"""The decisions kind, declared (:class:`biasaudit.kinds.declare.Kind`): each step
imports the module of this folder that does it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from biasaudit.kinds.decisions.spec import SCORE_HELP, DecisionsSpec
from biasaudit.kinds.declare import Kind

if TYPE_CHECKING:
    from biasaudit.kinds._evidence import Evidence
    from biasaudit.kinds._rounds import Growth
    from biasaudit.kinds.common import RunPair, TaskInfo, UnitDecisions
    from biasaudit.kinds.decisions.imported import DecisionsImportResult, ImportOptions
    from biasaudit.kinds.decisions.metrics_file import DecisionsMetrics
    from biasaudit.kinds.decisions.run import DecisionsResult
    from biasaudit.kinds.decisions.study import DecisionsStudy
    from biasaudit.metrics import ChangeTest
    from biasaudit.providers import ModelRequest, Provider
    from biasaudit.providers.sim import Responder
    from biasaudit.render.document import Document, Figure, Section
    from biasaudit.render.panels import Compared
    from biasaudit.render.text import Block
    from biasaudit.store.runs import Manifest


class Decisions(Kind):
    """The decisions kind's steps."""

    def task_infos(self) -> tuple[TaskInfo, ...]:
        from biasaudit.kinds.decisions.task import TASK_INFOS

        return TASK_INFOS

    def metrics_model(self) -> type[DecisionsMetrics]:
        from biasaudit.kinds.decisions.metrics_file import DecisionsMetrics

        return DecisionsMetrics

    def figure_rows(self, metrics: DecisionsMetrics) -> list[dict[str, Any]]:
        from biasaudit.kinds.decisions.metrics_file import figure_rows

        return figure_rows(metrics)

    def run(
        self,
        spec: DecisionsSpec,
        *,
        provider: Provider | None = None,
        stderr: TextIO | None = None,
        command: Sequence[str] | None = None,
    ) -> DecisionsResult:
        from biasaudit.kinds.decisions.run import run

        return run(spec, provider=provider, stderr=stderr, command=command)

    def plan_requests(self, spec: DecisionsSpec, provider: Provider) -> Iterator[ModelRequest]:
        from biasaudit.kinds.decisions.plan import plan_requests

        return plan_requests(spec, provider)

    def run_table(self, metrics: DecisionsMetrics, run_dir: Path) -> list[Block]:
        from biasaudit.kinds.decisions.table import run_table

        return run_table(metrics, run_dir)

    def headline(self, metrics: DecisionsMetrics) -> str:
        from biasaudit.kinds.decisions.table import headline

        return headline(metrics)

    def run_document(self, run_dir: Path, manifest: Manifest, spec: Mapping[str, Any]) -> Document:
        from biasaudit.kinds.decisions.page import run_document

        return run_document(run_dir, manifest, spec)

    def study(self, run_dirs: Sequence[str | Path], *, ndcg_at: int = 3) -> DecisionsStudy:
        from biasaudit.kinds.decisions.study import run_study

        return run_study(run_dirs, ndcg_at=ndcg_at)

    def study_blocks(self, study: DecisionsStudy) -> list[Block]:
        from biasaudit.kinds.decisions.table import study_blocks

        return study_blocks(study)

    def study_page(self, study: DecisionsStudy) -> tuple[str, list[Section], bool]:
        from biasaudit.kinds.decisions.page import study_page

        return study_page(study)

    def change_tests(self, pair: RunPair) -> list[ChangeTest]:
        from biasaudit.kinds.decisions.changes import change_tests

        return change_tests(pair)

    def compare_figures(
        self, comparison: Compared, names: Mapping[str, str], reference: str, simulated: bool
    ) -> list[Figure]:
        from biasaudit.kinds.decisions.page import compare_figures

        return compare_figures(comparison, names, reference, simulated)

    def plan_power(
        self, spec: DecisionsSpec, cost_at: Callable[[Any], tuple[int, float | None]]
    ) -> list[str]:
        from biasaudit.kinds.decisions.power import plan_power

        return plan_power(spec, cost_at)

    def growth(self, spec: DecisionsSpec) -> Growth:
        from biasaudit.kinds.decisions.power import GROWTH

        return GROWTH

    def shown_names(self, spec: DecisionsSpec) -> tuple[str, ...]:
        from biasaudit.kinds.decisions.plan import shown_names

        return shown_names(spec)

    def score_options(self) -> type[ImportOptions]:
        from biasaudit.kinds.decisions.imported import ImportOptions

        return ImportOptions

    def score(
        self, path: str | Path, options: ImportOptions, *, command: Sequence[str] | None = None
    ) -> DecisionsImportResult:
        from biasaudit.kinds.decisions.imported import score

        return score(path, options, command=command)

    def responder(self) -> Responder:
        from biasaudit.kinds.decisions.sim import RESPONDER

        return RESPONDER

    def evidence(self, run_dir: Path) -> Evidence | None:
        from biasaudit.kinds.decisions.evidence import evidence

        return evidence(run_dir)

    def unit_decisions(self, run_dir: Path) -> UnitDecisions | None:
        from biasaudit.kinds.decisions.evidence import unit_decisions

        return unit_decisions(run_dir)


KIND = Decisions(
    name="decisions", specs=(DecisionsSpec,), commands=("decisions",),
    compared_per="figure", scores_file="persons.csv",
    level_figures=("p_yes", "order_gap"),
    score_argument="OUTPUTS_FILE", score_help=SCORE_HELP,
)  # fmt: skip
