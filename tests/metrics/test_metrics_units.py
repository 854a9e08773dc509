"""allocation_figures: intervals and tests over names and items, one headline per group.

Each figure is checked against an independent computation (the single
metrics of ``biasaudit.metrics`` on the subtask's rows, a weighted figure
against the rows repeated), and the intervals' coverage by simulation: with
per-name effects planted and no group effect, intervals over names cover
the truth (0) about 95% of the time, and intervals over candidates do not.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from biasaudit.metrics import (
    AllocationFigures,
    allocation_figures,
    avg_score_gap,
    emd,
    headline_replicates,
    jsd,
    rank_biserial,
    rank_biserial_test,
    top_k_shares,
)
from biasaudit.metrics._crossed import _Cell, _data
from biasaudit.metrics._unit_scores import _weighted_figures
from biasaudit.metrics._unit_selection import _Selection


def screening(
    rng: np.random.Generator,
    *,
    names: int = 8,
    resumes: int = 6,
    jobs: int = 2,
    groups: tuple[str, ...] = ("W", "B"),
    name_sd: float = 0.6,
    noise: float = 0.3,
    shift: dict[tuple[str, int], float] | None = None,
) -> pd.DataFrame:
    """Every name of every group with every resume of every job; each name has its own
    effect (``name_sd``), every resume its own, and ``shift`` moves a group in a job."""
    shift = shift or {}
    name_effect = {(g, i): rng.normal(0, name_sd) for g in groups for i in range(names)}
    rows = []
    for job in range(jobs):
        resume_effect = rng.normal(0, 1, resumes)
        for r in range(resumes):
            for group in groups:
                for i in range(names):
                    score = (
                        resume_effect[r]
                        + name_effect[(group, i)]
                        + shift.get((group, job), 0.0)
                        + rng.normal(0, noise)
                    )
                    rows.append(
                        {
                            "score": score,
                            "group": group,
                            "subtask": f"job{job}",
                            "qualified": r % 2 == 0,
                            "name": f"{group}-{i}",
                            "item": f"job{job}-r{r}",
                        }
                    )
    return pd.DataFrame(rows)


def figures_of(frame: pd.DataFrame, **options: object) -> pd.DataFrame:
    return all_figures_of(frame, **options).table


def all_figures_of(frame: pd.DataFrame, **options: object) -> AllocationFigures:
    settings: dict[str, object] = {
        "reference": "W", "k_max": 1, "n_rounds": 300, "n_bootstrap": 300,
        "n_gap_bootstrap": 100, "n_permutations": 300, "n_omnibus": 39,
    }  # fmt: skip
    settings |= options
    return allocation_figures(
        frame["score"], frame["group"], subtasks=frame["subtask"],
        qualified=frame["qualified"], names=frame["name"], items=frame["item"], **settings,
    )  # fmt: skip


def one(table: pd.DataFrame, figure: str, subtask: str | None = None, **where: object) -> pd.Series:
    rows = table[(table["figure"] == figure) & (table["group"] == where.get("group", "B"))]
    rows = rows[rows["scope"] == where.get("scope", "all")]
    rows = rows[rows["subtask"].isna()] if subtask is None else rows[rows["subtask"] == subtask]
    if "k" in where:
        rows = rows[rows["k"] == where["k"]]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_each_subtask_figure_equals_the_single_metric_on_its_rows() -> None:
    frame = screening(np.random.default_rng(3))
    table = figures_of(frame, value_range=(-4.0, 4.0))
    for subtask, rows in frame.groupby("subtask"):
        a = rows.loc[rows["group"] == "B", "score"]
        b = rows.loc[rows["group"] == "W", "score"]
        expected = {
            "rabbi": rank_biserial(a, b),
            "avg_gap": avg_score_gap(a, b),
            "jsd": jsd(a, b, bins=10, value_range=(-4.0, 4.0)),
            "emd": emd(a, b),
        }
        for figure, value in expected.items():
            assert one(table, figure, subtask)["estimate"] == pytest.approx(value, abs=1e-12)


def test_the_headline_is_the_candidate_weighted_mean_of_the_subtasks() -> None:
    rng = np.random.default_rng(4)
    frame = pd.concat([screening(rng, jobs=1), screening(rng, jobs=1, resumes=2)])
    frame["subtask"] = ["big"] * (len(frame) - 2 * 2 * 8) + ["small"] * (2 * 2 * 8)
    table = figures_of(frame)
    big, small = (one(table, "rabbi", s) for s in ("big", "small"))
    headline = one(table, "rabbi")
    expected = (big["estimate"] * big["n"] + small["estimate"] * small["n"]) / (
        big["n"] + small["n"]
    )
    assert headline["estimate"] == pytest.approx(expected)
    assert headline["n"] == big["n"] + small["n"]


def test_a_group_worse_in_every_subtask_is_worse_in_the_headline_whatever_the_mix() -> None:
    """Simpson's paradox: pooled over subtasks the group looks better, as it is common in
    the subtask where everyone scores high; within each subtask it scores lower."""
    rng = np.random.default_rng(5)
    rows = []
    for subtask, level, mix in (("easy", 2.0, {"W": 4, "B": 16}), ("hard", 0.0, {"W": 16, "B": 4})):
        for group, names in mix.items():
            for i in range(names):
                for item in range(4):
                    score = level - (0.3 if group == "B" else 0.0) + rng.normal(0, 0.1)
                    rows.append(
                        {"score": score, "group": group, "subtask": subtask, "qualified": None,
                         "name": f"{subtask}-{group}-{i}", "item": f"{subtask}-{item}"}
                    )  # fmt: skip
    frame = pd.DataFrame(rows)
    pooled = rank_biserial(
        frame.loc[frame.group == "B", "score"], frame.loc[frame.group == "W", "score"]
    )
    assert pooled > 0.2
    table = figures_of(frame)
    assert one(table, "rabbi", "easy")["estimate"] < -0.9
    assert one(table, "rabbi", "hard")["estimate"] < -0.9
    assert one(table, "rabbi")["estimate"] < -0.9
    assert one(table, "dp_gap", k=1)["estimate"] < 0


def test_a_weighted_figure_equals_the_figure_of_the_rows_repeated() -> None:
    rng = np.random.default_rng(6)
    values = np.round(rng.normal(0, 1, 30), 1)  # ties, too
    cell = _Cell(np.arange(12), np.arange(12, 30))
    edges = np.linspace(-4, 4, 11)
    weights = rng.integers(0, 4, size=(5, 30)).astype(float)
    weights[:, 0] = weights[:, 12] = 1.0  # no row without a candidate
    found = _weighted_figures(values, cell, edges, weights[:, :12], weights[:, 12:])
    for row in range(5):
        counts = weights[row].astype(int)
        a = np.repeat(values[:12], counts[:12])
        b = np.repeat(values[12:], counts[12:])
        assert found["rabbi"][row] == pytest.approx(rank_biserial(a, b))
        assert found["avg_gap"][row] == pytest.approx(avg_score_gap(a, b))
        assert found["jsd"][row] == pytest.approx(jsd(a, b, bins=10, value_range=(-4, 4)))
        assert found["emd"][row] == pytest.approx(emd(a, b))


def test_qualified_figures_are_computed_on_the_qualified_candidates_only() -> None:
    frame = screening(np.random.default_rng(7), jobs=1)
    table = figures_of(frame)
    kept = frame[frame["qualified"]]
    expected = rank_biserial(
        kept.loc[kept.group == "B", "score"], kept.loc[kept.group == "W", "score"]
    )
    found = one(table, "rabbi", scope="qualified")
    assert found["estimate"] == pytest.approx(expected)
    assert found["n"] == len(kept)


def appearances(selection: _Selection, n: int) -> np.ndarray:
    """How often each of ``n`` candidates appears in one selection's pools."""
    drawn = selection._drawn(np.ones(n, dtype=np.int64), np.random.default_rng(0), None)
    return np.bincount(np.concatenate([pools.ravel() for _, pools, *_ in drawn]), minlength=n)


