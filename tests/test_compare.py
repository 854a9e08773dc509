"""`biasaudit compare`: a new model version with a shifted group is flagged, and nothing else is."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.errors import UsageError
from biasaudit.kinds.candidates.resume import read_names
from biasaudit.kinds.registry import run_spec
from biasaudit.reports.compare import (
    NO_CHANGE,
    NOT_COMPARABLE,
    VERSION_ONLY,
    ChangeTest,
    _holm,
    compare_runs,
)
from biasaudit.spec import parse_spec
from biasaudit.textfiles import DATA_DIR
from tests.servers import Choice, OpenAIServer, request_key

NAMES = read_names(DATA_DIR / "names.csv")
FIRST_NAMES = {group: {name.split()[0] for name in names} for group, names in NAMES.items()}
NAME = re.compile(r"^Name: (\w+)", re.MULTILINE)
Responder = Callable[[dict[str, Any], str], list[Choice]]


def screener(shifted: str | None) -> Responder:
    """P(Yes) about 0.6 for everyone, with a deterministic spread; 0.3 for ``shifted``."""

    def respond(body: dict[str, Any], path: str) -> list[Choice]:
        prompt = request_key(body, path)
        found = NAME.search(prompt)
        digest = hashlib.sha256(prompt.encode()).digest()
        p_yes = 0.6 + (digest[0] / 255 - 0.5) / 5
        if shifted and found and found.group(1) in FIRST_NAMES[shifted]:
            p_yes -= 0.3
        return [Choice.binary(p_yes)]

    return respond


class SnapshotServer(OpenAIServer):
    """Reports its own dated snapshot whatever alias was asked for, as OpenAI does."""

    def _envelope(self, *args: Any) -> dict[str, Any]:
        return {**super()._envelope(*args), "model": self.model}


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with SnapshotServer(responder=screener(None), model="test-model-2024-05-13") as srv:
        yield srv


def audit(server: OpenAIServer, runs_dir: Path, **fields: Any) -> Path:
    spec = parse_spec(
        {"task": "resume-screening", "model": "openai/test-model", "base_url": server.base_url,
         "api_key_env": "TEST_KEY", "runs_dir": str(runs_dir), "jobs": "software-engineer",
         "names_per_group": 5, "rounds": 300, "bootstrap": 200, "gap_bootstrap": 100,
         "fresh": True, **fields}
    )  # fmt: skip
    return run_spec(spec, command=["test"]).run_dir


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_KEY", "sk-test")


def test_a_new_version_with_one_shifted_group_is_flagged_for_that_group_only(
    server: OpenAIServer, tmp_path: Path
) -> None:
    before = audit(server, tmp_path)
    server.model, server.system_fingerprint = "test-model-2024-08-06", "fp_test2"
    server.responder = screener("B_F")
    after = audit(server, tmp_path)

    comparison = compare_runs(before, after)
    assert comparison.versions.changed
    assert comparison.versions.versions_a == ("test-model-2024-05-13",)
    assert comparison.versions.versions_b == ("test-model-2024-08-06",)
    assert comparison.verdict == "changed" and comparison.changed_groups == ["B_F"]
    rabbi = next(t for t in comparison.tests if t.label == "B_F rabbi")
    assert rabbi.difference < -0.5 and rabbi.ci[1] < 0 and "paired bootstrap" in rabbi.method

    result = CliRunner().invoke(cli, ["compare", str(before), str(after)])
    lines = result.stdout.splitlines()
    assert result.exit_code == 0, result.output
    assert lines[1] == "model version: test-model-2024-05-13 -> test-model-2024-08-06 (CHANGED)"
    assert lines[2] == "system fingerprint: fp_test1 -> fp_test2 (CHANGED)"
    assert lines[-1] == "verdict: changed (B_F)"
    assert any(line.startswith("B_F rabbi ") for line in lines)
    assert not any(
        line.startswith(("W_F ", "B_M ", "A_F ", "A_M ", "H_F ", "H_M ")) for line in lines
    )


def test_an_unchanged_server_reports_no_change(server: OpenAIServer, tmp_path: Path) -> None:
    before, after = audit(server, tmp_path), audit(server, tmp_path)
    assert server.request_count == 2 * 5 * 6 * 8  # the second run asked afresh
    comparison = compare_runs(before, after)
    assert not comparison.versions.changed and comparison.verdict == NO_CHANGE
    assert comparison.changed_tests == [] and all(t.difference == 0 for t in comparison.tests)


def test_a_new_version_that_answers_alike_is_not_called_drift(
    server: OpenAIServer, tmp_path: Path
) -> None:
    before = audit(server, tmp_path)
    server.model = "test-model-2024-08-06"
    out = tmp_path / "compare.json"
    after = audit(server, tmp_path)
    result = CliRunner().invoke(cli, ["compare", str(before), str(after), "--json", str(out)])
    assert result.stdout.splitlines()[-1] == f"verdict: {VERSION_ONLY}"
    saved = json.loads(out.read_text())
    assert saved["verdict"] == VERSION_ONLY and saved["versions"]["changed"] is True
    assert len(saved["tests"]) == 7 * (2 + 2 * 5)


def test_grade_score_and_ruted_runs_compare_their_headline_metrics(tmp_path: Path) -> None:
    def run(fields: dict[str, Any], model: str) -> Path:
        spec = parse_spec({**fields, "model": model, "runs_dir": str(tmp_path)})
        return run_spec(spec, command=["test"]).run_dir

    grade = {"task": "grade-score", "items": "demo"}
    same = compare_runs(run(grade, "sim/biased"), run(grade, "sim/biased"))
    assert same.verdict == NO_CHANGE and {t.metric for t in same.tests} == {
        "grade_score", "entropy", "choice"
    }  # fmt: skip
    ruted = {"task": "ruted", "contexts": "standard,bedtime", "replicates": 5}
    other = compare_runs(run(ruted, "sim/biased"), run(ruted, "sim/fair"))
    standard = next(t for t in other.tests if t.label == "standard neutrality")
    assert standard.difference < 0 and other.verdict == "changed"
    assert "the runs audit different models" in " ".join(other.notes)


def test_smoke_test_runs_say_so_and_no_tests_give_no_verdict(tmp_path: Path) -> None:
    """Three names per group behind each run: compare says each is a smoke test; a
    comparison that could test no figure gives no verdict, not "no change"."""
    from dataclasses import replace

    from biasaudit.reports.compare import NOT_TESTED

    fields = {"task": "resume-screening", "jobs": ["retail-associate"], "names_per_group": 3,
              "rounds": 100, "model": "sim/biased", "runs_dir": str(tmp_path)}  # fmt: skip
    a = run_spec(parse_spec(fields), command=["t"]).run_dir
    b = run_spec(parse_spec({**fields, "seed": 2}), command=["t"]).run_dir
    found = compare_runs(a, b, allow_different_settings=True)
    said = " ".join(found.notes)
    assert "A is a smoke test (as few as 3 units" in said and "B is a smoke test" in said
    assert replace(found, tests=[]).verdict == NOT_TESTED


def test_runs_of_different_kinds_are_refused(tmp_path: Path) -> None:
    grade = run_spec(
        parse_spec({"task": "grade-score", "items": "demo", "model": "sim/biased",
                    "runs_dir": str(tmp_path)}), command=["t"]
    ).run_dir  # fmt: skip
    ruted = run_spec(
        parse_spec({"task": "ruted", "contexts": "standard", "model": "sim/biased",
                    "runs_dir": str(tmp_path)}), command=["t"]
    ).run_dir  # fmt: skip
    with pytest.raises(UsageError, match="compare runs of one audit"):
        compare_runs(grade, ruted)


def test_holm_adjustment_matches_a_hand_computation() -> None:
    def test(p: float) -> ChangeTest:
        return ChangeTest("m", None, 0.0, 0.0, 0.0, (0.0, 0.0), p, "x")

    adjusted = [t.p_adjusted for t in _holm([test(0.01), test(0.04), test(0.03), test(0.5)])]
    # sorted 0.01, 0.03, 0.04, 0.5 -> x4, x3, x2, x1 -> 0.04, 0.09, 0.08 -> 0.09 (monotone), 0.5
    assert adjusted == pytest.approx([0.04, 0.09, 0.09, 0.5])


def grade_run(runs_dir: Path, **fields: Any) -> Path:
    spec = parse_spec(
        {"task": "grade-score", "model": "sim/fair", "items": "demo", "runs_dir": str(runs_dir),
         **fields}
    )  # fmt: skip
    return run_spec(spec).run_dir


def test_runs_that_asked_differently_get_no_verdict_unless_allowed(tmp_path: Path) -> None:
    """Same judge, another prompt and the random option: no verdict of change or no change."""
    a = grade_run(tmp_path / "a")
    b = grade_run(tmp_path / "b", prompt="2", random_option=True)
    comparison = compare_runs(a, b)
    assert comparison.verdict == NOT_COMPARABLE and not comparison.drift
    assert 'prompt: "1" vs "2"' in comparison.different_settings
    assert "random_option: false vs true" in comparison.different_settings
    assert any(item.startswith("requests: ") for item in comparison.different_settings)
    result = CliRunner().invoke(cli, ["compare", str(a), str(b), "--no-report"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert 'settings differ: prompt: "1" vs "2"' in lines
    assert lines[-1] == f"verdict: {NOT_COMPARABLE}"
    allowed = CliRunner().invoke(
        cli, ["compare", str(a), str(b), "--no-report", "--allow-different-settings"]
    )
    last = allowed.stdout.splitlines()[-1]
    assert last.startswith("verdict: ") and "across different settings (prompt:" in last


def test_runs_that_asked_alike_compare_as_before(tmp_path: Path) -> None:
    a, b = grade_run(tmp_path / "a"), grade_run(tmp_path / "b")
    comparison = compare_runs(a, b)
    assert comparison.different_settings == [] and comparison.verdict == NO_CHANGE


def test_a_run_from_before_a_spec_field_existed_still_compares(tmp_path: Path) -> None:
    """Scheduled re-audits compare with runs an older biasaudit wrote, whose spec.json lacks
    the fields added since: those are no difference of settings."""
    import json as json_module

    a, b = grade_run(tmp_path / "a"), grade_run(tmp_path / "b")
    spec = json_module.loads((a / "spec.json").read_text())
    del spec["conventions"]
    (a / "spec.json").write_text(json_module.dumps(spec))
    assert compare_runs(a, b).different_settings == []


def test_a_p_value_at_the_floor_prints_as_below_it_never_as_a_number() -> None:
    """Both compare tables print p as every other table does (render.text.format_p)."""
    from rich.console import Console

    from biasaudit.metrics import ChangeTest
    from biasaudit.reports.compare import _test_row
    from biasaudit.reports.rich_tables import _test_cells

    test = ChangeTest("RABBI", "B_M", 0.0, 0.9, 0.9, (0.8, 1.0), 1e-300, "bootstrap", 1e-300)
    assert "< 1e-300" in _test_row(test)
    console = Console(width=200, record=True)
    for cell in _test_cells(test, 0.05):
        console.print(cell)
    assert "< 1e-300" in console.export_text()
    ordinary = ChangeTest("RABBI", "B_M", 0.0, 0.1, 0.1, (-0.1, 0.3), 0.034, "bootstrap", 0.034)
    assert "0.034" in _test_row(ordinary)
