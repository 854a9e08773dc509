"""Which runs a study counts: incomplete runs are skipped with a note, as ``export``
skips them, and runs of one audit of one model (pilots, rounds, repeats) count once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.test_cli_audit import invoke, run_dir_of


def audit(tmp_path: Path, model: str, names: int) -> Path:
    code, out, err = invoke(
        "run", "resume-screening", "--model", model, "--jobs", "software-engineer",
        "--names-per-group", str(names), "--rounds", "200", "--bootstrap", "200",
        "--runs-dir", str(tmp_path), "--no-report",
    )  # fmt: skip
    assert code == 0, err
    return run_dir_of(out)


def test_study_skips_incomplete_runs_and_counts_each_audit_once(tmp_path: Path) -> None:
    pilot = audit(tmp_path, "sim/biased", 2)
    full = audit(tmp_path, "sim/biased", 4)
    repeat = audit(tmp_path, "sim/biased", 2)
    fair = audit(tmp_path, "sim/fair", 3)
    stopped = tmp_path / "20200101T000000Z-allocation-sim-fair-dead"
    shutil.copytree(fair, stopped)
    (stopped / "metrics.json").unlink()
    manifest = json.loads((stopped / "manifest.json").read_text())
    (stopped / "manifest.json").write_text(json.dumps({**manifest, "status": "interrupted"}))

    code, out, err = invoke("study", str(pilot), str(full), str(repeat), str(fair), str(stopped),
                            "--no-report")  # fmt: skip
    assert code == 0, err
    assert out.startswith("study of 2 runs: sim/biased (SIMULATED), sim/fair (SIMULATED)\n")
    assert f"skipped {stopped}: incomplete: no metrics.json" in err
    assert "(status interrupted)" in err
    assert (
        f"counted once: 3 runs audit the same model (sim/biased) the same way (pilots, rounds "
        f"or repeats); {full} stands for them (the most answers, 192); left out: {pilot}, {repeat}"
    ) in err


def test_a_study_of_incomplete_runs_only_is_a_usage_error(tmp_path: Path) -> None:
    run = audit(tmp_path, "sim/fair", 2)
    (run / "metrics.json").unlink()
    code, out, err = invoke("study", str(run))
    assert code == 2 and out == ""
    assert "no audit run among the paths given" in err and "incomplete" in err