def test_balanced_pools_show_every_candidate_equally_often() -> None:
    frame = screening(np.random.default_rng(8), names=5, resumes=4, jobs=1)
    data = _data(frame["score"], frame["group"], "W", frame["subtask"], frame["qualified"],
                 frame["name"], frame["item"])  # fmt: skip
    selection = _Selection(data, "one_per_group", 2, n_rounds=100, k_max=1)
    shown = appearances(selection, len(frame))
    # 20 candidates per group, 100 pools: each appears 5 times, exactly.
    assert set(shown) == {5.0}
    random = _Selection(data, "random", 4, n_rounds=100, k_max=1)
    shown = appearances(random, len(frame))
    assert set(shown) == {10.0}  # 40 candidates in pools of 4: 10 pools per shuffle


@pytest.mark.parametrize(("pool", "pool_size"), [("one_per_group", 2), ("random", 5)])
def test_tallied_rates_equal_a_count_pool_by_pool_to_the_bit(pool: str, pool_size: int) -> None:
    """The tally (bins built once, shares read from a table, qualified weighted 0 or 1)
    equals adding each pool's members' shares in turn, as a plain loop does: the same
    sums, in the same order, so runs written before it replay identically."""
    frame = screening(np.random.default_rng(9), names=4, resumes=3, jobs=2)
    frame["score"] = frame["score"].round()  # ties, which share places
    frame["qualified"] = frame["qualified"].astype(object)
    frame.loc[frame.index[::7], "qualified"] = None  # some not rated at all
    data = _data(frame["score"], frame["group"], "W", frame["subtask"], frame["qualified"],
                 frame["name"], frame["item"])  # fmt: skip
    selection = _Selection(data, pool, pool_size, n_rounds=60, k_max=2)
    weights = np.random.default_rng(1).integers(0, 3, size=len(frame)).astype(np.int64)
    found = selection._tallied_rates(weights, np.random.default_rng(2))
    rng = np.random.default_rng(2)
    expected = {}
    for figure in ("selection_rate", "true_positive_rate"):
        expected[figure] = np.zeros((len(data.subtask_ids), 2, 2))
    seen = {figure: np.zeros((len(data.subtask_ids), 2)) for figure in expected}
    for subtask in range(len(data.subtask_ids)):
        pools = selection._pools(subtask, weights, data.groups, rng, True)
        for members in pools:
            shares = top_k_shares([data.values[members]], k_max=2)[0]
            for member, share in zip(members, shares, strict=True):
                group = data.groups[member]
                figures = ["selection_rate"] + ["true_positive_rate"] * bool(
                    data.qualified[member] == 1
                )
                for figure in figures:
                    seen[figure][subtask, group] += 1
                    for k in range(2):
                        expected[figure][subtask, group, k] += share[k]
    for figure, won in expected.items():
        with np.errstate(divide="ignore", invalid="ignore"):
            rates = won / seen[figure][..., None]
        np.testing.assert_array_equal(found[figure], rates)


