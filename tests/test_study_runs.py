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


def test_a_decisions_pilot_and_its_full_run_are_one_audit(tmp_path: Path) -> None:
    """The list of size fields once lacked the decisions kind's: its pilot and its full run
    counted as two audits. Each field now says so where it is declared."""
    runs = []
    for limit in ("3", "5"):
        code, out, err = invoke(
            "run", "decisions", "--model", "sim/biased", "--fills", "explicit",
            "--scenario-limit", limit, "--runs-dir", str(tmp_path), "--no-report",
        )  # fmt: skip
        assert code == 0, err
        runs.append(run_dir_of(out))
    code, out, err = invoke("study", *map(str, runs), "--no-report")
    assert code == 0, err
    assert "counted once: 2 runs audit the same model (sim/biased)" in err


def test_every_spec_field_is_either_part_of_the_audit_or_says_it_sizes_the_run() -> None:
    """What makes two runs one audit is declared on the fields: the registry reads it."""
    from biasaudit.kinds.registry import _size_and_engine_fields

    found = _size_and_engine_fields()
    assert {"scenario_limit", "names_per_group", "item_limit", "replicates", "concurrency",
            "model", "until"} <= found  # fmt: skip
    assert not {"task", "prompt", "temperature", "scenarios", "contexts"} & found


def test_one_file_of_outputs_imported_three_times_is_one_audit(tmp_path: Path) -> None:
    """A RUTEd study counted three imports of one model's outputs (identical answers) as
    three models and ranked them."""
    outputs = tmp_path / "outputs.csv"
    outputs.write_text("occupation,context,p_male\n" + "".join(
        f"{name},standard,{share}\n" for name, share in
        (("nurse", 0.2), ("carpenter", 0.8), ("secretary", 0.3), ("driver", 0.7))
    ))  # fmt: skip
    runs = []
    for _ in range(3):
        code, out, err = invoke("score", "ruted", str(outputs), "--model", "my/model",
                                "--runs-dir", str(tmp_path / "runs"))  # fmt: skip
        assert code == 0, err
        runs.append(run_dir_of(out))
    code, out, err = invoke("study", *map(str, runs), "--no-report")
    assert code == 0, err
    assert "counted once: 3 runs audit the same model (imported/my/model)" in err
    assert "(the most answers, 4)" in err and out.startswith("RUTEd study of 1 runs")
