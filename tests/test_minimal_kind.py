"""A kind may leave out the steps that have a sensible default (``kinds/declare.OPTIONAL``):
a minimal kind gives seven steps from six modules (task, metrics_file, run, plan, table,
page) beside its kind.py and spec.py, eight files, and every shared caller takes the
default of a step it lacks (issue: a kind cost fourteen mandatory files, many
near-empty)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from biasaudit.errors import UsageError
from biasaudit.kinds.declare import OPTIONAL, Kind
from biasaudit.kinds.registry import KINDS, audit_kind
from tests.test_layout import NOTHING_TO_GIVE


class _Bare(Kind):
    """The seven steps every kind gives, and nothing else."""

    def task_infos(self) -> tuple[Any, ...]:
        return ()

    def metrics_model(self) -> Any:
        return dict

    def figure_rows(self, metrics: Any) -> list[dict[str, Any]]:
        return []

    def run(
        self, spec: Any, *, provider: Any = None, stderr: Any = None, command: Any = None
    ) -> Any:
        raise NotImplementedError

    def plan_requests(self, spec: Any, provider: Any) -> Iterator[Any]:
        return iter(())

    def run_table(self, metrics: Any, run_dir: Path) -> list[Any]:
        return []

    def run_document(self, run_dir: Path, manifest: Any, spec: Mapping[str, Any]) -> Any:
        raise NotImplementedError


def _bare() -> Kind:
    return _Bare(name="toy", specs=(), commands=(), compared_per="group", scores_file="x.csv",
                 score_argument="X", score_help="")  # fmt: skip


def test_a_minimal_kind_gives_seven_steps() -> None:
    assert Kind.__abstractmethods__ == {
        "task_infos", "metrics_model", "figure_rows", "run", "plan_requests", "run_table",
        "run_document",
    }  # fmt: skip
    assert set(OPTIONAL).isdisjoint(Kind.__abstractmethods__)


def test_a_kind_lacking_a_required_step_is_refused_when_declared() -> None:
    class Half(Kind):
        def task_infos(self) -> tuple[Any, ...]:
            return ()

    with pytest.raises(TypeError, match="abstract"):
        Half(name="half", specs=(), commands=(), compared_per="group",  # type: ignore[abstract]
             scores_file="x.csv", score_argument="X", score_help="")  # fmt: skip


def test_a_kind_without_its_optional_steps_gets_their_defaults(tmp_path: Path) -> None:
    kind = _bare()
    assert not any(kind.declares(step) for step in OPTIONAL)
    assert kind.headline({}) == ""
    from biasaudit.kinds.common import RunPair

    pair = RunPair(tmp_path, tmp_path, 3, 4, None, 0, [])  # type: ignore[arg-type]
    assert kind.change_tests(pair) == []
    assert kind.compare_figures(None, {}, "", False) == []  # type: ignore[arg-type]
    assert kind.evidence(tmp_path) is None and kind.plan_power(None, lambda s: (0, None)) == []
    assert kind.growth(None) is None and kind.score_options() is None
    assert kind.responder() is None  # the sim answers with its own shapes
    assert kind.shown_names(None) == () and kind.unit_decisions(tmp_path) is None
    for refused in (lambda: kind.study([tmp_path]), lambda: kind.study_blocks(None),
                    lambda: kind.study_page(None), lambda: kind.score(tmp_path, None)):  # fmt: skip
        with pytest.raises(UsageError, match="this kind of audit has no"):
            refused()


def test_a_kind_that_does_not_run_in_rounds_says_so() -> None:
    from biasaudit.kinds._rounds import growth_for

    with pytest.raises(UsageError, match="does not run in rounds"):
        growth_for(_bare(), None)


def test_every_shipped_kind_declares_every_step() -> None:
    """The five kinds give every step themselves (the defaults are for new kinds)."""
    for name in KINDS:
        kind = audit_kind(name)
        if type(kind).__module__.startswith("biasaudit."):
            missing = {step for step in OPTIONAL if not kind.declares(step)}
            assert missing <= set(NOTHING_TO_GIVE.get(name, ())), name