def test_too_few_names_give_no_interval_and_few_names_are_counted() -> None:
    frame = screening(np.random.default_rng(9), names=1)
    table = figures_of(frame)
    row = one(table, "rabbi")
    assert row["units"] == 1 and row["low"] is None and row["p"] is None
    frame = screening(np.random.default_rng(9), names=3)
    row = one(figures_of(frame), "rabbi")
    assert row["units"] == 3 and row["low"] is not None


def test_intervals_of_shares_stay_within_their_range() -> None:
    frame = screening(np.random.default_rng(10), names=4, name_sd=2.0)
    table = figures_of(frame)
    shares = table[table["figure"].isin(["selection_rate", "true_positive_rate"])]
    assert (shares["low"] >= 0).all() and (shares["high"] <= 1).all()
    rabbi = table[table["figure"] == "rabbi"]
    assert (rabbi["low"] >= -1).all() and (rabbi["high"] <= 1).all()


def test_the_omnibus_test_finds_a_planted_group_and_holds_its_level_without_one() -> None:
    rng = np.random.default_rng(11)
    groups = ("W", "B", "A")
    planted = screening(rng, groups=groups, names=12, shift={("B", 0): -1.5, ("B", 1): -1.5})
    found = allocation_figures(
        planted["score"], planted["group"], reference="W", subtasks=planted["subtask"],
        names=planted["name"], items=planted["item"], k_max=1, n_rounds=200,
        n_bootstrap=50, n_gap_bootstrap=20, n_permutations=50, n_omnibus=99,
    )  # fmt: skip
    assert found.omnibus["p"].iloc[0] <= 0.02
    rejected = 0
    for seed in range(40):
        frame = screening(np.random.default_rng(100 + seed), groups=groups, names=5)
        result = allocation_figures(
            frame["score"], frame["group"], reference="W", subtasks=frame["subtask"],
            names=frame["name"], items=frame["item"], k_max=1, n_rounds=100,
            n_bootstrap=20, n_gap_bootstrap=20, n_permutations=20, n_omnibus=19, seed=seed,
        )  # fmt: skip
        rejected += result.omnibus["p"].iloc[0] <= 0.05
    assert rejected <= 6  # level 0.05 of 40: 2 expected; P(7 or more) < 0.01


