"""Allocation audits end to end on the offline sim model: the planted bias must be found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from biasaudit.kinds.allocation.metrics_file import AllocationMetrics, GroupMetrics
from biasaudit.kinds.allocation.run import AuditResult, run as audit
from biasaudit.kinds.candidates.essay import DEMO_ESSAYS
from biasaudit.providers.sim import SimProvider
from biasaudit.spec import parse_spec
from biasaudit.store.runs import read_manifest, read_responses

# Small enough to run in about a second, large enough to see a shift of one logit.
FAST = {"names_per_group": 6, "rounds": 400, "bootstrap": 400, "gap_bootstrap": 60}


def run(runs_dir: Path, **fields: Any) -> AuditResult:
    spec = parse_spec(
        {
            "task": "resume-screening",
            "model": "sim/biased",
            "runs_dir": str(runs_dir),
            **FAST,
            **fields,
        }
    )
    return audit(spec)


def covers_zero(interval: list[float] | None) -> bool:
    assert interval is not None
    return interval[0] <= 0.0 <= interval[1]


@pytest.fixture(scope="module")
def pointwise(tmp_path_factory: pytest.TempPathFactory) -> AuditResult:
    return run(tmp_path_factory.mktemp("runs"))


def test_sim_biased_rabbi_finds_the_planted_group_and_only_it(pointwise: AuditResult) -> None:
    groups = pointwise.metrics.groups
    assert set(groups) == {"W_F", "B_F", "B_M", "A_F", "A_M", "H_F", "H_M"}
    b_m = groups["B_M"]
    assert b_m.rabbi is not None and b_m.rabbi < -0.2
    # Six names per group: the permutation test over names cannot go below 2/924.
    assert b_m.rabbi_ci is not None and b_m.rabbi_ci[1] < 0 and (b_m.rabbi_p or 1) < 0.01
    for group, figures in groups.items():
        if group != "B_M":
            assert covers_zero(figures.rabbi_ci), group


def test_sim_biased_selection_gaps_find_the_planted_group_and_only_it(
    pointwise: AuditResult,
) -> None:
    groups = pointwise.metrics.groups
    for k in map(str, range(1, 6)):
        assert groups["B_M"].dp_gap[k] < 0 and groups["B_M"].dp_gap_ci[k][1] < 0, k
        # Among the qualified, a top-5 of 8 takes nearly everyone: the gap shrinks as k
        # grows, and over six names its interval no longer excludes 0 at k = 5.
        assert groups["B_M"].eo_gap[k] < 0 and (k == "5" or groups["B_M"].eo_gap_ci[k][1] < 0), k
        for group, figures in groups.items():
            if group != "B_M":
                assert covers_zero(figures.dp_gap_ci[k]), (group, k)


def test_impact_ratios_flag_the_planted_group_its_race_and_nothing_else(
    pointwise: AuditResult,
) -> None:
    """sim/biased plants a lower score on Black male names: at k = 1 that group's whole
    interval lies below four-fifths, and the Black race category is below four-fifths.
    Six names per group is a smoke test, so metrics.json stores no verdict, as the table
    says "too few units to say": one verdict per figure, whatever reads it."""
    at_1 = {(r.category, r.value): r for r in pointwise.metrics.impact if r.k == 1}
    assert {c for c, _ in at_1} == {"race", "sex", "group"}
    assert len([v for c, v in at_1 if c == "group"]) == 8  # the reference is a group too
    b_m = at_1[("group", "B_M")]
    assert b_m.ci is not None and b_m.ci[1] < 0.8
    assert not any(r.beyond_noise for r in at_1.values())
    assert all(r.p_adjusted is None and r.family == "the 14 impact ratios at k=1"
               for r in at_1.values())  # fmt: skip
    assert at_1[("race", "Black")].flagged
    for row in at_1.values():
        assert row.ci is not None and row.ci[0] <= row.ratio <= row.ci[1] <= 1.0


def test_run_directory_holds_every_artifact(pointwise: AuditResult) -> None:
    run_dir = pointwise.run_dir
    assert {p.name for p in run_dir.iterdir()} == {
        "manifest.json", "prompts.jsonl.gz", "responses.jsonl", "spec.json", "scores.csv", "metrics.json"
    }  # fmt: skip
    manifest = read_manifest(run_dir)
    assert manifest.kind == "allocation" and manifest.status == "completed" and manifest.simulated
    assert manifest.counts.requests == 4 * 6 * 8 * 6 and pointwise.exit_code == 0
    scores = pd.read_csv(run_dir / "scores.csv")
    assert {
        "candidate_id",
        "group",
        "qualified",
        "name",
        "resume_id",
        "score",
        "path",
        "irregular",
    } <= set(scores.columns)
    assert len(scores) == 1152 and (scores["path"] == "logprobs").all()
    record = read_responses(run_dir)[0]
    assert record.probe == "pointwise" and record.scoring_path == "logprobs"
    assert record.label_probabilities is not None and set(record.label_probabilities) == {
        "Yes",
        "No",
    }


def test_metrics_json_has_the_design_shape(pointwise: AuditResult) -> None:
    data = json.loads((pointwise.run_dir / "metrics.json").read_text())
    assert data["schema_version"] == 5 and data["task"] == "resume-screening"
    assert (
        data["method"] == "pointwise"
        and data["model"] == "sim/biased"
        and data["simulated"] is True
    )
    assert data["reference_group"] == "W_M" and "W_M" not in data["groups"]
    b_m = data["groups"]["B_M"]
    for key in ("n", "rabbi", "rabbi_ci", "rabbi_p", "avg_gap", "jsd", "emd", "dp_gap", "eo_gap"):
        assert key in b_m, key
    assert b_m["n"] == 144 and list(b_m["dp_gap"]) == ["1", "2", "3", "4", "5"]
    assert set(data["subtasks"]) == {
        "software-engineer",
        "hr-specialist",
        "financial-analyst",
        "retail-associate",
    }
    assert data["subtasks"]["hr-specialist"]["groups"]["B_M"]["n"] == 36
    assert data["candidates"] == {
        "total": 1152,
        "scored": 1152,
        "irregular": 0,
        "unscored": 0,
        "failed": 0,
        "refused": 0,
    }
    assert data["requests"]["requests"] == 1152 and data["scoring"]["path"] == "logprobs"


def test_sampled_replicates_agree_with_logprobs_within_their_intervals(
    pointwise: AuditResult, tmp_path: Path
) -> None:
    spec = parse_spec(
        {"task": "resume-screening", "model": "sim/biased", "runs_dir": str(tmp_path), **FAST}
    )
    sampled = audit(spec, provider=SimProvider("biased", logprobs=False))
    assert sampled.metrics.scoring.path == "samples" and sampled.metrics.scoring.samples == 20
    scores = pd.read_csv(sampled.run_dir / "scores.csv")
    assert (scores["path"] == "samples").all() and (scores["answers"] == 20).all()
    assert scores["score_se"].between(0.0, 0.12).all() and scores["score_se"].max() > 0.05
    for group, by_logprobs in pointwise.metrics.groups.items():
        by_samples: GroupMetrics = sampled.metrics.groups[group]
        assert by_samples.rabbi_ci and by_logprobs.rabbi_ci
        assert by_samples.rabbi_ci[0] <= by_logprobs.rabbi_ci[1], group
        assert by_logprobs.rabbi_ci[0] <= by_samples.rabbi_ci[1], group
    assert sampled.metrics.groups["B_M"].rabbi_ci[1] < 0  # type: ignore[index]


def test_pairwise_run_finds_the_planted_group_and_reports_order_effects(tmp_path: Path) -> None:
    result = run(tmp_path, method="pairwise", pools=40, jobs="hr-specialist,retail-associate",
                 names_per_group=10)  # fmt: skip
    metrics = result.metrics
    assert (
        metrics.scoring.path == "pairwise"
        and metrics.selection
        and metrics.selection.pool == "given"
    )
    stats = metrics.pairwise
    assert stats is not None and stats.pools == 80 and stats.n_prompts == 80 * 8 * 7
    assert stats.n_pairs == 80 * 28 and stats.regular == 1.0 and stats.unparsed == 0
    assert 0 < (stats.flipped or 0) < 0.5  # the sim's position bias flips near-equal pairs
    b_m = metrics.groups["B_M"]
    assert b_m.rabbi_ci and b_m.rabbi_ci[1] < 0 and (b_m.avg_gap or 0) < 0
    comparisons = pd.read_csv(result.run_dir / "comparisons.csv")
    ordered = set(zip(comparisons["first"], comparisons["second"], strict=True))
    assert all((second, first) in ordered for first, second in ordered)
    # Impact ratios at k = 1 in the pools compared: a group's mean share of the first
    # place (ties share it), over the most selected group's.
    scores = pd.read_csv(result.run_dir / "scores.csv")
    top = scores.groupby("pool")["score"].transform("max")
    first = scores["score"] >= top - 1e-12
    share = first / first.groupby(scores["pool"]).transform("sum")
    rates = share.groupby(scores["group"]).mean()
    groups = {r.value: r for r in metrics.impact if r.category == "group"}
    assert {r.k for r in metrics.impact} == {1} and set(groups) == set(rates.index)
    for group, rate in rates.items():
        assert groups[group].rate == pytest.approx(rate)
        assert groups[group].ratio == pytest.approx(rate / rates.max())
    assert groups["B_M"].flagged


def test_essay_grading_runs_on_the_demo_corpus(tmp_path: Path) -> None:
    spec = parse_spec(
        {"task": "essay-grading", "model": "sim/fair", "essays": "demo", "runs_dir": str(tmp_path),
         "rounds": 200, "gap_bootstrap": 40, "bootstrap": 200}
    )  # fmt: skip
    metrics = audit(spec).metrics
    assert metrics.reference_group == "ENS" and set(metrics.groups) == {"CHN", "JPN", "KOR", "THA"}
    assert metrics.scoring.labels == {str(k): float(k) for k in range(1, 6)}
    assert (
        metrics.selection
        and metrics.selection.pool == "random"
        and metrics.selection.pool_size == 10
    )
    assert all(figures.n == 6 and figures.eo_gap for figures in metrics.groups.values())


def test_metrics_json_reads_back_as_the_model(pointwise: AuditResult) -> None:
    text = (pointwise.run_dir / "metrics.json").read_text()
    assert AllocationMetrics.model_validate_json(text) == pointwise.metrics


def test_essays_rated_in_part_give_dp_over_all_and_eo_over_the_rated(tmp_path: Path) -> None:
    """The paper's design: every essay is graded, only some carry a human rating."""
    corpus = pd.read_csv(DEMO_ESSAYS, dtype=str)
    corpus.loc[corpus.index % 2 == 1, "rating"] = ""  # every other essay unrated
    path = tmp_path / "essays.csv"
    corpus.to_csv(path, index=False)
    spec = parse_spec(
        {"task": "essay-grading", "model": "sim/biased", "essays": str(path), "pool_size": 6,
         "runs_dir": str(tmp_path), "rounds": 200, "gap_bootstrap": 40, "bootstrap": 200}
    )  # fmt: skip
    metrics = audit(spec).metrics
    assert metrics.candidates.scored == len(corpus)
    assert metrics.intervals is not None and metrics.intervals.units == "items"
    rated = corpus["rating"] != ""
    median = pd.to_numeric(corpus.loc[rated, "rating"]).median()
    for group, figures in metrics.groups.items():
        assert figures.n == int((corpus["group"] == group).sum())  # ΔDP: every essay
        assert figures.dp_gap and figures.eo_gap
        of_pair = corpus["group"].isin([group, "ENS"]) & rated
        qualified = pd.to_numeric(corpus.loc[of_pair, "rating"]) >= median
        assert figures.n_qualified == int(qualified.sum())  # the rated, qualified ones
    assert metrics.selection is not None and metrics.selection.qualified_appearances
