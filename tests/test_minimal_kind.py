"""A kind may leave out the steps that have a sensible default (``kinds/declare.OPTIONAL``):
a minimal kind is eight files (kind, spec, task, plan, run, metrics, report, html),
and every shared caller takes the fallback of a step it lacks (issue: a kind cost
fourteen mandatory files, many near-empty)."""

from __future__ import annotations

from pathlib import Path

import pytest

from biasaudit.errors import UsageError
from biasaudit.kinds.declare import OPTIONAL, STEPS, Kind
from biasaudit.kinds.registry import KINDS, audit_kind
from biasaudit.providers.sim import Responder


def _bare_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Kind:
    """A kind folder holding only its ``kind.py`` (a package name of its own per test:
    Python keeps a package it imported)."""
    name = f"toykind_{tmp_path.name.replace('-', '_')}"
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "kind.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    return Kind(f"{name}.kind", name="toy", specs=(), commands=(), compared_per="group",
                scores_file="x.csv", score_argument="X", score_help="")  # fmt: skip


def test_a_minimal_kind_is_eight_files() -> None:
    required = {module for name, (module, _) in STEPS.items()
                if name not in OPTIONAL and name != "responder"}  # fmt: skip
    assert required | {"kind", "spec"} == {"kind", "spec", "task", "plan", "run", "metrics",
                                           "report", "html"}  # fmt: skip


def test_a_kind_without_its_optional_steps_gets_their_fallbacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind = _bare_kind(tmp_path, monkeypatch)
    for name in STEPS:
        step = getattr(kind, name)
        assert not step.declared(), name
        if name in OPTIONAL or name == "responder":
            step.load()  # a fallback, never an import error
        else:
            with pytest.raises(ModuleNotFoundError, match=f"{step.package}.{step.module}"):
                step.load()
    assert kind.headline({}) == "" and kind.change_tests(1, 2, 3, 4) == []
    assert kind.evidence(tmp_path) is None and kind.power(None, None) == []
    assert kind.growth.load() is None and kind.score_options.load() is None
    answer = kind.responder.load()
    assert isinstance(answer, Responder) and answer.answer(None, None) is None  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="no study"):
        kind.study([tmp_path], ndcg_at=3)


def test_a_missing_module_of_its_own_is_not_mistaken_for_a_left_out_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's module that exists but fails to import (it imports something missing)
    is an error, not a step left out."""
    kind = _bare_kind(tmp_path, monkeypatch)
    (tmp_path / kind.run.package / "power.py").write_text("import no_such_package_here\n")
    with pytest.raises(ModuleNotFoundError, match="no_such_package_here"):
        kind.power.load()


def test_every_shipped_kind_declares_every_step() -> None:
    """The five kinds give every step themselves (the fallbacks are for new kinds)."""
    for name in KINDS:
        kind = audit_kind(name)
        assert all(getattr(kind, step).declared() for step in STEPS), name
