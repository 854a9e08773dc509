"""The paired tests of change (mitigation experiments, compare of runs that asked the
same units): each against an independent computation, and their level by simulation
at a small size (bench/bench_experiment.py runs the full one)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from biasaudit.metrics import paired_gap_tests, paired_test


def test_the_paired_test_is_the_paired_t_test() -> None:
    rng = np.random.default_rng(3)
    before = rng.normal(0.0, 1.0, 12)
    after = before + 0.3 + rng.normal(0.0, 0.2, 12)
    found = paired_test("score", "g", before.tolist(), after.tolist(), 0.95)
    assert found is not None
    reference = stats.ttest_rel(after, before)
    low, high = reference.confidence_interval(0.95)
    assert found.difference == pytest.approx(float(np.mean(after - before)))
    assert found.p_value == pytest.approx(reference.pvalue, rel=1e-9)
    assert found.ci == pytest.approx((low, high), rel=1e-9)
    assert found.before == pytest.approx(before.mean()) and found.after == pytest.approx(
        after.mean()
    )
    # units missing in either run are left out; fewer than two: no test
    gappy = paired_test("score", None, [1.0, float("nan"), 2.0, 4.0], [1.5, 3.0, 2.4, 4.1], 0.95)
    assert gappy is not None and "over 3 units" in gappy.method
    assert paired_test("score", None, [1.0], [2.0], 0.95) is None
    same = paired_test("score", None, [0.1, 0.2, 0.3], [0.1, 0.2, 0.3], 0.95)
    assert same is not None and same.p_value == 1.0


def _appearances(rng: np.random.Generator, names: int, pools: int, shift: float) -> pd.DataFrame:
    """Pools of one candidate per group (A the reference, B), each name with an effect
    of its own that both runs share; run b moves group B's chance by ``shift``."""
    effect = {(g, n): rng.normal(0.0, 1.0) for g in "AB" for n in range(names)}
    rows = []
    for pool in range(pools):
        for order in range(2):
            shown = {g: int(rng.integers(names)) for g in "AB"}
            for run in ("a", "b"):
                logit = {g: effect[(g, shown[g])] - (0.5 if g == "B" else 0.0)
                         + (shift if g == "B" and run == "b" else 0.0)
                         + rng.normal(0.0, 0.3) for g in "AB"}  # fmt: skip
                first = max(logit, key=lambda g: logit[g])
                for g in "AB":
                    rows.append({"answer": f"p{pool}#{order}", "run": run, "group": g,
                                 "name": f"{g}{shown[g]}", "pool": f"p{pool}",
                                 "selected": float(g == first)})  # fmt: skip
    frame = pd.DataFrame(rows)
    a = frame[frame["run"] == "a"].drop(columns="run").reset_index(drop=True)
    b = frame[frame["run"] == "b"].reset_index(drop=True)
    return a.rename(columns={"selected": "selected_a"}).assign(selected_b=b["selected"])


def test_the_paired_gap_is_the_difference_of_the_groups_differences() -> None:
    rows = _appearances(np.random.default_rng(1), names=12, pools=40, shift=1.0)
    (found,) = paired_gap_tests(rows, reference="A", metric="dp_gap k=1", confidence=0.95,
                                replicates=300)  # fmt: skip
    d = rows["selected_b"] - rows["selected_a"]
    by = d.groupby(rows["group"]).mean()
    assert found.difference == pytest.approx(by["B"] - by["A"])
    a = rows.groupby("group")["selected_a"].mean()
    assert found.before == pytest.approx(a["B"] - a["A"]) and found.group == "B"
    assert found.ci[0] < found.difference < found.ci[1]


def test_the_paired_gap_holds_its_level_and_pairs_narrower() -> None:
    """No change between the runs: the interval misses 0 about as often as it should
    (60 worlds here; the bench runs more), and it is narrower than the unpaired one."""
    rng = np.random.default_rng(7)
    missed, widths, unpaired = 0, [], []
    for _ in range(60):
        rows = _appearances(rng, names=10, pools=30, shift=0.0)
        (found,) = paired_gap_tests(rows, reference="A", metric="dp_gap k=1",
                                    confidence=0.95, replicates=200,
                                    seed=int(rng.integers(2**31)))  # fmt: skip
        missed += not found.ci[0] <= 0.0 <= found.ci[1]
        widths.append(found.ci[1] - found.ci[0])
        # the unpaired reading: each run's gap varies over its own resamples
        alone = rows.assign(selected_b=rows["selected_a"] * 0 + rows["selected_a"])
        alone["selected_a"] = 0.0
        (each,) = paired_gap_tests(alone, reference="A", metric="x", confidence=0.95,
                                   replicates=200, seed=1)  # fmt: skip
        unpaired.append(np.sqrt(2) * (each.ci[1] - each.ci[0]))
    assert missed / 60 <= 0.12
    assert np.mean(widths) < 0.9 * np.mean(unpaired)


