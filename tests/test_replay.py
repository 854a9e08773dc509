"""`biasaudit replay`: every run kind rebuilt from the cache, identically, and portably."""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.engine.fanout import FanoutOptions, run_fanout
from biasaudit.engine.loop import run_async
from biasaudit.errors import UsageError
from biasaudit.kinds.registry import run_spec
from biasaudit.providers import ModelRequest
from biasaudit.replay import find_cache, metric_differences, replay_run
from biasaudit.spec import parse_spec
from biasaudit.store.runs import read_manifest

SPECS: dict[str, dict[str, Any]] = {
    "allocation": {"task": "resume-screening", "jobs": "software-engineer", "names_per_group": 2,
                   "rounds": 100, "bootstrap": 200, "gap_bootstrap": 40},
    "grade-score": {"task": "grade-score", "items": "demo"},
    "ruted": {"task": "ruted", "contexts": "standard,bedtime", "replicates": 3},
}  # fmt: skip


def audit_run(kind: str, runs_dir: Path) -> Path:
    spec = parse_spec({**SPECS[kind], "model": "sim/biased", "runs_dir": str(runs_dir)})
    return run_spec(spec, command=["test"]).run_dir


def metrics_without_requests(run_dir: Path) -> dict[str, Any]:
    data = json.loads((run_dir / "metrics.json").read_text())
    data.pop("requests")
    return data


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_replay_reproduces_every_audit_kind_from_the_cache(kind: str, tmp_path: Path) -> None:
    original = audit_run(kind, tmp_path)
    result = replay_run(original)
    assert result.differences == [] and result.exit_code == 0
    assert result.run_dir.parent == original.parent and result.run_dir != original
    assert metrics_without_requests(result.run_dir) == metrics_without_requests(original)
    manifest = read_manifest(result.run_dir)
    assert manifest.kind == kind and manifest.replay_of == str(original)
    assert manifest.counts.sent == 0 and manifest.counts.cache_hits == manifest.counts.requests
    assert manifest.settings["replay"] is True
    for table in ("scores.csv", "items.csv", "trials.csv", "occupations.csv"):
        if (original / table).exists():
            assert (result.run_dir / table).read_bytes() == (original / table).read_bytes()


def test_a_pairwise_run_whose_pools_repeat_a_comparison_replays(tmp_path: Path) -> None:
    """Pools drawn from few names repeat comparisons: the same prompt, sent once and
    answered from the cache for its copies. The replay finds every one of them."""
    spec = parse_spec({"task": "resume-screening", "method": "pairwise",
                       "jobs": "software-engineer", "names_per_group": 2, "bootstrap": 200,
                       "gap_bootstrap": 40, "model": "sim/biased", "runs_dir": str(tmp_path)})  # fmt: skip
    original = run_spec(spec, command=["test"]).run_dir
    counts = read_manifest(original).counts
    assert counts.cache_hits > 0 and counts.sent + counts.cache_hits == counts.requests
    result = replay_run(original)
    assert result.differences == [] and result.exit_code == 0
    assert metrics_without_requests(result.run_dir) == metrics_without_requests(original)
    assert read_manifest(result.run_dir).counts.sent == 0


def test_replay_rebuilds_fanout_responses(tmp_path: Path) -> None:
    requests = [
        ModelRequest(id=f"q{i}", messages=({"role": "user", "content": f"Answer Yes or No: {i}"},))
        for i in range(5)
    ]
    options = FanoutOptions(model="sim/biased", runs_dir=tmp_path, command=["test"])
    original = run_async(run_fanout(requests, options)).run_dir
    result = replay_run(original)
    assert result.kind == "fanout" and result.differences == []
    lines = (result.run_dir / "responses.jsonl").read_text().splitlines()
    assert len(lines) == 5 and all(json.loads(line)["cached"] for line in lines)


def test_a_run_and_its_cache_copied_elsewhere_replay_there(tmp_path: Path) -> None:
    original = audit_run("allocation", tmp_path / "here")
    elsewhere = tmp_path / "there"
    elsewhere.mkdir()
    shutil.copytree(original, elsewhere / original.name)
    shutil.copy(tmp_path / "here" / "cache.sqlite", elsewhere / "cache.sqlite")
    shutil.rmtree(tmp_path / "here")  # the recorded cache path is gone
    copied = elsewhere / original.name
    result = replay_run(copied)
    assert result.differences == [] and result.run_dir.parent == elsewhere
    assert metrics_without_requests(result.run_dir) == metrics_without_requests(copied)


