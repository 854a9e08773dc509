"""`biasaudit reaudit` and `history`: scheduled re-audits that alert on drift or a new version."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.reports.history import DRIFT_EXIT_CODE, spec_identity
from biasaudit.spec import load_spec
from tests.test_compare import SnapshotServer, screener


@pytest.fixture
def server() -> Iterator[SnapshotServer]:
    with SnapshotServer(responder=screener(None), model="test-model-2024-05-13") as srv:
        yield srv


@pytest.fixture
def spec_file(server: SnapshotServer, tmp_path: Path) -> Path:
    path = tmp_path / "audit.yaml"
    path.write_text(
        "task: resume-screening\n"
        "model: vllm/test-model\n"
        f"base_url: {server.base_url}\n"
        "jobs: [software-engineer]\n"
        "names_per_group: 5\nrounds: 300\nbootstrap: 200\ngap_bootstrap: 100\n"
    )
    return path


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_reaudit_asks_afresh_and_alerts_on_drift_only_when_told(
    server: SnapshotServer, spec_file: Path, tmp_path: Path
) -> None:
    history = tmp_path / "history"
    code, out, _ = invoke(
        "reaudit", str(spec_file), "--history", str(history), "--fail-on", "drift"
    )
    assert code == 0 and "baseline: none (the first completed run of this spec here)" in out
    first = Path(out.splitlines()[-1].removeprefix("run: "))
    assert first.parent == history and server.request_count == 240

    server.model = "test-model-2024-08-06"  # a new version that answers alike
    code, out, _ = invoke(
        "reaudit", str(spec_file), "--history", str(history), "--fail-on", "drift"
    )
    second = Path(out.splitlines()[-1].removeprefix("run: "))
    assert code == 0 and server.request_count == 480  # asked again, not served from the cache
    assert f"baseline: {first}" in out
    assert "verdict: model version changed without measurable change" in out
    assert json.loads((second / "compare.json").read_text())["run_a"] == str(first)

    server.responder = screener("H_M")
    code, out, err = invoke(
        "reaudit", str(spec_file), "--history", str(history), "--fail-on", "any"
    )
    assert code == DRIFT_EXIT_CODE and "alert: --fail-on any met" in err
    assert f"baseline: {second}" in out and "verdict: changed (H_M)" in out
    assert out.splitlines()[-1].startswith(f"run: {history}")


def test_reaudit_fails_on_a_version_change(
    server: SnapshotServer, spec_file: Path, tmp_path: Path
) -> None:
    history = tmp_path / "history"
    invoke("reaudit", str(spec_file), "--history", str(history))
    server.system_fingerprint = "fp_test2"
    code, out, _ = invoke(
        "reaudit", str(spec_file), "--history", str(history), "--fail-on", "version"
    )
    assert code == DRIFT_EXIT_CODE and "system fingerprint: fp_test1 -> fp_test2 (CHANGED)" in out


def test_history_lists_the_runs_of_a_spec(
    server: SnapshotServer, spec_file: Path, tmp_path: Path
) -> None:
    history = tmp_path / "history"
    for _ in range(2):
        invoke("reaudit", str(spec_file), "--history", str(history))
    other = tmp_path / "other.yaml"
    other.write_text(spec_file.read_text().replace("names_per_group: 5", "names_per_group: 4"))
    invoke("reaudit", str(other), "--history", str(history))

    code, out, _ = invoke("history", "--spec", str(spec_file), "--runs-dir", str(history))
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3 and lines[0].startswith("started (UTC)")
    assert all(
        re.search(r"allocation +completed +test-model-2024-05-13 \[fp_test1\]", ln)
        for ln in lines[1:]
    )
    assert all("lowest RABBI" in line for line in lines[1:])
    code, out, _ = invoke("history", "--runs-dir", str(history))
    assert len(out.splitlines()) == 4


def test_spec_identity_ignores_how_a_run_is_run(spec_file: Path, tmp_path: Path) -> None:
    base = load_spec(spec_file)
    assert spec_identity(base) == spec_identity(
        load_spec(spec_file, {"runs_dir": str(tmp_path), "fresh": True, "concurrency": 3})
    )
    assert spec_identity(base) != spec_identity(load_spec(spec_file, {"seed": 1}))


def test_a_reaudit_in_rounds_compares_with_the_last_round_of_the_one_before(
    server: SnapshotServer, spec_file: Path, tmp_path: Path
) -> None:
    """A spec with --until runs in rounds each time; its baseline is the previous
    re-audit's last round (the one whose rounds.json records the spec), not a round of
    its own size."""
    spec_file.write_text(spec_file.read_text() + "until: precise:0.01\nmax_names: 10\n")
    history = tmp_path / "history"
    code, out, _ = invoke("reaudit", str(spec_file), "--history", str(history))
    assert code == 0 and "baseline: none" in out
    first = Path(out.splitlines()[-1].removeprefix("run: "))
    record = json.loads((first / "rounds.json").read_text())
    assert [r["size"] for r in record["rounds"]] == [5, 10]  # two rounds, two run folders
    code, out, _ = invoke("reaudit", str(spec_file), "--history", str(history))
    assert code == 0 and f"baseline: {first}" in out
    second = Path(out.splitlines()[-1].removeprefix("run: "))
    assert json.loads((second / "compare.json").read_text())["run_a"] == str(first)
    code, out, _ = invoke("history", "--spec", str(spec_file), "--runs-dir", str(history))
    assert code == 0 and first.name in out and second.name in out
    assert len(out.strip().splitlines()) == 3  # the header and the two last rounds, of four
    assert len(list(history.glob("*/manifest.json"))) == 4


def test_a_history_that_cannot_be_written_is_named_with_this_commands_option(
    server: SnapshotServer, spec_file: Path, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("not a folder\n", encoding="utf-8")
    code, _, err = invoke("reaudit", str(spec_file), "--history", str(tmp_path / "a-file" / "h"))
    assert code == 2 and "a-file is a file, not a folder" in err, err
    assert "give --history a folder that may be written, or the spec's cache a file" in err
    assert "--runs-dir" not in err and server.request_count == 0
