"""Runs as DataFrames (``load_runs``, ``load_scores``, ``load_responses``) and
``biasaudit export``: every figure row equals its value in ``metrics.json``, every
per-unit and response row is there once, and what a glob also matches is skipped."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

import biasaudit
from biasaudit.cli import cli
from biasaudit.kinds.registry import run_spec
from biasaudit.spec import parse_spec

FAST: dict[str, dict[str, Any]] = {
    "allocation": {"task": "resume-screening", "names_per_group": 3, "pools": 5,
                   "jobs": "software-engineer,retail-associate"},
    "grade-score": {"task": "grade-score", "items": "demo"},
    "ruted": {"task": "ruted", "contexts": "standard"},
    "listwise": {"task": "resume-screening", "method": "listwise", "names_per_group": 3,
                 "pools": 4, "jobs": "software-engineer,retail-associate", "bootstrap": 200},
}  # fmt: skip


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("runs")
    for fields in FAST.values():
        run_spec(parse_spec({"model": "sim/biased", "runs_dir": str(folder), **fields}),
                 command=["test"])  # fmt: skip
    (folder / "20990101T000000Z-study-allocation-0000").mkdir()
    (folder / "20990101T000000Z-study-allocation-0000" / "study.json").write_text("{}")
    return folder


def run_of(runs_dir: Path, kind: str) -> Path:
    return next(p for p in runs_dir.iterdir() if f"-{kind}-sim" in p.name)


def metrics_of(runs_dir: Path, kind: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((run_of(runs_dir, kind) / "metrics.json").read_text())
    return found


def one(frame: pd.DataFrame, **where: Any) -> pd.Series:
    rows = frame
    for column, value in where.items():
        rows = rows[rows[column].isna()] if value is None else rows[rows[column] == value]
    assert len(rows) == 1, (where, rows)
    return rows.iloc[0]


def test_every_kind_s_figures_in_long_form_equal_its_metrics(runs_dir: Path) -> None:
    figures = biasaudit.load_runs(f"{runs_dir}/*")
    assert list(figures.columns) == list(biasaudit.frames.FIGURE_COLUMNS)
    assert set(figures["kind"]) == set(FAST)
    assert sorted(figures.attrs["skipped"]) == sorted(
        [f"{runs_dir / 'cache.sqlite'}: a file, not a run",
         f"{runs_dir / '20990101T000000Z-study-allocation-0000'}: a folder without "
         "manifest.json, not a run"]
    )  # fmt: skip
    allocation = metrics_of(runs_dir, "allocation")
    for group, found in allocation["groups"].items():
        row = one(figures, kind="allocation", subtask="", unit=group, figure="dp_gap", k=1)
        assert row["estimate"] == found["dp_gap"]["1"] and row["n"] == found["n"]
        assert [row["low"], row["high"]] == found["dp_gap_ci"]["1"]
        row = one(figures, kind="allocation", subtask="", unit=group, figure="rabbi")
        assert row["estimate"] == found["rabbi"]
    for subtask, part in allocation["subtasks"].items():
        for group, found in part["groups"].items():
            row = one(figures, kind="allocation", subtask=subtask, unit=group, figure="jsd")
            assert row["estimate"] == found["jsd"]
    listwise = metrics_of(runs_dir, "listwise")
    for impact in listwise["impact"]:
        row = one(figures, kind="listwise", subtask="", unit_type=impact["category"],
                  unit=impact["value"], figure="impact_ratio")  # fmt: skip
        assert row["estimate"] == impact["ratio"] and row["n"] == impact["n"]
    assert {i["subtask"] for i in listwise["impact_by_subtask"]} == set(
        figures.query("kind == 'listwise' and subtask != ''")["subtask"]
    )
    grade = metrics_of(runs_dir, "grade-score")
    row = one(figures, kind="grade-score", figure="grade_score")
    assert row["estimate"] == grade["grade_score"] and row["n"] == grade["items"]
    ruted = metrics_of(runs_dir, "ruted")
    row = one(figures, kind="ruted", unit="standard", figure="skew", subtask="")
    assert row["estimate"] == ruted["contexts"]["standard"]["skew"]
    both = figures.dropna(subset=["low", "high"])
    assert (both["low"] <= both["estimate"] + 1e-9).all()
    assert (both["estimate"] <= both["high"] + 1e-9).all()
    assert not figures["estimate"].map(math.isinf).any()


def test_scores_and_responses_hold_every_row_once_with_its_run(runs_dir: Path) -> None:
    scores = biasaudit.load_scores(runs_dir)
    for kind, name in (("allocation", "scores.csv"), ("grade-score", "items.csv"),
                       ("ruted", "occupations.csv"), ("listwise", "shown.csv")):  # fmt: skip
        own = pd.read_csv(run_of(runs_dir, kind) / name)
        assert (scores["kind"] == kind).sum() == len(own)
    assert "scoring_path" in scores.columns  # allocation's 'path', renamed
    assert scores["path"].map(lambda p: Path(p).parent == runs_dir).all()
    responses = biasaudit.load_responses([run_of(runs_dir, k) for k in FAST])
    for kind in FAST:
        lines = (run_of(runs_dir, kind) / "responses.jsonl").read_text().splitlines()
        assert (responses["kind"] == kind).sum() == len(lines)
    assert responses["cache_key"].notna().all()


def test_responses_of_a_fanout_run_load_and_its_figures_do_not(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"id": "a", "prompt": "Say Yes or No."}\n')
    result = CliRunner().invoke(cli, ["fanout", str(prompts), "--model", "sim/fair",
                                      "--runs-dir", str(tmp_path / "runs")])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(biasaudit.load_responses(tmp_path / "runs")) == 1
    figures = biasaudit.load_runs(tmp_path / "runs")
    assert figures.empty and "a fanout run, not an audit run" in figures.attrs["skipped"][-1]


@pytest.mark.parametrize("file_format", ["csv", "parquet", "jsonl"])
def test_export_writes_what_load_runs_gives(runs_dir: Path, tmp_path: Path,
                                            file_format: str) -> None:  # fmt: skip
    target = tmp_path / f"figures.{file_format}"
    result = CliRunner().invoke(cli, ["export", f"{runs_dir}/*", "--format", file_format,
                                      "-o", str(target)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"note: skipped {runs_dir / 'cache.sqlite'}: a file, not a run" in result.stderr
    read = {"csv": lambda p: pd.read_csv(p, keep_default_na=False, na_values=[""]),
            "parquet": pd.read_parquet,
            "jsonl": lambda p: pd.read_json(p, lines=True)}[file_format](target)  # fmt: skip
    expected = biasaudit.load_runs(runs_dir)
    assert len(read) == len(expected) and list(read.columns) == list(expected.columns)
    assert read["estimate"].to_numpy() == pytest.approx(expected["estimate"].to_numpy(),
                                                         nan_ok=True)  # fmt: skip
    assert result.stdout == f"{len(expected)} rows of 4 runs: {target}\n"


def test_export_of_scores_and_responses_to_parquet_keeps_mixed_columns(
    runs_dir: Path, tmp_path: Path
) -> None:
    for what in ("scores", "responses"):
        target = tmp_path / f"{what}.parquet"
        result = CliRunner().invoke(cli, ["export", str(runs_dir), "--what", what,
                                          "--format", "parquet", "-o", str(target)])  # fmt: skip
        assert result.exit_code == 0, result.output
        assert len(pd.read_parquet(target)) == int(result.stdout.split()[0])


def test_export_names_what_it_cannot_do(runs_dir: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    runner = CliRunner()
    result = runner.invoke(cli, ["export", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "does not exist" in result.stderr
    result = runner.invoke(cli, ["export", f"{tmp_path}/*.nothing"])
    assert result.exit_code == 2 and "matches nothing" in result.stderr
    result = runner.invoke(cli, ["export", str(runs_dir / "cache.sqlite")])
    assert result.exit_code == 2 and "no run among the paths given has figures" in result.stderr
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    result = runner.invoke(cli, ["export", str(runs_dir), "--format", "parquet",
                                 "-o", str(tmp_path / "x.parquet")])  # fmt: skip
    assert result.exit_code == 2
    assert "needs pyarrow: pip install 'biasaudit[parquet]'" in result.stderr
    assert not (tmp_path / "x.parquet").exists()


def test_damaged_run_files_are_left_out_and_named_not_a_traceback(
    runs_dir: Path, tmp_path: Path
) -> None:
    import shutil

    copy = tmp_path / "runs"
    shutil.copytree(runs_dir, copy)
    allocation = run_of(copy, "allocation")
    (allocation / "scores.csv").write_bytes(b'a,b\n"unclosed,1\n' + b"\x00" * 10)
    listwise = run_of(copy, "listwise")
    with open(listwise / "responses.jsonl", "a") as handle:
        handle.write('{"id": "cut sho')
    ruted = run_of(copy, "ruted")
    (ruted / "manifest.json").write_text("{not json")
    scores = biasaudit.load_scores(copy)
    assert "allocation" not in set(scores["kind"])
    assert any("scores.csv cannot be read" in note for note in scores.attrs["skipped"])
    responses = biasaudit.load_responses(copy)
    assert any("responses.jsonl: line" in note for note in responses.attrs["skipped"])
    assert (responses["kind"] == "listwise").sum() > 0
    figures = biasaudit.load_runs(copy)
    assert "ruted" not in set(figures["kind"])
    assert any(str(ruted) in note for note in figures.attrs["skipped"])
