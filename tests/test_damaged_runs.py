"""A run whose files were damaged after it ended (a copy cut short, a hand edit, a full
disk) is named by file, with the way to get it back, by every command that reads it:
never a traceback. ``replay`` writes such a run again from the cache, unless the damage
is to the ``spec.json`` it replays from."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli

# One worker builds the module's runs once (a module fixture is built per worker).
pytestmark = pytest.mark.xdist_group("damaged-runs")

RUNS = {
    "allocation": ["run", "resume-screening", "--jobs", "software-engineer",
                   "--names-per-group", "3"],
    "grade-score": ["run", "grade-score", "--items", "demo", "--item-limit", "4"],
    "ruted": ["run", "ruted", "--contexts", "standard"],
    "decisions": ["run", "decisions", "--scenario-limit", "2", "--fills", "explicit"],
    "listwise": ["run", "resume-screening", "--method", "listwise", "--jobs",
                 "software-engineer", "--pools", "4"],
}  # fmt: skip
# The per-unit table each kind's report reads.
TABLES = {"allocation": "scores.csv", "grade-score": "items.csv", "ruted": "occupations.csv",
          "decisions": "scenarios.csv", "listwise": None}  # fmt: skip


def invoke(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One finished run of every kind, in one runs folder beside its cache."""
    folder = tmp_path_factory.mktemp("damaged") / "runs"
    made = {}
    for kind, args in RUNS.items():
        code, out = invoke(*args, "--model", "sim/biased", "--runs-dir", folder, "--no-report")
        assert code == 0, out
        made[kind] = Path(out.rstrip("\n").splitlines()[-1].removeprefix("run: "))
    return made


def damaged(original: Path, name: str, data: bytes) -> Path:
    copy = original.with_name(f"{original.name}-{secrets.token_hex(4)}")
    shutil.copytree(original, copy)
    (copy / name).write_bytes(data)
    return copy