def screening_world(rng: np.random.Generator, names: int, shift: float) -> pd.DataFrame:
    """A crossed screening audit scored under two prompts: every name with every resume of
    two jobs, each name and resume with an effect of its own that both runs share; run b
    scores each candidate afresh (its own noise) and moves group B's scores by
    ``shift`` (bench/bench_paired_selection.py draws its worlds here)."""
    rows = []
    name_effect = {(g, n): rng.normal(0.0, 0.4) for g in "WBH" for n in range(names)}
    for job in ("j1", "j2"):
        for resume in range(6):
            strong = resume < 3
            base = 3.0 + strong + rng.normal(0.0, 0.5)
            for g in "WBH":
                for n in range(names):
                    mean = base + name_effect[(g, n)] - (0.4 if g == "B" else 0.0)
                    a = mean + rng.normal(0.0, 0.3)
                    b = mean + rng.normal(0.0, 0.3) + (shift if g == "B" else 0.0)
                    rows.append({"group": g, "name": f"{g}{n}", "item": f"{job}r{resume}",
                                 "subtask": job, "qualified": strong,
                                 "a": float(np.clip(np.round(a), 1, 5)),
                                 "b": float(np.clip(np.round(b), 1, 5))})  # fmt: skip
    return pd.DataFrame(rows)


def _selection_args(frame: pd.DataFrame, seed: int) -> dict[str, object]:
    return {"reference": "W", "subtasks": frame["subtask"], "qualified": frame["qualified"],
            "names": frame["name"], "items": frame["item"], "k_max": 1, "n_rounds": 200,
            "n_gap_bootstrap": 60, "seed": seed}  # fmt: skip


def test_paired_selection_gaps_are_each_runs_own_figures() -> None:
    """Before and after are the ΔDP each run reports (allocation_figures with the same
    seed, to the bit), and run A's replicates are that run's own."""
    from biasaudit.metrics import allocation_figures, paired_selection_gaps

    frame = screening_world(np.random.default_rng(2), names=6, shift=0.5)
    args = _selection_args(frame, seed=11)
    found = paired_selection_gaps(frame["a"], frame["b"], frame["group"], **args)
    for run, column in (("before", "a"), ("after", "b")):
        table = allocation_figures(frame[column], frame["group"], **args).table
        own = table[table["figure"].isin(["dp_gap", "eo_gap"]) & table["subtask"].isna()]
        assert len(own) == 4
        for row in own.itertuples():
            assert getattr(found[(row.figure, row.group, row.k)], run) == row.estimate
    same = paired_selection_gaps(frame["a"], frame["a"], frame["group"], **args)
    assert all(np.all(gap.replicates == 0.0) for gap in same.values())
    with pytest.raises(ValueError, match="differ in length"):
        paired_selection_gaps(frame["a"], frame["b"][:-1], frame["group"], **args)


def test_paired_selection_gaps_hold_their_level_and_pair_narrower() -> None:
    """No change between the prompts (each candidate scored afresh): the paired interval
    of ΔDP's change misses 0 about as often as it should, and is narrower than the
    two runs' own intervals combined (the unpaired reading)."""
    from biasaudit.metrics import allocation_figures, critical_value, paired_selection_gaps

    rng = np.random.default_rng(5)
    worlds, missed, widths, unpaired = 40, 0, [], []
    for _ in range(worlds):
        frame = screening_world(rng, names=8, shift=0.0)
        args = _selection_args(frame, seed=int(rng.integers(2**31)))
        found = paired_selection_gaps(frame["a"], frame["b"], frame["group"], **args)
        gap = found[("dp_gap", "B", 1)]
        half = critical_value(0.95, gap.units) * gap.se
        change = gap.after - gap.before
        missed += not change - half <= 0.0 <= change + half
        widths.append(2 * half)
        each = []
        for column in ("a", "b"):
            table = allocation_figures(frame[column], frame["group"], **args).table
            row = table[(table["figure"] == "dp_gap") & table["subtask"].isna()
                        & (table["group"] == "B")].iloc[0]  # fmt: skip
            each.append((row.high - row.low) / 2)
        unpaired.append(2 * float(np.hypot(*each)))
    assert missed / worlds <= 0.125
    assert np.mean(widths) < 0.8 * np.mean(unpaired)