def test_intervals_over_names_cover_the_truth_and_intervals_over_candidates_do_not(
    full_size: bool,
) -> None:
    """Per-name effects planted, no group effect: every population gap is 0 (120 worlds
    under ``--calibration``, 60 in the suite)."""
    covered: dict[str, list[bool]] = {}
    rejected = []
    worlds = 120 if full_size else 60
    for seed in range(worlds):
        frame = screening(np.random.default_rng(seed), names=8, name_sd=0.8)
        found = all_figures_of(frame, seed=seed)
        table = found.table
        for figure, k in (("rabbi", 0), ("avg_gap", 0), ("dp_gap", 1), ("eo_gap", 1)):
            row = one(table, figure, k=k)
            covered.setdefault(figure, []).append(row["low"] <= 0 <= row["high"])
        # No group effect: the true impact ratio of both groups is 1.
        impact = found.impact[(found.impact["k"] == 1) & (found.impact["category"] == "group")]
        lower = impact.sort_values("ratio").iloc[0]
        covered.setdefault("impact_ratio", []).append(lower["high"] >= 1 - 1e-9)
        rejected.append(one(table, "rabbi")["p"] <= 0.05)
        a = frame.loc[frame.group == "B", "score"]
        b = frame.loc[frame.group == "W", "score"]
        candidates = rank_biserial_test(a, b, n_bootstrap=200, seed=seed)
        covered.setdefault("rabbi over candidates", []).append(
            candidates.ci_low <= 0 <= candidates.ci_high
        )
    rates = {figure: float(np.mean(hits)) for figure, hits in covered.items()}
    for figure in ("rabbi", "avg_gap", "dp_gap", "eo_gap", "impact_ratio"):
        # 95% of the worlds: 3 binomial SEs below (0.88 of 120, 0.86 of 60).
        assert 0.95 - 3 * math.sqrt(0.95 * 0.05 / worlds) <= rates[figure] <= 1.0, rates
    assert rates["rabbi over candidates"] < 0.8, rates
    assert np.mean(rejected) <= 0.1


def test_headline_replicates_match_the_figures_and_pair_two_runs_by_their_weights() -> None:
    frame = screening(np.random.default_rng(12))
    table = figures_of(frame)
    columns = {"subtasks": frame["subtask"], "names": frame["name"], "items": frame["item"]}
    found, resamples = headline_replicates(
        frame["score"], frame["group"], reference="W", n_bootstrap=200, **columns
    )
    for figure in ("rabbi", "avg_gap"):
        estimate, replicates = found["B"][figure]
        assert estimate == pytest.approx(one(table, figure)["estimate"])
        assert replicates.shape == (200,) and np.isfinite(replicates).all()
    moved = frame.assign(score=frame["score"] + 0.01 * (frame["group"] == "B"))
    again, _ = headline_replicates(
        moved["score"], moved["group"], reference="W", resamples=resamples, **columns
    )
    difference = again["B"]["avg_gap"][1] - found["B"]["avg_gap"][1]
    assert difference == pytest.approx(np.full(200, 0.01))  # paired: the shift, exactly


