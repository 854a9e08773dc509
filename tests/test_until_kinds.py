"""--until in the other kinds: a listwise audit grows by pools per subtask, a Grade Score
audit by items, a RUTEd audit by replicates. Each round keeps the units of the rounds
before it, so only new ones are sent; the record names the unit; the last round
replays exactly; a confidence sequence over replicates keeps its coverage at every
look."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.kinds._rounds import RoundsRecord, read_rounds
from biasaudit.replay import replay_run


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def finished(out: str) -> tuple[Path, RoundsRecord]:
    run_dir = Path(out.strip().splitlines()[-1].removeprefix("run: "))
    record = read_rounds(run_dir)
    assert record is not None
    return run_dir, record


def only_new_units_are_sent(record: RoundsRecord) -> None:
    """Each round sends the requests it has beyond the round before, no more."""
    assert record.rounds[0].sent == record.rounds[0].requests
    for before, after in itertools.pairwise(record.rounds):
        assert after.size > before.size
        assert after.sent == after.requests - before.requests
    assert record.sent == sum(r.sent for r in record.rounds)


def test_a_listwise_audit_grows_by_nested_pools_until_precise(tmp_path: Path) -> None:
    code, out, err = invoke("run", "resume-screening", "--method", "listwise",
                            "--model", "sim/biased", "--jobs", "software-engineer",
                            "--pools", "10", "--until", "precise:0.15", "--no-report",
                            "--runs-dir", str(tmp_path))  # fmt: skip
    assert code == 0, err
    run_dir, record = finished(out)
    assert record.unit == "pools per subtask" and record.figure == "ΔDP at k=1"
    assert [r.size for r in record.rounds] == list(range(10, 10 * len(record.rounds) + 1, 10))
    assert len(record.rounds) > 1 and record.stopped.startswith("precise")
    only_new_units_are_sent(record)
    for look in record.rounds[-1].figures.values():
        assert (look.interval[1] - look.interval[0]) / 2 <= 0.15
        assert look.interval[0] < look.fixed_interval[0] and look.units == record.rounds[-1].size
    assert json.loads((run_dir / "spec.json").read_text())["pools_drawn"] == "nested"
    assert "--until precise:0.15: ΔDP at k=1 each round" in out
    assert replay_run(run_dir).differences == []


def test_nested_pools_keep_a_smaller_draw_and_the_default_draw_is_unchanged() -> None:
    from biasaudit.kinds.candidates.tasks import build_task
    from biasaudit.kinds.listwise.plan import draw_pools
    from biasaudit.spec import parse_spec

    def pools(count: int, drawn: str) -> list[tuple[str, tuple[str, ...]]]:
        spec = parse_spec({"task": "resume-screening", "method": "listwise",
                           "model": "sim/biased", "names_per_group": 5, "pools": count,
                           "pools_drawn": drawn, "jobs": "software-engineer,hr-specialist"})  # fmt: skip
        found = draw_pools(build_task(spec), spec)
        return [(p.id, tuple(c.id for c in p.members)) for p in found]

    small, large = pools(4, "nested"), pools(8, "nested")
    assert set(small) <= set(large)
    # One stream for both subtasks (how runs before 'nested' drew them): more pools of
    # the first subtask move the second subtask's pools, so rounds could not reuse them.
    before, after = pools(4, "sequence"), pools(8, "sequence")
    assert before[:4] == after[:4] and not set(before[4:]) <= set(after)


def test_a_grade_score_audit_grows_by_items_drawn_nested(tmp_path: Path) -> None:
    code, out, err = invoke("run", "grade-score", "--items", "demo", "--model", "sim/biased",
                            "--round-items", "4", "--until", "precise:0.1", "--no-report",
                            "--runs-dir", str(tmp_path))  # fmt: skip
    assert code == 0, err
    run_dir, record = finished(out)
    assert record.unit == "items" and [r.size for r in record.rounds] == [4, 8, 12, 16]
    assert record.stopped.startswith("reached the ceiling, 16 items")
    only_new_units_are_sent(record)
    ids = [
        set(json.loads(line)["id"].partition("#")[0]
            for line in (Path(r.run_dir) / "responses.jsonl").read_text().splitlines())
        for r in record.rounds
    ]  # fmt: skip
    assert all(a < b for a, b in itertools.pairwise(ids))
    assert set(record.rounds[-1].figures) == {"grade score", "entropy", "choice"}
    metrics = json.loads((Path(record.rounds[0].run_dir) / "metrics.json").read_text())
    assert "4 of the file's 16 items, drawn at random (--item-limit)" in metrics["notes"]
    assert replay_run(run_dir).differences == []


def test_grade_score_has_no_gap_to_decide(tmp_path: Path) -> None:
    code, _, err = invoke("run", "grade-score", "--items", "demo", "--model", "sim/biased",
                          "--until", "decided", "--detect", "0.1",
                          "--runs-dir", str(tmp_path / "runs"))  # fmt: skip
    assert code == 2 and "use --until precise:H" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


RUTED = ["run", "ruted", "--model", "sim/biased", "--contexts", "standard,bedtime",
         "--replicates", "10", "--mode-collapse", "off", "--no-report"]  # fmt: skip


def test_a_ruted_audit_grows_by_replicates_each_round_asking_only_for_new_ones(
    tmp_path: Path,
) -> None:
    code, out, err = invoke(*RUTED, "--until", "precise:0.06", "--max-replicates", "40",
                            "--runs-dir", str(tmp_path))  # fmt: skip
    assert code == 0, err
    run_dir, record = finished(out)
    assert record.unit == "replicates" and record.figure == "each context's skew"
    assert [r.size for r in record.rounds][:2] == [10, 20]
    only_new_units_are_sent(record)
    assert all(r.sent == 40 for r in record.rounds[1:])  # 40 occupations x one request of 10
    standard = record.rounds[-1].figures["standard"]  # logprobs: no sampling variance
    assert standard.interval[0] == standard.interval[1] == standard.estimate
    assert replay_run(run_dir).differences == []
    code, out, err = invoke(*RUTED, "--until", "decided", "--detect", "0.1",
                            "--runs-dir", str(tmp_path), "--dry-run")  # fmt: skip
    assert code == 0, err
    assert "at most 300 replicates" in out


def test_ruted_rounds_ask_their_common_step_a_request_and_the_dry_run_counts_them(
    tmp_path: Path,
) -> None:
    """30 replicates and rounds of 20: every request asks 10 (the common step), so each
    round's requests are the round before's and new ones; the dry run counts them so."""
    grown = ["run", "ruted", "--model", "sim/biased", "--contexts", "bedtime",
             "--mode-collapse", "off", "--no-report", "--replicates", "30",
             "--round-replicates", "20", "--until", "precise:0.01", "--max-replicates", "50",
             "--runs-dir", str(tmp_path)]  # fmt: skip
    code, out, err = invoke(*grown, "--dry-run")
    assert code == 0, err
    assert "40 prompts x 30 sampled answers each, asked for in 3 calls each (n = 10" in out
    assert out.splitlines()[0].startswith("dry run of sim/biased: 120 requests")
    code, out, err = invoke(*grown)
    assert code == 0, err
    run_dir, record = finished(out)
    assert [(r.size, r.sent) for r in record.rounds] == [(30, 120), (50, 80)]
    assert json.loads((run_dir / "spec.json").read_text())["per_request"] == 10


def test_a_confidence_sequence_over_replicates_covers_every_look() -> None:
    """Skews of 40 occupations grown by 10 replicates a look, up to 300: the true skew
    lies in every look's interval (the sequence read at each) in at least 95% of 400
    simulated audits, where the fixed 95% intervals, read at every look, miss far more
    often."""
    from biasaudit.metrics import sequence_multiplier, skew

    rng = np.random.default_rng(7)
    p = rng.uniform(0.2, 0.8, size=40)
    truth = float(np.mean(2 * p - 1))
    held = fixed_held = 0
    for _ in range(400):
        male = rng.random((300, 40)) < p
        ok = fixed_ok = True
        for n in range(10, 301, 10):
            # these 40 occupations held fixed: the interval over their replicates only
            found = skew(male[:n].mean(axis=0), n=np.full(40, n), over="replicates")
            se = (found.ci_high - found.ci_low) / (2 * 1.959963984540054)
            half = se * sequence_multiplier(n, target_n=150)
            ok &= abs(found.value - truth) <= half
            fixed_ok &= found.ci_low <= truth <= found.ci_high
        held += ok
        fixed_held += fixed_ok
    assert held / 400 >= 0.95
    assert fixed_held / 400 < 0.9


def test_a_rounds_record_of_the_first_version_still_reads(tmp_path: Path) -> None:
    look = {"estimate": -0.2, "interval": [-0.4, 0.0], "fixed_interval": [-0.3, -0.1],
            "names": 10}  # fmt: skip
    old = {"schema_version": 1, "until": "precise:0.1", "k": 1, "confidence": 0.95,
           "tightest_at": 50, "stopped": "precise", "sent": 10, "fixed_names": 12,
           "rounds": [{"names": 10, "run_dir": "x", "requests": 10, "sent": 10,
                       "groups": {"B_M": look}}]}  # fmt: skip
    (tmp_path / "rounds.json").write_text(json.dumps(old))
    record = read_rounds(tmp_path)
    assert record is not None and record.figure == "ΔDP at k=1" and record.fixed_size == 12
    assert record.rounds[0].size == 10 and record.rounds[0].figures["B_M"].units == 10


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--until", "precise:0.1", "--pools", "400"], "the first round, 400 pools per subtask (--pools), is above --max-pools (300)"),
     (["--until", "decided"], "--until decided needs --detect D")],
)  # fmt: skip
def test_listwise_until_that_cannot_run_is_named_before_anything_is_sent(
    tmp_path: Path, args: list[str], message: str
) -> None:
    code, _, err = invoke("run", "resume-screening", "--method", "listwise",
                          "--model", "sim/biased", *args,
                          "--runs-dir", str(tmp_path / "runs"))  # fmt: skip
    assert code == 2 and message in err, err
    assert not (tmp_path / "runs").exists()


def test_a_listwise_audit_with_a_power_plan_runs_a_group_sequential_design(
    tmp_path: Path,
) -> None:
    """With --like, the plan sizes five looks in pools per subtask, up to 1.1 times the
    pools that give 80% power for D; each look reads its O'Brien-Fleming-type boundary."""
    base = ["run", "resume-screening", "--method", "listwise", "--model", "sim/biased",
            "--jobs", "software-engineer", "--pools", "8", "--no-report",
            "--runs-dir", str(tmp_path)]  # fmt: skip
    code, out, err = invoke(*base)
    assert code == 0, err
    pilot = out.strip().splitlines()[-1].removeprefix("run: ")
    code, out, err = invoke(*base, "--until", "decided", "--detect", "0.15", "--like", pilot)
    assert code == 0, err
    _, record = finished(out)
    assert record.design == "group sequential" and record.boundaries is not None
    sizes = [r.size for r in record.rounds]
    assert sizes[0] >= 8 and sizes == sorted(set(sizes)) and len(sizes) <= 5
    assert record.fixed_size is not None and sizes[-1] <= math.ceil(1.1 * record.fixed_size)
    assert record.boundaries == sorted(record.boundaries, reverse=True)
    only_new_units_are_sent(record)


