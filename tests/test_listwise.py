"""Listwise audits end to end against the simulated model (a planted lower utility for
Black male names, a planted bonus for the candidate shown first): the run finds both
and nothing where nothing is planted; the command line, dry run, replay and report
reach the fourth kind through the registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.errors import UsageError
from biasaudit.kinds.listwise.metrics_file import ListwiseMetrics
from biasaudit.kinds.registry import run_spec
from biasaudit.replay import replay_run
from biasaudit.spec import parse_spec

FAST = {"names_per_group": 12, "pools": 60, "bootstrap": 300, "jobs": "software-engineer"}


def audit(runs_dir: Path, model: str = "sim/biased", **fields: Any) -> ListwiseMetrics:
    spec = parse_spec(
        {"task": "resume-screening", "method": "listwise", "model": model,
         "runs_dir": str(runs_dir), **FAST, **fields}
    )  # fmt: skip
    finished = run_spec(spec, command=["test"])
    assert finished.kind == "listwise" and finished.exit_code == 0
    assert isinstance(finished.metrics, ListwiseMetrics)
    return finished.metrics


@pytest.fixture(scope="module")
def biased(tmp_path_factory: pytest.TempPathFactory) -> ListwiseMetrics:
    return audit(tmp_path_factory.mktemp("runs"))


def test_the_planted_group_is_found_beyond_noise_and_no_other(biased: ListwiseMetrics) -> None:
    gaps = {g.group: g for g in biased.gaps if g.k == 1}
    assert gaps["B_M"].ci is not None and gaps["B_M"].ci[1] < 0
    beyond = {(i.category, i.value) for i in biased.impact if i.beyond_noise}
    assert ("group", "B_M") in beyond
    assert all(value == "B_M" for category, value in beyond if category == "group")
    assert biased.omnibus_p is not None and biased.omnibus_p < 0.05


def test_the_planted_position_bias_is_found(biased: ListwiseMetrics) -> None:
    first = next(s for s in biased.slots if s.slot == 1)
    assert first.ci is not None and first.ci[0] > 1 / 8
    assert biased.slot_test is not None and biased.slot_test.p < 0.001
    assert biased.slot_entropy_ci is not None and biased.slot_entropy_ci[1] < 1.0


def test_every_answer_of_the_simulated_model_is_read(biased: ListwiseMetrics) -> None:
    counts = biased.counts
    assert counts.answers == counts.ranked == 60 * 8 and counts.failed == 0
    assert counts.unread == counts.partial == counts.duplicates == counts.invented == 0
    assert biased.orders_per_pool == 8 and biased.pool_size == 8


def test_a_fair_model_shows_no_position_bias_and_no_group_beyond_noise(tmp_path: Path) -> None:
    fair = audit(tmp_path, model="sim/fair")
    assert fair.slot_entropy_ci is not None and fair.slot_entropy_ci[1] >= 0.99
    assert not [i for i in fair.impact if i.category == "group" and i.beyond_noise]


def test_top_choice_only_sampled(tmp_path: Path) -> None:
    top = audit(tmp_path, listwise="top1", scoring="samples", pools=20)
    assert top.listwise == "top1" and top.scoring == "samples" and top.k_max == 3
    assert {r.k for r in top.rates} == {1}  # an answer of one ranks no one second
    assert top.concordance is None and top.top_change is not None


def test_top_choice_from_logprobs_where_the_endpoint_gives_them(tmp_path: Path) -> None:
    """auto: each candidate's chance of being put first, from the first token."""
    top = audit(tmp_path, listwise="top1", pools=30)
    assert top.scoring == "logprobs" and top.k_max == 1 and {r.k for r in top.rates} == {1}
    gaps = {g.group: g for g in top.gaps}
    assert gaps["B_M"].ci is not None and gaps["B_M"].ci[1] < 0
    shown = pd.read_csv(next(tmp_path.glob("*-listwise-*")) / "shown.csv")
    assert shown.groupby("answer")["p_first"].sum().to_numpy() == pytest.approx(1.0)
    first = next(s for s in top.slots if s.slot == 1)
    assert first.ci is not None and first.ci[0] > 1 / 8
    with pytest.raises(UsageError, match="the endpoint gives no logprobs"):
        spec = parse_spec(
            {"task": "resume-screening", "method": "listwise", "model": "anthropic/claude-x",
             "api_key_env": "HOME", "scoring": "logprobs", "runs_dir": str(tmp_path / "no"),
             **FAST}
        )  # fmt: skip
        run_spec(spec, command=["test"])
    assert not (tmp_path / "no").exists()


