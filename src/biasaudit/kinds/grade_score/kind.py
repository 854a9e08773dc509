"""The Grade Score kind, declared (:class:`biasaudit.kinds.declare.Kind`): each step
imports the module of this folder that does it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from biasaudit.kinds.declare import Kind
from biasaudit.kinds.grade_score.spec import FIGURE_NAMES, SCORE_HELP, GradeScoreSpec

if TYPE_CHECKING:
    from biasaudit.kinds._evidence import Evidence
    from biasaudit.kinds._rounds import Growth
    from biasaudit.kinds.common import RunPair, TaskInfo
    from biasaudit.kinds.grade_score.imported import GradeImportResult, ImportOptions
    from biasaudit.kinds.grade_score.metrics_file import GradeScoreMetrics
    from biasaudit.kinds.grade_score.run import GradeScoreResult
    from biasaudit.kinds.grade_score.study import GradeStudyResult
    from biasaudit.metrics import ChangeTest
    from biasaudit.providers import ModelRequest, Provider
    from biasaudit.providers.sim import Responder
    from biasaudit.render.document import Document, Figure, Section
    from biasaudit.render.panels import Compared
    from biasaudit.render.text import Block
    from biasaudit.store.runs import Manifest


class GradeScore(Kind):
    """The Grade Score kind's steps."""

    def task_infos(self) -> tuple[TaskInfo, ...]:
        from biasaudit.kinds.grade_score.task import TASK_INFOS

        return TASK_INFOS

    def metrics_model(self) -> type[GradeScoreMetrics]:
        from biasaudit.kinds.grade_score.metrics_file import GradeScoreMetrics

        return GradeScoreMetrics

    def figure_rows(self, metrics: GradeScoreMetrics) -> list[dict[str, Any]]:
        from biasaudit.kinds.grade_score.metrics_file import figure_rows

        return figure_rows(metrics)

    def run(
        self,
        spec: GradeScoreSpec,
        *,
        provider: Provider | None = None,
        stderr: TextIO | None = None,
        command: Sequence[str] | None = None,
    ) -> GradeScoreResult:
        from biasaudit.kinds.grade_score.run import run

        return run(spec, provider=provider, stderr=stderr, command=command)

    def plan_requests(self, spec: GradeScoreSpec, provider: Provider) -> Iterator[ModelRequest]:
        from biasaudit.kinds.grade_score.plan import plan_requests

        return plan_requests(spec, provider)

    def run_table(self, metrics: GradeScoreMetrics, run_dir: Path) -> list[Block]:
        from biasaudit.kinds.grade_score.table import run_table

        return run_table(metrics, run_dir)

    def headline(self, metrics: GradeScoreMetrics) -> str:
        from biasaudit.kinds.grade_score.table import headline

        return headline(metrics)

    def run_document(self, run_dir: Path, manifest: Manifest, spec: Mapping[str, Any]) -> Document:
        from biasaudit.kinds.grade_score.page import run_document

        return run_document(run_dir, manifest, spec)

    def study(self, run_dirs: Sequence[str | Path], *, ndcg_at: int = 3) -> GradeStudyResult:
        from biasaudit.kinds.grade_score.study import run_study

        return run_study(run_dirs, ndcg_at=ndcg_at)

    def study_blocks(self, study: GradeStudyResult) -> list[Block]:
        from biasaudit.kinds.grade_score.table import study_blocks

        return study_blocks(study)

    def study_page(self, study: GradeStudyResult) -> tuple[str, list[Section], bool]:
        from biasaudit.kinds.grade_score.page import study_page

        return study_page(study)

    def change_tests(self, pair: RunPair) -> list[ChangeTest]:
        from biasaudit.kinds.grade_score.changes import change_tests

        return change_tests(pair)

    def compare_figures(
        self, comparison: Compared, names: Mapping[str, str], reference: str, simulated: bool
    ) -> list[Figure]:
        from biasaudit.kinds.grade_score.page import compare_figures

        return compare_figures(comparison, names, reference, simulated)

    def plan_power(
        self, spec: GradeScoreSpec, cost_at: Callable[[Any], tuple[int, float | None]]
    ) -> list[str]:
        from biasaudit.kinds.grade_score.power import plan_power

        return plan_power(spec, cost_at)

    def growth(self, spec: GradeScoreSpec) -> Growth:
        from biasaudit.kinds.grade_score.power import GROWTH

        return GROWTH

    def score_options(self) -> type[ImportOptions]:
        from biasaudit.kinds.grade_score.imported import ImportOptions

        return ImportOptions

    def score(
        self, path: str | Path, options: ImportOptions, *, command: Sequence[str] | None = None
    ) -> GradeImportResult:
        from biasaudit.kinds.grade_score.imported import score

        return score(path, options, command=command)

    def responder(self) -> Responder:
        from biasaudit.kinds.grade_score.sim import RESPONDER

        return RESPONDER

    def evidence(self, run_dir: Path) -> Evidence | None:
        from biasaudit.kinds.grade_score.evidence import evidence

        return evidence(run_dir)


KIND = GradeScore(
    name="grade-score", specs=(GradeScoreSpec,), commands=("grade-score",),
    compared_per="figure", scores_file="items.csv",
    score_argument="TRIALS_FILE", score_help=SCORE_HELP,
    figure_names=FIGURE_NAMES,
    fair_values={name: 1.0 for name in FIGURE_NAMES},
)  # fmt: skip