def test_a_pairwise_audit_grows_by_nested_pools_and_plans_in_pools(tmp_path: Path) -> None:
    """Pairwise pools are drawn from the candidates, so more names would redraw them all;
    a pairwise audit grows by pools per subtask instead, each round sending only its new
    pools' comparisons, and plans in the same unit."""
    base = ["run", "resume-screening", "--method", "pairwise", "--model", "sim/biased",
            "--jobs", "software-engineer", "--runs-dir", str(tmp_path)]  # fmt: skip
    code, out, err = invoke(*base, "--pools", "10", "--until", "precise:0.3", "--no-report")
    assert code == 0, err
    run_dir, record = finished(out)
    assert record.unit == "pools per subtask" and len(record.rounds) > 1
    only_new_units_are_sent(record)
    assert len({r.sent for r in record.rounds}) == 1  # 10 new pools a round
    assert json.loads((run_dir / "spec.json").read_text())["pools_drawn"] == "nested"
    assert replay_run(run_dir).differences == []
    code, out, err = invoke(*base, "--dry-run", "--detect", "0.1", "--like", str(run_dir))
    assert code == 0, err
    power = next(line for line in out.splitlines() if line.startswith("power to detect"))
    assert "SE scaled by 1/sqrt(pools per subtask)" in power
    assert any(line.startswith("  80% power: ") and " pools per subtask, " in line
               for line in out.splitlines())  # fmt: skip
