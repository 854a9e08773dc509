"""A run whose every request failed has nothing to compute: it is recorded ``failed``,
says so on the command line, in ``history``, ``report`` and ``study``, and exits 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from tests.servers import OpenAIServer
from tests.servers.faults import Fault

COMMANDS = {
    "grade-score": ["run", "grade-score", "--items", "demo", "--item-limit", "4"],
    "allocation": ["run", "resume-screening", "--names-per-group", "2", "--jobs",
                   "software-engineer"],
    "ruted": ["run", "ruted", "--contexts", "standard", "--next-word", "chat"],
}  # fmt: skip


@pytest.mark.parametrize("kind", list(COMMANDS))
def test_a_run_with_no_answer_is_failed_everywhere(tmp_path: Path, kind: str) -> None:
    runs = tmp_path / "runs"
    with OpenAIServer() as server:
        server.fail_all(Fault.http(400, message="this model does not exist"))
        result = CliRunner().invoke(
            cli, [*COMMANDS[kind], "--model", "vllm/m", "--base-url", server.base_url,
                  "--runs-dir", str(runs), "--max-retries", "0"],
        )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "error: every request failed" in result.stderr
    assert "this model does not exist" in result.stderr
    run_dir = Path(result.stdout.strip().splitlines()[-1].removeprefix("run: "))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "every request failed" in manifest["error"]
    assert not (run_dir / "metrics.json").exists() and not (run_dir / "report.html").exists()
    history = CliRunner().invoke(cli, ["history", "--runs-dir", str(runs)])
    assert " failed " in history.stdout
    report = CliRunner().invoke(cli, ["report", str(run_dir)])
    assert report.exit_code == 2 and "(it failed: every request failed" in report.stderr
    study = CliRunner().invoke(cli, ["study", str(run_dir)])
    assert study.exit_code == 2 and "no metrics.json" in study.stderr


@pytest.mark.parametrize("rpm", ["1e-9", "0.01"])
def test_a_rate_that_cannot_finish_within_a_day_is_refused_before_anything_runs(
    tmp_path: Path, rpm: str
) -> None:
    runs = tmp_path / "runs"
    result = CliRunner().invoke(
        cli, ["run", "grade-score", "--items", "demo", "--model", "sim/biased", "--rpm", rpm,
              "--runs-dir", str(runs)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"error: --rpm {float(rpm):g}: the 64 requests to send would take" in result.stderr
    assert "more than a day" in result.stderr
    assert not list(runs.glob("*-grade-score-*"))


def test_oversized_inputs_are_refused_up_front_and_never_echoed_whole(tmp_path: Path) -> None:
    huge = "G" * 2_000_000
    scores = tmp_path / "scores.csv"
    scores.write_text("candidate,group,score\nc1,R,0.5\nc2," + huge + ",0.4\n")
    result = CliRunner().invoke(cli, ["score", "allocation", str(scores), "--runs-dir",
                                      str(tmp_path / "runs")])  # fmt: skip
    assert result.exit_code == 2
    assert "line 3, field 'group': 2,000,000 characters" in result.stderr
    assert "a label may have at most 200" in result.stderr
    assert len(result.output) < 2_000  # the value is never echoed whole
    spec = tmp_path / "audit.yaml"
    spec.write_text("task: ruted\nmodel: sim/biased\n# " + "x" * (2 << 20) + "\n")
    result = CliRunner().invoke(cli, ["run", str(spec)])
    assert result.exit_code == 2
    assert "is 2 MiB; a spec file may be at most 1 MiB" in result.stderr
    assert not (tmp_path / "runs").exists()