def test_replay_names_the_missing_answers_and_computes_nothing(tmp_path: Path) -> None:
    original = audit_run("allocation", tmp_path)
    with contextlib.closing(sqlite3.connect(tmp_path / "cache.sqlite")) as db, db:
        db.execute("DELETE FROM responses WHERE rowid IN (SELECT rowid FROM responses LIMIT 3)")
    before = set(tmp_path.iterdir())
    with pytest.raises(UsageError, match=r"3 of 96 answers are missing from the cache .*e\.g\. "):
        replay_run(original)
    assert set(tmp_path.iterdir()) == before  # stopped before any run folder


def test_no_cache_anywhere_names_the_places_looked_at(tmp_path: Path) -> None:
    original = audit_run("allocation", tmp_path)
    (tmp_path / "cache.sqlite").rename(tmp_path / "moved.sqlite")
    with pytest.raises(UsageError, match=r"cannot find the cache .* pass --cache FILE"):
        find_cache(original, read_manifest(original))
    assert replay_run(original, cache=tmp_path / "moved.sqlite").differences == []


def test_metric_differences_ignore_request_counts_only() -> None:
    before = {"requests": {"sent": 5}, "groups": {"B_M": {"rabbi": 0.1, "n": 3}}}
    after = {"requests": {"sent": 0}, "groups": {"B_M": {"rabbi": 0.2, "n": 3}}, "new": 1}
    assert metric_differences(before, after) == ["groups.B_M.rabbi", "new"]


def test_figures_equal_to_within_rounding_are_no_difference_and_are_counted() -> None:
    rabbi = -0.3441876543210987
    ulp = math.ulp(rabbi)
    before = {"groups": {"B_M": {"rabbi": rabbi, "ci": [-0.6, -0.05], "n": 30}}, "gap": 0.0}
    after = {"groups": {"B_M": {"rabbi": rabbi + 3 * ulp, "ci": [-0.6 - ulp, -0.05], "n": 30}},
             "gap": 1e-17}  # fmt: skip
    rounded: list[str] = []
    assert metric_differences(before, after, rounded=rounded) == []
    assert rounded == ["gap", "groups.B_M.ci.0", "groups.B_M.rabbi"]
    # beyond rounding, a figure differs (a list is named whole); counts compare exactly
    after["groups"]["B_M"].update(rabbi=rabbi + 1e-6, ci=[-0.6, -0.0501], n=31)
    assert metric_differences(before, after) == [
        "groups.B_M.ci", "groups.B_M.n", "groups.B_M.rabbi"
    ]  # fmt: skip
    assert metric_differences({"n": 10**12}, {"n": 10**12 + 1}) == ["n"]


