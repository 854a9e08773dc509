"""--until: a resume-screening audit that grows by names until every group's answer is
known, on intervals valid at every look; each round pays only for its new names; the
record says why it stopped and what a fixed-size audit would have cost; the last round
replays exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from scipy import stats

from biasaudit.cli import cli
from biasaudit.kinds._rounds import read_rounds
from biasaudit.metrics import critical_value, sequence_interval
from biasaudit.replay import replay_run

BASE = ["run", "resume-screening", "--model", "sim/biased", "--jobs", "software-engineer",
        "--names-per-group", "5", "--no-report"]  # fmt: skip


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def last_run(out: str) -> Path:
    return Path(out.strip().splitlines()[-1].removeprefix("run: "))


def test_until_decided_grows_by_new_names_and_stops_when_every_group_is_settled(
    tmp_path: Path,
) -> None:
    code, out, err = invoke(*BASE, "--until", "decided", "--detect", "0.1", "--max-names", "60",
                            "--runs-dir", str(tmp_path))  # fmt: skip
    assert code == 0, err
    run_dir = last_run(out)
    record = read_rounds(run_dir)
    assert record is not None and record.stopped.startswith("decided")
    assert [r.size for r in record.rounds] == list(range(5, 5 * len(record.rounds) + 1, 5))
    per_round = 5 * 8 * 6  # new names x groups x resumes: earlier names come from the cache
    assert all(r.sent == per_round for r in record.rounds) and record.sent == per_round * len(
        record.rounds
    )
    last = record.rounds[-1]
    assert record.equivalence_confidence == pytest.approx(0.9)
    for look in last.figures.values():  # the rule held at the last look, on the sequence
        low, high = look.interval
        assert look.equivalence_interval is not None
        near, far = look.equivalence_interval
        assert low < near and far < high  # 90% against 95%, both valid at every look
        assert low > 0 or high < 0 or (near > -0.1 and far < 0.1)
        half = (look.fixed_interval[1] - look.fixed_interval[0]) / 2
        assert (high - low) / 2 > half  # wider than the fixed-size interval
    # B_M carries the planted bias: its gap is declared, beyond noise.
    assert last.figures["B_M"].interval[1] < 0
    earlier = record.rounds[-2]
    assert any(not (g.interval[0] > 0 or g.interval[1] < 0
                    or (g.equivalence_interval[0] > -0.1 and g.equivalence_interval[1] < 0.1))
               for g in earlier.figures.values() if g.equivalence_interval)  # fmt: skip
    assert record.fixed_size is not None and record.fixed_requests is not None
    assert "--until decided: ΔDP at k=1 each round" in out
    assert f"stopped: {record.stopped}; {record.sent} requests sent in all" in out
    replayed = replay_run(run_dir)
    assert replayed.differences == []


def test_the_report_of_a_run_in_rounds_opens_with_them_and_says_which_intervals_hold(
    tmp_path: Path,
) -> None:
    code, out, err = invoke(*BASE[:-1], "--until", "precise:0.001", "--max-names", "10",
                            "--runs-dir", str(tmp_path))  # fmt: skip
    assert code == 0, err
    assert "the intervals above are the last round's own, for its size alone" in out
    report = (last_run(out) / "report.md").read_text(encoding="utf-8")
    sections = [line for line in report.splitlines() if line.startswith("## ")]
    assert sections[0].startswith("## Rounds (--until)")
    assert "do not allow for the looks taken on the way" in report
    assert "reached the ceiling, 10 names per group (--max-names)" in report


def test_until_precise_stops_at_the_width_or_at_max_names(tmp_path: Path) -> None:
    code, out, err = invoke(*BASE, "--until", "precise:0.5", "--runs-dir", str(tmp_path))
    assert code == 0, err
    record = read_rounds(last_run(out))
    assert record is not None and len(record.rounds) == 1  # ±0.5 holds at once
    assert record.stopped.startswith("precise")
    code, out, err = invoke(*BASE, "--until", "precise:0.001", "--max-names", "10",
                            "--runs-dir", str(tmp_path / "b"))  # fmt: skip
    assert code == 0, err
    record = read_rounds(last_run(out))
    assert record is not None and record.stopped == (
        "reached the ceiling, 10 names per group (--max-names), before the rule held"
    )
    assert [r.size for r in record.rounds] == [5, 10]
    look = record.rounds[-1].figures["B_M"]
    # The run's own interval is Student t over the names behind the gap: its SE read back so.
    own = critical_value(0.95, look.interval_units)
    assert look.interval_units == look.units
    assert look.interval == pytest.approx(
        list(sequence_interval(look.estimate, (look.fixed_interval[1] - look.fixed_interval[0])
                               / 2 / own, look.units, target_n=record.tightest_at))
    )  # fmt: skip
    json.loads((last_run(out) / "rounds.json").read_text())


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--until", "decided"], "--until decided needs --detect D"),
     (["--until", "soon"], "field 'until': must be 'decided' or 'precise:H'"),
     (["--until", "precise:0.1", "--max-names", "3"],
      "the first round, 5 names per group (--names-per-group), is above --max-names (3)"),
     (["--until", "decided", "--detect", "0.1", "--confidence", "0.5"],
      "--until decided needs --confidence above 0.5")],
)  # fmt: skip
def test_until_that_cannot_run_is_named_before_anything_is_sent(
    tmp_path: Path, args: list[str], message: str
) -> None:
    code, _, err = invoke(*BASE, *args, "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and message in err, err
    assert not (tmp_path / "runs").exists()


def test_a_file_with_fewer_candidates_than_the_default_first_round_is_named(
    tmp_path: Path,
) -> None:
    """--until starts a file's audit at 10 candidates per group unless told: with fewer in
    the file (6 a group in the demo), the refusal names that first round and its flag,
    which the user never typed, and how to start lower."""
    code, _, err = invoke("run", "essay-grading", "--essays", "demo", "--model", "sim/biased",
                          "--until", "precise:0.1", "--runs-dir", str(tmp_path / "runs"))  # fmt: skip
    assert code == 2, err
    assert "the first round, 10 candidates per group (--candidates-per-group), is above" in err
    assert "(6): start from fewer with --candidates-per-group" in err
    assert not (tmp_path / "runs").exists()


def test_a_task_of_candidates_from_a_file_grows_by_candidates_per_group(tmp_path: Path) -> None:
    """Essays have no names to add: a pointwise essay audit grows by essays per group,
    drawn nested from the file, up to the most a group has (6 in the demo)."""
    from biasaudit.kinds.candidates.tasks import build_task
    from biasaudit.spec import parse_spec

    code, out, err = invoke("run", "essay-grading", "--essays", "demo", "--model", "sim/biased",
                            "--until", "precise:0.01", "--candidates-per-group", "2",
                            "--runs-dir", str(tmp_path), "--no-report")  # fmt: skip
    assert code == 0, err
    record = read_rounds(last_run(out))
    assert record is not None and record.unit == "candidates per group"
    assert [r.size for r in record.rounds] == [2, 4, 6]
    assert [r.sent for r in record.rounds] == [10, 10, 10]  # 5 groups x 2 new essays
    assert record.stopped.startswith("reached the ceiling, 6 candidates per group")

    def drawn(n: int) -> set[str]:
        spec = parse_spec({"task": "essay-grading", "essays": "demo", "model": "sim/biased",
                           "candidates_per_group": n})  # fmt: skip
        return {c.id for c in build_task(spec).candidates}

    assert drawn(2) < drawn(4) < drawn(6) and len(drawn(4)) == 20


def test_a_dry_run_of_until_gives_the_ceiling_of_its_rounds(tmp_path: Path) -> None:
    code, out, err = invoke(*BASE, "--until", "decided", "--detect", "0.1", "--max-names", "60",
                            "--runs-dir", str(tmp_path), "--dry-run")  # fmt: skip
    assert code == 0, err
    assert out.splitlines()[0].startswith("dry run of sim/biased: 240 requests")
    ceiling = next(line for line in out.splitlines() if line.startswith("--until decided"))
    assert "at most 60 names per group: 2880 requests" in ceiling


@pytest.mark.usefixtures("quick_refit")
def test_until_decided_with_a_power_plan_runs_a_group_sequential_design(tmp_path: Path) -> None:
    """With --like, the power analysis sizes the design: five looks up to 1.1 times the
    names that give 80% power for D, each read on its O'Brien-Fleming-type boundary."""
    from biasaudit.metrics import spending_boundaries

    code, out, err = invoke(*BASE, "--names-per-group", "6", "--runs-dir", str(tmp_path))
    assert code == 0, err
    pilot = last_run(out)
    code, out, err = invoke(*BASE, "--names-per-group", "6", "--until", "decided",
                            "--detect", "0.2", "--like", str(pilot),
                            "--runs-dir", str(tmp_path))  # fmt: skip
    assert code == 0, err
    record = read_rounds(last_run(out))
    assert record is not None and record.design == "group sequential"
    sizes = [r.size for r in record.rounds]
    assert sizes == sorted(set(sizes)) and len(sizes) <= 5
    assert record.boundaries is not None and record.boundaries == sorted(
        record.boundaries, reverse=True
    )
    assert "group-sequential boundaries" in out
    # The fixed size compared with is the plan's, and the last look is 1.1 times it.
    assert record.fixed_size is not None and sizes[-1] <= -(-11 * record.fixed_size // 10)
    for look, bound in zip(record.rounds, record.boundaries, strict=False):
        for found in look.figures.values():  # the boundary on the t scale of the look's names
            fixed_half = (found.fixed_interval[1] - found.fixed_interval[0]) / 2
            times = float(stats.t.ppf(stats.norm.cdf(bound), found.units - 1))
            assert found.multiplier == pytest.approx(times) and times > bound
            # the run's own interval is t over the units behind the gap; both within ±1
            own = critical_value(0.95, found.interval_units)
            assert found.interval_units == found.units
            half = fixed_half * times / own
            expected = [max(-1.0, found.estimate - half), min(1.0, found.estimate + half)]
            assert found.interval == pytest.approx(expected, rel=1e-6)
    last = record.boundaries[-1]
    assert 1.96 < last < 2.2
    assert spending_boundaries([1.0])[0] < last
    # Replay runs every round again from the cache, on the design as recorded: the
    # pilot it was planned from is not needed.
    import shutil

    shutil.rmtree(pilot)
    run_dir = last_run(out)
    replayed = replay_run(run_dir)
    assert replayed.differences == []
    again = read_rounds(replayed.run_dir)
    assert again is not None and again.sent == 0
    assert [r.size for r in again.rounds] == sizes and again.stopped == record.stopped


def test_a_replay_checks_the_rounds_as_well(tmp_path: Path) -> None:
    """A record whose stop or figures the cache does not reproduce is named."""
    code, out, err = invoke(*BASE, "--until", "precise:0.3", "--runs-dir", str(tmp_path))
    assert code == 0, err
    run_dir = last_run(out)
    record = read_rounds(run_dir)
    assert record is not None and record.spec is not None and record.spec["until"]
    forged = record.model_copy(update={"stopped": "precise: forged"})
    (run_dir / "rounds.json").write_text(forged.model_dump_json(), encoding="utf-8")
    assert replay_run(run_dir).differences == ["rounds.json: stopped"]


def test_a_precise_fixed_size_allows_for_its_t_and_older_records_replay_as_they_were(
    tmp_path: Path,
) -> None:
    """The fixed-size audit "of the same precision" is the smallest size whose own
    intervals, with the Student t of the names they would have, are within ±H (the
    normal quantile alone names too few where names are few); a record from before
    (no quantile recorded: the normal's size) replays to its own size, unchanged."""
    code, out, err = invoke(*BASE, "--until", "precise:0.3", "--runs-dir", str(tmp_path))
    assert code == 0, err
    run_dir = last_run(out)
    record = read_rounds(run_dir)
    assert record is not None and record.fixed_size is not None
    assert record.fixed_size_quantile == "student t"
    last = record.rounds[-1]
    z = stats.norm.ppf(0.975)

    def widest(size: int, *, t: bool) -> float:
        """The widest half-width over the figures at ``size`` names per group."""
        found = []
        for look in last.figures.values():
            assert look.interval_units is not None
            half = (look.fixed_interval[1] - look.fixed_interval[0]) / 2
            sd = half / stats.t.ppf(0.975, look.interval_units - 1) * last.size**0.5
            units = max(2, round(size * look.interval_units / last.size))
            found.append((stats.t.ppf(0.975, units - 1) if t else z) * sd / size**0.5)
        return max(found)

    size = record.fixed_size
    assert widest(size, t=True) <= 0.3 and (size == 2 or widest(size - 1, t=True) > 0.3)
    normal = 2
    while widest(normal, t=False) > 0.3:
        normal += 1
    assert normal < size  # t asks for more where names are few
    older = record.model_copy(update={
        "fixed_size_quantile": None, "fixed_size": normal,
        "fixed_requests": -(-last.requests * normal // last.size),
    })  # fmt: skip
    (run_dir / "rounds.json").write_text(older.model_dump_json(), encoding="utf-8")
    assert replay_run(run_dir).differences == []


def test_a_round_stopped_by_the_budget_leaves_the_rounds_before_it_recorded(
    tmp_path: Path,
) -> None:
    """--max-cost is the ceiling of every round together: the round it stops is kept as a
    partial run, and the round before records every round and why the audit stopped."""
    import io

    from biasaudit.errors import RunAbortedError
    from biasaudit.kinds.registry import run_spec
    from biasaudit.pricing import BudgetedProvider, ModelPrice
    from biasaudit.providers.sim import SimProvider
    from biasaudit.spec import parse_spec

    def spec(where: str) -> Any:
        return parse_spec({"task": "resume-screening", "model": "sim/biased",
                           "jobs": "software-engineer", "names_per_group": 5,
                           "until": "precise:0.001", "max_names": 20,
                           "runs_dir": str(tmp_path / where),
                           "cache": str(tmp_path / where / "cache.sqlite")})  # fmt: skip

    price = ModelPrice(input=1.0, output=1.0)
    probe = BudgetedProvider(SimProvider("biased"), price, max_cost=1e9)
    run_spec(spec("probe").model_copy(update={"until": None}), provider=probe)
    budgeted = BudgetedProvider(SimProvider("biased"), price, max_cost=1.5 * probe.spent)
    stderr = io.StringIO()
    with pytest.raises(RunAbortedError, match="--max-cost"):
        run_spec(spec("runs"), provider=budgeted, stderr=stderr)
    recorded = [d for d in (tmp_path / "runs").iterdir() if (d / "rounds.json").is_file()]
    assert len(recorded) == 1
    record = read_rounds(recorded[0])
    assert record is not None and [r.size for r in record.rounds] == [5]
    assert record.stopped.startswith("round 2 (10 names per group) stopped: run stopped: ")
    assert f"the rounds before it: {recorded[0] / 'rounds.json'}" in stderr.getvalue()
    # The same audit again, unbudgeted, fills the cache with every round; a replay of the
    # stopped one still stops where it did, and reproduces it.
    run_spec(spec("runs"))
    replayed = replay_run(recorded[0])
    assert replayed.differences == []
    again = read_rounds(replayed.run_dir)
    assert again is not None and [r.size for r in again.rounds] == [5]
    assert again.stopped == record.stopped


def test_a_damaged_rounds_record_is_named_not_a_traceback(tmp_path: Path) -> None:
    code, out, err = invoke(*BASE, "--until", "precise:0.5", "--runs-dir", str(tmp_path))
    assert code == 0, err
    run_dir = last_run(out)
    (run_dir / "rounds.json").write_text('{"until": "precise:0.5", "rounds": [', encoding="utf-8")
    code, out, err = invoke("replay", str(run_dir))
    assert code == 2 and "rounds.json is damaged (not JSON: cut short, or edited)" in err
    assert "replay needs it: restore it from a copy" in err
    assert "Traceback" not in err
    code, out, err = invoke("report", str(run_dir))
    assert code == 0, err
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "rounds.json is damaged" in report and "its rounds are left out" in report
