"""Shared code asks a kind for a capability, never for its name: the Local Law 144
summary reads runs of kinds that declare selection rates (``Kind.selects``), and the
help texts list what the kinds declare (issue: reports/ll144 and the CLI named
allocation and listwise, and ``run --help`` listed the tasks by hand)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.kinds.registry import TASKS, selecting_audit_in_words, selecting_kinds


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), terminal_width=200)
    return result.exit_code, result.output


def test_the_selecting_kinds_are_declared_and_named_from_the_declaration() -> None:
    assert selecting_kinds() == {"allocation": "Candidates",
                                 "listwise": "Appearances in the answers"}  # fmt: skip
    assert selecting_audit_in_words() == "an allocation or listwise audit"
    code, out = _invoke("ll144", "--help")
    assert code == 0 and "allocation or listwise audit" in " ".join(out.split())


def test_a_run_of_a_kind_without_selection_rates_is_refused_naming_those_that_have_them(
    tmp_path: Path,
) -> None:
    code, out = _invoke("run", "grade-score", "--items", "demo", "--model", "sim/biased",
                        "--runs-dir", str(tmp_path), "--no-report")  # fmt: skip
    run_dir = out.rstrip().splitlines()[-1].removeprefix("run: ")
    code, out = _invoke("ll144", run_dir, "--out", str(tmp_path / "s"))
    assert code == 2 and f"selection rates of {selecting_audit_in_words()}" in out
    assert not (tmp_path / "s").exists()


def test_run_help_lists_every_task_as_its_declaration_gives_it() -> None:
    code, out = _invoke("run", "--help")
    assert code == 0
    for info in TASKS.values():
        if "SPEC.yaml" not in info.usage:
            assert info.usage in " ".join(out.split()), info.name