def test_impact_ratios_pool_the_groups_of_a_category_and_divide_by_the_most_selected() -> None:
    """Per category value: its groups' headline selection rates weighted by their
    candidates, over the most selected value's; the groups themselves as 'group'."""
    rng = np.random.default_rng(11)
    groups = ("W_M", "W_F", "B_M", "B_F")
    frame = screening(rng, groups=groups, shift={("B_M", 0): -1.0, ("B_M", 1): -1.0})
    categories = {
        "race": {"W_M": "White", "W_F": "White", "B_M": "Black", "B_F": "Black"},
        "sex": {"W_M": "male", "B_M": "male", "W_F": "female", "B_F": "female"},
    }
    found = allocation_figures(
        frame["score"], frame["group"], reference="W_M", subtasks=frame["subtask"],
        qualified=frame["qualified"], names=frame["name"], items=frame["item"], k_max=2,
        n_rounds=300, n_bootstrap=200, n_gap_bootstrap=100, n_permutations=200, n_omnibus=19,
        categories=categories,
    )  # fmt: skip
    table = found.table
    headline = table[(table["figure"] == "selection_rate") & table["subtask"].isna()]
    counts = frame["group"].value_counts()
    for k in (1, 2):
        rates = headline[headline["k"] == k].set_index("group")["estimate"]
        impact = found.impact[found.impact["k"] == k]
        for category, value_of in [*categories.items(), ("group", {g: g for g in groups})]:
            pooled = {}
            for value in set(value_of.values()):
                members = [g for g in groups if value_of[g] == value]
                weights = counts[members]
                pooled[value] = float((rates[members] * weights).sum() / weights.sum())
            top = max(pooled.values())
            rows = impact[impact["category"] == category].set_index("value")
            assert set(rows.index) == set(pooled)
            for value, rate in pooled.items():
                assert rows.loc[value, "rate"] == pytest.approx(rate)
                assert rows.loc[value, "ratio"] == pytest.approx(rate / top)
                assert rows.loc[value, "flagged"] == (rate / top < 0.8)
                assert rows.loc[value, "low"] <= rows.loc[value, "ratio"] + 1e-12
                assert rows.loc[value, "high"] <= 1.0
    b_m = found.impact[(found.impact["category"] == "group") & (found.impact["k"] == 1)]
    assert bool(b_m.set_index("value").loc["B_M", "beyond_noise"])


def test_an_impact_ratio_interval_is_centred_on_its_estimate_whatever_the_strata() -> None:
    """One posting whose resumes are two qualified and four others: each resample draws
    one qualified resume and three others (n - 1 of each stratum), so the resamples'
    mix of resumes is not the audit's, and a ratio read from the top of the pools moves
    with it. The interval stays centred on the estimate (on the log scale, or on the
    ratio's own, whichever reaches further) rather than on the estimate less that shift,
    which left the estimate at one end of its own interval."""
    rng = np.random.default_rng(3)
    groups = ("W_M", "W_F", "B_M", "B_F", "A_M", "A_F", "H_M", "H_F")
    frame = screening(rng, groups=groups, names=20, jobs=1, shift={("B_M", 0): -1.0})
    frame["qualified"] = frame["item"].isin(["job0-r0", "job0-r1"])
    found = allocation_figures(
        frame["score"], frame["group"], reference="W_M", subtasks=frame["subtask"],
        qualified=frame["qualified"], names=frame["name"], items=frame["item"], k_max=1,
        n_bootstrap=50, n_gap_bootstrap=200, n_permutations=20, n_omnibus=19,
    )  # fmt: skip
    rows = found.impact[found.impact["category"] == "group"].set_index("value")
    b_m = rows.loc["B_M"]
    assert b_m["low"] < b_m["ratio"] < b_m["high"] < 0.8, b_m
    # Centred, not pushed to one side: the estimate sits well inside, each end at least a
    # quarter of the width from it (before, it was the upper end).
    width = b_m["high"] - b_m["low"]
    assert min(b_m["ratio"] - b_m["low"], b_m["high"] - b_m["ratio"]) > width / 4, b_m