@pytest.mark.parametrize("kind", list(RUNS))
def test_a_damaged_metrics_file_is_named_and_replay_writes_the_run_again(
    runs: dict[str, Path], kind: str
) -> None:
    original = runs[kind]
    whole = (original / "metrics.json").read_bytes()
    run = damaged(original, "metrics.json", whole[: len(whole) // 2])
    for command in (["report", run], ["compare", original, run, "--no-report"]):
        code, out = invoke(*command)
        assert code == 2, out
        assert f"error: {run / 'metrics.json'} is damaged (not JSON: cut short, or edited)" in out
        assert f"`biasaudit replay {run}` writes the run again from the cache" in out
    if kind == "allocation":  # history and export read every run: the damaged one is named
        code, out = invoke("history", "--runs-dir", run.parent)
        line = next(line for line in out.splitlines() if line.endswith(run.name))
        assert code == 0 and "(metrics.json unreadable: biasaudit report says why)" in line
        code, out = invoke("export", run, original, "-o", run.parent.parent / "figures.csv")
        assert code == 0 and f"note: skipped {run / 'metrics.json'} is damaged" in out, out
    code, out = invoke("replay", run)
    assert code == 1, out
    assert "at metrics.json (the original's cannot be read; the replay's is whole)" in out
    again = Path(out.rstrip("\n").splitlines()[-1].removeprefix("run: "))
    code, out = invoke("replay", again)  # the rebuilt run is whole: it replays identically
    assert code == 0 and "metrics identical" in out, out


@pytest.mark.parametrize("kind", list(RUNS))
def test_a_damaged_spec_is_named_and_compare_gives_no_verdict_without_it(
    runs: dict[str, Path], kind: str
) -> None:
    original = runs[kind]
    run = damaged(original, "spec.json", b"[]")
    for command in (["report", run], ["replay", run]):
        code, out = invoke(*command)
        assert code == 2, out
        assert f"error: {run / 'spec.json'} is damaged (a JSON list, not an object)" in out
        assert "replay needs it: restore it from a copy" in out
    code, out = invoke("compare", original, run, "--no-report")
    assert code == 0, out
    assert "B's spec.json is damaged: what it asked is unknown" in out
    assert "verdict: no change" not in out
    if kind == "allocation":  # so is a run whose answers file is damaged
        answers = damaged(original, "responses.jsonl", b'{"id": "x", "rep')
        code, out = invoke("compare", answers, original, "--no-report")
        assert code == 0 and "A's responses.jsonl is damaged: what it asked is unknown" in out
        assert "verdict: no change" not in out


@pytest.mark.parametrize("kind", [kind for kind, table in TABLES.items() if table])
@pytest.mark.parametrize("damage", [b"x,y\r\n1,2\r\n", b"\xff\xfe\x00garbage", b""])
def test_a_damaged_table_is_named_by_the_report(
    runs: dict[str, Path], kind: str, damage: bytes
) -> None:
    table = TABLES[kind]
    assert table is not None
    run = damaged(runs[kind], table, damage)
    code, out = invoke("report", run)
    assert code == 2, out
    problem = {b"": "empty", b"x": "no column"}.get(damage[:1], "not UTF-8 text")
    assert f"error: {run / table} is damaged ({problem}" in out
    assert f"`biasaudit replay {run}`" in out


def test_compare_and_ll144_name_a_damaged_scores_file(runs: dict[str, Path]) -> None:
    original = runs["allocation"]
    whole = (original / "scores.csv").read_bytes()
    run = damaged(original, "scores.csv", whole[:40])  # cut inside the header
    code, out = invoke("compare", original, run, "--no-report")
    assert code == 2 and f"{run / 'scores.csv'} is damaged (no column" in out, out
    code, out = invoke("ll144", run, "--scoring", "--out", run.parent / "ll144")
    assert code == 2 and f"{run / 'scores.csv'} is damaged" in out, out


def test_history_of_a_folder_that_is_not_there_says_so(tmp_path: Path) -> None:
    code, out = invoke("history", "--runs-dir", tmp_path / "rusn")
    assert code == 0 and out == f"no audit runs in {tmp_path / 'rusn'} (no such folder)\n"


def test_a_reaudit_names_a_damaged_baseline_before_sending_and_keeps_a_new_run(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "audit.yaml"
    spec.write_text("task: resume-screening\nmodel: sim/biased\njobs: [software-engineer]\n"
                    f"names_per_group: 3\nruns_dir: {tmp_path / 'runs'}\n")  # fmt: skip
    code, out = invoke("run", spec, "--no-report")
    assert code == 0, out
    [baseline] = (tmp_path / "runs").glob("*-allocation-*")
    metrics = (baseline / "metrics.json").read_bytes()
    (baseline / "metrics.json").write_bytes(metrics[:100])
    code, out = invoke("reaudit", spec)
    assert code == 2, out
    assert "error: reaudit: the baseline, the latest run of this spec, cannot be read; " \
        "nothing was sent." in out  # fmt: skip
    assert list((tmp_path / "runs").glob("*-allocation-*")) == [baseline]
    # A table damaged: found only when compared, after the new run was paid for; it is kept.
    (baseline / "metrics.json").write_bytes(metrics)
    (baseline / "scores.csv").write_text("x,y\n")
    code, out = invoke("reaudit", spec)
    assert code == 2 and f"{baseline / 'scores.csv'} is damaged (no column" in out, out
    [new] = set((tmp_path / "runs").glob("*-allocation-*")) - {baseline}
    assert f"The new run {new} is whole: once the baseline is mended, `biasaudit compare " \
        f"{baseline} {new}` compares them" in out  # fmt: skip
    assert (new / "metrics.json").is_file()


def test_a_fanout_whose_answers_file_is_cut_short_replays_whole(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(
        f'{{"id": "p{i}", "messages": [{{"role": "user", "content": "say {i}"}}]}}\n'
        for i in range(3)
    ))  # fmt: skip
    code, out = invoke("fanout", prompts, "--model", "sim/biased", "--runs-dir", tmp_path / "runs")
    assert code == 0, out
    run = Path(out.rstrip("\n").splitlines()[-1].removeprefix("run: "))
    answers = (run / "responses.jsonl").read_bytes()
    (run / "responses.jsonl").write_bytes(answers[: len(answers) - 20])  # a kill mid-line
    code, out = invoke("replay", run)
    assert code == 1, out
    assert "at responses.jsonl (the original's cannot be read; the replay's is whole)" in out
    code, out = invoke("export", "--what", "responses", run, "-o", tmp_path / "answers.csv")
    assert code == 0 and "responses.jsonl: line 3 cannot be read" in out, out
    assert "2 rows of 1 run" in out  # the whole lines are kept
