"""The toy kind, declared: its steps, each importing the module that does it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from biasaudit.kinds.kit import Kind
from toy_kind.spec import ToySpec

if TYPE_CHECKING:
    from biasaudit.kinds.kit import Document, ModelRequest, Provider, Section, TaskInfo
    from toy_kind.metrics_file import ToyMetrics
    from toy_kind.run import ToyResult


class Toy(Kind):
    def task_infos(self) -> tuple[TaskInfo, ...]:
        from toy_kind.task import TASK_INFOS

        return TASK_INFOS

    def metrics_model(self) -> type[ToyMetrics]:
        from toy_kind.metrics_file import ToyMetrics

        return ToyMetrics

    def figure_rows(self, metrics: ToyMetrics) -> list[dict[str, Any]]:
        from toy_kind.metrics_file import figure_rows

        return figure_rows(metrics)

    def run(self, spec: ToySpec, *, provider: Provider | None = None,
            stderr: TextIO | None = None, command: Sequence[str] | None = None) -> ToyResult:  # fmt: skip
        from toy_kind.run import run

        return run(spec, provider=provider, stderr=stderr, command=command)

    def plan_requests(self, spec: ToySpec, provider: Provider) -> Iterator[ModelRequest]:
        from toy_kind.plan import plan_requests

        return plan_requests(spec, provider)

    def run_table(self, metrics: ToyMetrics, run_dir: Path) -> list[Any]:
        from toy_kind.table import run_table

        return list(run_table(metrics, run_dir))

    def run_document(self, run_dir: Path, manifest: Any, spec: Mapping[str, Any]) -> Document:
        from toy_kind.page import run_document

        return run_document(run_dir, manifest, spec)

    def study(self, run_dirs: Sequence[str | Path], *, ndcg_at: int = 3) -> Any:
        from toy_kind.study import run_study

        return run_study(run_dirs, ndcg_at=ndcg_at)

    def study_blocks(self, study: Any) -> list[Any]:
        from toy_kind.table import study_blocks

        return list(study_blocks(study))

    def study_page(self, study: Any) -> tuple[str, list[Section], bool]:
        from toy_kind.page import study_page

        return study_page(study)


KIND = Toy(
    name="toy", specs=(ToySpec,), commands=("toy-yesno",), compared_per="figure",
    scores_file="answers.csv", score_argument="FILE", score_help="",
)  # fmt: skip