def test_a_replay_on_a_machine_that_rounds_differently_is_identical(tmp_path: Path) -> None:
    original = audit_run("grade-score", tmp_path)
    metrics = json.loads((original / "metrics.json").read_text())
    grade = metrics["grade_score"]
    metrics["grade_score"] = grade + math.ulp(grade)  # the last bit another BLAS may give
    (original / "metrics.json").write_text(json.dumps(metrics))
    result = CliRunner().invoke(cli, ["replay", str(original)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (
        f"replay: metrics identical to {original} (request counts aside; 1 figures equal to "
        "within rounding (relative 1e-09: the last bits another CPU, BLAS or thread count "
        "gives))"
    ) in result.stdout


def test_a_ruted_run_names_the_shipped_occupations_alike_on_every_machine(
    tmp_path: Path,
) -> None:
    """The built-in occupations are recorded by name, not by where this machine installed
    them; a run that recorded a path (before 2026-11-27, or elsewhere) replays identically."""
    original = audit_run("ruted", tmp_path)
    metrics = json.loads((original / "metrics.json").read_text())
    assert metrics["occupations_source"] == "the built-in WinoBias occupations (occupations.csv)"
    from biasaudit.textfiles import DATA_DIR

    assert str(DATA_DIR) not in (original / "metrics.json").read_text()
    metrics["occupations_source"] = (
        "/home/someone/venv/site-packages/biasaudit/data/occupations.csv"
    )
    (original / "metrics.json").write_text(json.dumps(metrics))
    assert replay_run(original).differences == []


def test_a_run_of_an_older_layout_replays_identically_its_new_fields_named(
    tmp_path: Path,
) -> None:
    """A run written before a field was added (metrics schema_version 2: impact rates
    without their interval) replays without a difference; the new field is named."""
    original = audit_run("allocation", tmp_path)
    path = original / "metrics.json"
    data = json.loads(path.read_text())
    assert data["schema_version"] == 5 and data["impact"][0]["rate_ci"] is not None
    for row in data["impact"]:
        for added in ("rate_ci", "p_adjusted", "family"):
            row.pop(added)
    data.pop("verdicts")
    path.write_text(json.dumps({**data, "schema_version": 2}))
    result = replay_run(original)
    assert result.differences == []
    assert {"impact.rate_ci", "impact.family", "verdicts"} <= set(result.added)
    changed = {**data, "schema_version": 2, "dp_gap": 1.5}
    path.write_text(json.dumps(changed))
    assert "dp_gap" in replay_run(original).differences  # what it has is still compared


def test_a_run_whose_verdicts_were_not_yet_adjusted_replays_with_the_field_named(
    tmp_path: Path,
) -> None:
    """Before layout 4, an impact ratio's beyond_noise was its interval alone; a replay
    adjusts it over the table, and names the field as redefined rather than differing."""
    original = audit_run("allocation", tmp_path)
    path = original / "metrics.json"
    data = json.loads(path.read_text())
    for row in data["impact"]:
        row["beyond_noise"] = not row["beyond_noise"]
        row.pop("p_adjusted"), row.pop("family")
    path.write_text(json.dumps({**data, "schema_version": 3}))
    result = replay_run(original)
    assert result.differences == [] and result.redefined == ["impact.beyond_noise"]
    output = CliRunner().invoke(cli, ["replay", str(original)]).output
    assert "impact.beyond_noise" in output and "adjusted" in output


def test_a_run_whose_selection_intervals_were_not_yet_floored_replays_with_them_named(
    tmp_path: Path,
) -> None:
    """Before allocation's layout 5, a selection figure's interval was its bootstrap's
    alone; a replay floors its standard error by the omnibus relabellings' spread, and
    names the intervals as redefined rather than differing."""
    original = audit_run("allocation", tmp_path)
    path = original / "metrics.json"
    data = json.loads(path.read_text())
    group = next(iter(data["groups"]))
    bounds = data["groups"][group]["eo_gap_ci"]["1"]
    data["groups"][group]["eo_gap_ci"]["1"] = [bounds[0] / 2, bounds[1] / 2]
    data.pop("verdicts")
    path.write_text(json.dumps({**data, "schema_version": 4}))
    result = replay_run(original)
    assert result.differences == []
    assert result.redefined == [f"groups.{group}.eo_gap_ci"]


def test_cli_replay_prints_the_table_then_the_run(tmp_path: Path) -> None:
    original = audit_run("allocation", tmp_path)
    result = CliRunner().invoke(cli, ["replay", str(original)], catch_exceptions=False)
    lines = result.stdout.splitlines()
    assert result.exit_code == 0, result.output
    assert lines[0].startswith("resume-screening audit of sim/biased")
    assert lines[-2] == f"replay: metrics identical to {original} (request counts aside)"
    assert lines[-1].startswith(f"run: {tmp_path}")


def test_cli_replay_of_something_else_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["replay", str(tmp_path)])
    assert result.exit_code == 2
    assert "is not a run directory (no manifest.json)" in result.output


def test_from_another_directory_a_replay_names_the_cache_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run elsewhere, the default cache is ./runs/cache.sqlite: a replay that finds none
    names it and leaves nothing behind; one that finds it incomplete also names it, before
    any run folder exists; cache stats names it too."""
    monkeypatch.chdir(tmp_path)
    args = ["run", "resume-screening", "-m", "sim/biased", "--jobs", "software-engineer",
            "--names-per-group", "2", "--no-report"]  # fmt: skip
    result = CliRunner().invoke(cli, [*args, "--replay"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: replay: no cache at runs/cache.sqlite")
    assert list(tmp_path.iterdir()) == []
    stats = CliRunner().invoke(cli, ["cache", "stats"])
    assert stats.exit_code == 2 and "no cache at runs/cache.sqlite" in stats.stderr
    assert CliRunner().invoke(cli, args).exit_code == 0
    more = [a if a != "2" else "3" for a in args]
    result = CliRunner().invoke(cli, [*more, "--replay"])
    assert result.exit_code == 2
    assert "prompts are not in the cache runs/cache.sqlite" in result.stderr
    assert len([p for p in (tmp_path / "runs").iterdir() if p.is_dir()]) == 1


def test_replay_help_names_every_kind() -> None:
    """Its help once listed four of the kinds it replays; it is made from the kinds."""
    from biasaudit.kinds import KINDS

    text = " ".join(CliRunner().invoke(cli, ["replay", "--help"]).output.split())
    assert all(kind in text for kind in KINDS) and "fanout" in text