def test_the_command_line_runs_listwise_and_names_methods_and_options(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["run", "resume-screening", "-m", "sim/biased", "--runs-dir", str(tmp_path),
            "--jobs", "software-engineer", "--names-per-group", "4", "--pools", "8"]  # fmt: skip
    result = runner.invoke(cli, [*base, "--method", "listwise", "--no-report"])
    assert result.exit_code == 0, result.output
    assert "impact ratios at k=1" in result.stdout and "first choice by slot" in result.stdout
    run_dir = Path(result.stdout.rstrip().splitlines()[-1].removeprefix("run: "))
    assert json.loads((run_dir / "manifest.json").read_text())["kind"] == "listwise"
    wrong = runner.invoke(cli, [*base, "--method", "listwize"])
    assert wrong.exit_code == 2
    assert "'listwize' is not one of 'pointwise', 'pairwise', 'listwise'" in wrong.stderr
    with pytest.raises(UsageError, match="field 'method': must be one of pointwise, pairwise, "
                       "listwise; got 'listwize'"):  # fmt: skip
        parse_spec({"task": "resume-screening", "method": "listwize", "model": "sim/fair"})
    other = runner.invoke(cli, [*base, "--method", "listwise", "--rounds", "100"])
    assert other.exit_code == 2
    assert (
        "field 'rounds': an option of the pointwise/pairwise method; resume-screening with "
        "method listwise does not use it" in other.stderr
    )
    assert not list((tmp_path).glob("*listwise*"))[1:]  # the refused runs wrote nothing
    dry = runner.invoke(cli, [*base, "--method", "listwise", "--dry-run"])
    assert dry.exit_code == 0 and "64" in dry.stdout  # 8 pools x 8 orders


def test_replay_rebuilds_the_run_from_the_cache(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    audit(runs, pools=10)
    original = next(runs.glob("*-listwise-*"))
    replayed = replay_run(original, runs_dir=tmp_path / "replayed", command=["test"])
    assert replayed.differences == []


def test_score_listwise_of_a_runs_own_rankings_gives_its_figures(tmp_path: Path) -> None:
    """A run's shown.csv, written as a rankings file, scores to the run's own figures."""
    runs = tmp_path / "runs"
    metrics = audit(runs, pools=20, bootstrap=200)
    shown = pd.read_csv(next(runs.glob("*-listwise-*")) / "shown.csv")
    race = {"W": "White", "B": "Black", "A": "Asian", "H": "Hispanic"}
    rankings = pd.DataFrame(
        {"pool": shown["pool"], "order": shown["answer"], "slot": shown["slot"],
         "candidate": shown["candidate"], "group": shown["group"],
         "rank": shown["rank"].map(lambda r: "" if pd.isna(r) else str(int(r))),
         "subtask": shown["subtask"], "name": shown["name"], "item": shown["item"],
         "race": shown["group"].str[0].map(race),
         "sex": shown["group"].str[2].map({"M": "male", "F": "female"})}
    )  # fmt: skip
    path = tmp_path / "rankings.csv"
    rankings.to_csv(path, index=False)
    result = CliRunner().invoke(
        cli, ["score", "listwise", str(path), "--runs-dir", str(tmp_path / "scored"),
              "--bootstrap", "200", "--no-report"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    run_dir = Path(result.stdout.rstrip().splitlines()[-1].removeprefix("run: "))
    scored = ListwiseMetrics.model_validate_json((run_dir / "metrics.json").read_text())
    assert scored.rates == metrics.rates and scored.gaps == metrics.gaps
    assert scored.impact == metrics.impact and scored.slots == metrics.slots
    assert "impact ratios at k=1" in result.stdout
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["kind"] == "listwise" and manifest["endpoint"]["provider"] == "imported"
    # its evidence: the imported rows behind the figures (no answers or prompts were sent)
    assert CliRunner().invoke(cli, ["report", str(run_dir)]).exit_code == 0
    from biasaudit.reports.evidence import read_page_data

    views = {v["id"]: v for v in read_page_data(run_dir / "evidence.html")["views"]}
    assert set(views) == {"shown"} and len(views["shown"]["rows"]) == len(shown)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("p1,1,1,c1,W_M,x", "line 3, field 'rank': 'x' is not a whole number from 1"),
        ("p1,1,2,c2,W_M,2.5", "line 3, field 'rank': '2.5' is not a whole number from 1"),
        ("p1,1,2,c1,W_M,2", "line 3, field 'candidate': 'c1' appears twice in one answer"),
        ("p1,1,,c3,W_M,2", "line 3, field 'slot': empty"),
        # impossible places: beyond the two candidates of the answer, or a rank given twice
        ("p1,1,3,c2,W_M,2", "line 3, field 'slot': 3 is beyond the 2 candidates shown"),
        ("p1,1,2,c2,W_M,5", "line 3, field 'rank': 5 is beyond the 2 candidates shown"),
        ("p1,1,2,c2,W_M,1", "line 3, field 'rank': rank 1 is given to two candidates"),
    ],
)
def test_a_malformed_rankings_file_is_named_before_anything_is_written(
    tmp_path: Path, row: str, expected: str
) -> None:
    path = tmp_path / "rankings.csv"
    path.write_text(f"pool,order,slot,candidate,group,rank\np1,1,1,c1,W_M,1\n{row}\n")
    result = CliRunner().invoke(cli, ["score", "listwise", str(path), "--runs-dir",
                                      str(tmp_path / "runs")])  # fmt: skip
    assert result.exit_code == 2 and expected in result.stderr, result.stderr
    assert not (tmp_path / "runs").exists()


def test_a_column_named_twice_is_refused_not_silently_one_of_them(tmp_path: Path) -> None:
    path = tmp_path / "rankings.csv"
    path.write_text("pool,order,slot,candidate,group,rank,group\np1,1,1,c1,W_M,1,B_F\n")
    result = CliRunner().invoke(cli, ["score", "listwise", str(path), "--runs-dir",
                                      str(tmp_path / "runs")])  # fmt: skip
    assert result.exit_code == 2
    assert "line 1, field 'group': named twice in the header" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_compare_of_two_listwise_runs_tests_and_draws_every_difference(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    audit(runs, pools=15)
    audit(runs, model="sim/fair", pools=15)
    biased = next(runs.glob("*-listwise-sim-biased-*"))
    fair = next(runs.glob("*-listwise-sim-fair-*"))
    result = CliRunner().invoke(cli, ["compare", str(biased), str(fair)])
    assert result.exit_code == 0, result.output
    assert "tests of no change" in result.stdout
    folder = next(runs.glob("*-compare-*"))
    tests = json.loads((folder / "compare.json").read_text())["tests"]
    assert {t["metric"] for t in tests} >= {"dp_gap k=1", "first choice"}
    report = (folder / "report.md").read_text()
    assert "compare_gaps.png" in report and "compare_slots.png" in report


def test_the_readme_rankings_example_scores(tmp_path: Path) -> None:
    example = Path(__file__).parent / "data" / "listwise_example.csv"
    result = CliRunner().invoke(
        cli, ["score", "listwise", str(example), "--reference-group", "W_M",
              "--runs-dir", str(tmp_path), "--no-report"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "race     Black" in result.stdout and "group    B_M" in result.stdout


def test_essays_in_every_order_of_small_random_pools(tmp_path: Path) -> None:
    spec = parse_spec(
        {"task": "essay-grading", "method": "listwise", "model": "sim/biased",
         "essays": "demo", "pool_size": 4, "orders": "all", "pools": 6, "bootstrap": 200,
         "runs_dir": str(tmp_path)}
    )  # fmt: skip
    finished = run_spec(spec, command=["test"])
    metrics = finished.metrics
    assert isinstance(metrics, ListwiseMetrics)
    assert metrics.pool_size == 4 and metrics.orders_per_pool == 24  # 4! orders
    assert metrics.counts.ranked == metrics.counts.answers == 6 * 24
    shown = pd.read_csv(finished.run_dir / "shown.csv")
    # Every order of a pool puts every essay in every slot equally often.
    per_slot = shown.groupby(["pool", "candidate"])["slot"].value_counts()
    assert set(per_slot) == {6}
    with pytest.raises(UsageError, match="orders: all asks every order of pools of 8"):
        parse_and_plan = parse_spec(
            {"task": "resume-screening", "method": "listwise", "model": "sim/biased",
             "orders": "all", "runs_dir": str(tmp_path / "no"), **FAST}
        )  # fmt: skip
        run_spec(parse_and_plan, command=["test"])
    assert not (tmp_path / "no").exists()


def test_score_listwise_takes_first_choice_chances_as_a_logprobs_run_records_them(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    metrics = audit(runs, listwise="top1", pools=12, bootstrap=200)
    assert metrics.scoring == "logprobs"
    shown = pd.read_csv(next(runs.glob("*-listwise-*")) / "shown.csv")
    rankings = pd.DataFrame(
        {"pool": shown["pool"], "order": shown["answer"], "slot": shown["slot"],
         "candidate": shown["candidate"], "group": shown["group"], "p_first": shown["p_first"],
         "subtask": shown["subtask"], "name": shown["name"], "item": shown["item"]}
    )  # fmt: skip
    path = tmp_path / "chances.csv"
    rankings.to_csv(path, index=False)
    result = CliRunner().invoke(
        cli, ["score", "listwise", str(path), "--runs-dir", str(tmp_path / "scored"),
              "--bootstrap", "200", "--category", "none", "--no-report"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    run_dir = Path(result.stdout.rstrip().splitlines()[-1].removeprefix("run: "))
    scored = ListwiseMetrics.model_validate_json((run_dir / "metrics.json").read_text())
    assert scored.scoring == "logprobs" and scored.listwise == "top1"
    assert scored.rates == metrics.rates and scored.gaps == metrics.gaps
    path.write_text("pool,order,slot,candidate,group,p_first\np1,1,1,c1,W_M,1.5\n")
    bad = CliRunner().invoke(cli, ["score", "listwise", str(path)])
    assert bad.exit_code == 2 and "field 'p_first': '1.5' is not a share in [0, 1]" in bad.stderr


def test_rankings_written_by_pandas_score_with_a_table_per_subtask(tmp_path: Path) -> None:
    """A converter that writes ranks with pandas (``2.0``, empty where unranked) is read
    as it means; with two subtasks each gets its own impact ratios and test."""
    example = pd.read_csv(Path(__file__).parent / "data" / "listwise_example.csv")
    pools = sorted(example["pool"].unique())
    example["subtask"] = example["pool"].map(
        {pool: ("nurse" if i % 2 else "welder") for i, pool in enumerate(pools)}
    )
    example.loc[example.index[:3], "rank"] = float("nan")
    path = tmp_path / "rankings.csv"
    example.to_csv(path, index=False)
    assert ",2.0," in path.read_text()
    result = CliRunner().invoke(
        cli, ["score", "listwise", str(path), "--runs-dir", str(tmp_path / "runs"),
              "--bootstrap", "200", "--no-report"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "by subtask, each from its own answers" in result.stdout
    run_dir = Path(result.stdout.rstrip().splitlines()[-1].removeprefix("run: "))
    scored = ListwiseMetrics.model_validate_json((run_dir / "metrics.json").read_text())
    assert {t.subtask for t in scored.subtask_tests} == {"nurse", "welder"}
    assert {i.subtask for i in scored.impact_by_subtask} == {"nurse", "welder"}
