"""Issue 22's three simulations, end to end against the simulated model.

Every audit here runs as a user's does (the task, the engine, the cache, the
allocation figures' own intervals, the power plan read from a previous run, ``--until``
in rounds) against ``sim/biased`` with names that have their own effects
(``SimProvider(name_sd=0.5)``): each seeded run is a fresh world, new names' effects and
new answers' noise, on the same resumes, as a repeated audit of the task would meet.
The planted gap of ``B_M`` (a log-odds shift of -0.5) is a ΔDP at k=1 measured once
here (:data:`TRUTH_THREE`, :data:`TRUTH_TWO`); ``W_F``, with no shift, has a true ΔDP
of exactly 0 (its names and the reference's differ only by their own effects, drawn
alike).

(a) audits sized for 80% power by a pilot's plan detect the gap in 75-85% of runs;
(b) runs stopped by ``--until`` keep their coverage and their false alarms at or below
the level; (c) ``--until decided`` with a power plan spends less than the fixed-size
audit that plan recommends.

The test suite runs each sized down (a few pilots and audits: the plumbing end to end,
and rates whose Wilson interval must still hold the target); ``--calibration`` runs
them at the full size the claims rest on, as ``bench/bench_power_calibration.py`` does
(about 10 minutes on 2 cores).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from biasaudit.kinds._rounds import RoundsRecord, read_rounds
from biasaudit.kinds.allocation.power import planned
from biasaudit.kinds.allocation.run import AuditResult, run as audit
from biasaudit.kinds.registry import run_spec
from biasaudit.providers.sim import SimProvider
from biasaudit.spec import parse_spec

SHIFT = -0.5
NAME_SD = 0.5
TRUTH_THREE = {"W_F": 0.0, "B_M": -0.115}
"""ΔDP at k=1 against W_M in pools of W_M, W_F and B_M. B_M's: the mean over 90 audits
of 100 and 200 names per group in fresh worlds (SE 0.002; the estimate is unbiased at
any size: each pool's selection is an average over the groups' rows, which are
independent across groups)."""
TRUTH_TWO = -0.166
"""B_M's ΔDP at k=1 in pools of W_M and B_M alone (50 audits of 200 names, SE 0.003)."""
TRUTH_LISTWISE = -0.125
"""B_M's ΔDP at k=1 against W_M in listwise pools of W_M, W_F and B_M (one name each,
100 names per group drawn from 400): the mean over 150 audits of 200 pools in fresh
worlds (SE 0.003)."""

FIRST_NAMES = {
    "W_M": ["Greg", "Todd", "Brad", "Brett", "Jay", "Matthew", "Neil", "Geoffrey"],
    "W_F": ["Emily", "Anne", "Jill", "Allison", "Laurie", "Sarah", "Meredith", "Carrie"],
    "B_M": ["Darnell", "Hakim", "Jamal", "Jermaine", "Kareem", "Leroy", "Rasheed", "Tyrone"],
}


@dataclass(frozen=True)
class Setting:
    names: Path
    root: Path

    def spec(self, **fields: Any) -> Any:
        return parse_spec({
            "task": "resume-screening", "model": "sim/biased", "jobs": "software-engineer",
            "names": str(self.names), "reference_group": "W_M", "k_max": 1,
            "runs_dir": str(self.root / "runs"), "cache": str(self.root / "cache.sqlite"),
            **fields,
        })  # fmt: skip


def world(seed: int) -> SimProvider:
    return SimProvider("biased", shift=SHIFT, name_sd=NAME_SD, world=seed)


def setting(root: Path, groups: tuple[str, ...]) -> Setting:
    """A names file of 400 names a group (first names of the group, surnames made up)."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "names.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["name", "group"])
        for group in groups:
            firsts = FIRST_NAMES[group]
            for i in range(400):
                writer.writerow([f"{firsts[i % len(firsts)]} Surname{i:03d}", group])
    return Setting(path, root)


def run_at(where: Setting, names: int, seed: int, **fields: Any) -> AuditResult:
    spec = where.spec(names_per_group=names, seed=seed, **fields)
    return audit(spec, provider=world(seed), stderr=io.StringIO())


def run_until(where: Setting, seed: int, **fields: Any) -> RoundsRecord:
    spec = where.spec(until="decided", seed=seed, **fields)
    result = run_spec(spec, provider=world(seed), stderr=io.StringIO())
    record = read_rounds(result.run_dir)
    assert record is not None
    return record


def wilson(hits: int, runs: int) -> tuple[float, float]:
    """The Wilson 95% interval of a rate of ``hits`` in ``runs``."""
    z = 1.959964
    rate = hits / runs
    centre = (rate + z * z / (2 * runs)) / (1 + z * z / runs)
    half = z * np.sqrt(rate * (1 - rate) / runs + z * z / (4 * runs * runs)) / (1 + z * z / runs)
    return centre - half, centre + half


def gap_at_k1(result: AuditResult, group: str) -> tuple[float, list[float]]:
    found = result.metrics.groups[group]
    return found.dp_gap["1"], found.dp_gap_ci["1"]


@pytest.mark.slow
@pytest.mark.usefixtures("quick_refit")
def test_audits_planned_at_80_percent_power_detect_the_planted_gap_75_to_85_percent_of_the_time(
    tmp_path: Path, full_size: bool
) -> None:
    """(a) Eight pilots of 30 names a group each plan, from their own intervals (the
    names' and the resumes' shares fitted on halves of the names), the names that detect
    B_M's planted gap with 80% power; 20 audits of that size, each in a fresh world,
    detect it (interval excluding 0) in 75-85% of the 160 runs.

    Measured: 84% (the plans ranged from 28 to 61 names per group). Before the
    estimate's spread was measured apart from the interval's width (a bootstrap of the
    names alone), the plans read it from the interval, which is wider, and 91% of
    such audits detected the gap."""
    where = setting(tmp_path, ("W_M", "W_F", "B_M"))
    detect = abs(TRUTH_THREE["B_M"])
    detected = runs = 0
    sizes = []
    for pilot in range(8 if full_size else 1):
        like = run_at(where, 30, 7000 + pilot).run_dir
        plan = planned(where.spec(names_per_group=30, like=str(like), detect=detect), 1)
        assert plan.how.startswith("SE² = A/names + B")
        size = plan.models["B_M"].names_for(detect, 0.8)
        assert size is not None
        sizes.append(size)
        for seed in range(20 if full_size else 4):
            _, (low, high) = gap_at_k1(run_at(where, size, 8000 + 100 * pilot + seed), "B_M")
            detected += high < 0 or low > 0
            runs += 1
    if full_size:
        assert 0.75 <= detected / runs <= 0.85, (detected / runs, sizes)
    else:
        low, high = wilson(detected, runs)
        assert low <= 0.8 <= high, (detected, runs, sizes)


@pytest.mark.slow
@pytest.mark.usefixtures("quick_refit")
def test_runs_stopped_by_until_keep_their_coverage_and_false_alarm_rate(
    tmp_path: Path, full_size: bool
) -> None:
    """(b) 16 audits run until decided on the confidence sequence and 16 on the
    group-sequential design (planned from a pilot): the interval each stopped on holds
    the true gap (B_M's planted one, W_F's 0) in at least 93% of the 64; W_F, with
    no gap, is declared beyond noise in at most 5% of the runs, and B_M, whose gap is D,
    is settled as "within ±D" in at most 5%. (Measured: every interval held; neither
    error happened.)"""
    where = setting(tmp_path, ("W_M", "W_F", "B_M"))
    like = run_at(where, 30, 7100).run_dir
    held = intervals = false_alarms = false_settled = 0
    designs = set()
    detect = abs(TRUTH_THREE["B_M"])
    audits = 32 if full_size else 4
    for seed in range(audits):
        fields: dict[str, Any] = {"detect": detect, "names_per_group": 10,
                                  "round_names": 10, "max_names": 40}  # fmt: skip
        if seed % 2:
            fields["like"] = str(like)
        record = run_until(where, 60_000 + seed, **fields)
        designs.add(record.design)
        for group, look in record.rounds[-1].figures.items():
            low, high = look.interval
            held += low <= TRUTH_THREE[group] <= high
            intervals += 1
            false_alarms += group == "W_F" and (low > 0 or high < 0)
            assert look.equivalence_interval is not None
            near, far = look.equivalence_interval
            # B_M's gap is D itself: "no gap that matters" would be wrong.
            false_settled += group == "B_M" and -detect < near and far < detect
    assert designs == {"confidence sequence", "group sequential"}
    assert intervals == 2 * audits and held / intervals >= 0.93, held / intervals
    assert false_alarms <= max(1, 0.05 * audits), false_alarms
    assert false_settled <= max(1, 0.05 * audits), false_settled


@pytest.mark.slow
@pytest.mark.usefixtures("quick_refit")
def test_until_decided_spends_less_than_the_fixed_size_its_power_plan_recommends(
    tmp_path: Path, full_size: bool
) -> None:
    """(c) B_M against the reference alone, D its planted gap: the pilot's plan
    recommends a fixed size for 80% power; 30 group-sequential audits from that plan
    use fewer names and send fewer requests on average. (Measured: the plan asks for
    45 names per group, 540 requests; the audits used 43.7 and sent 524 on average and
    declared the gap in 73% of runs, where 60 fixed-size audits of 45 names declared it
    in 85%. The saving is small here because the interval, which the boundaries read,
    is wider than the estimate's spread; see the README.)"""
    where = setting(tmp_path, ("W_M", "B_M"))
    detect = abs(TRUTH_TWO)
    like = run_at(where, 30, 7200).run_dir
    plan = planned(where.spec(names_per_group=30, like=str(like), detect=detect), 1)
    fixed = plan.models["B_M"].names_for(detect, 0.8)
    assert fixed is not None
    used, sent, declared = [], [], 0
    audits = 30 if full_size else 4
    for seed in range(audits):
        record = run_until(where, 90_000 + seed, detect=detect, names_per_group=3,
                           max_names=400, like=str(like))  # fmt: skip
        assert record.design == "group sequential"
        last = record.rounds[-1]
        used.append(last.size)
        sent.append(record.sent)
        declared += last.figures["B_M"].interval[1] < 0
    fixed_requests = fixed * 2 * 6  # names x groups x resumes, every one sent once
    if full_size:
        assert float(np.mean(used)) < fixed, (used, fixed)
        assert float(np.mean(sent)) < fixed_requests
        assert declared / audits >= 0.6, declared
    else:  # the saving is a few percent: 4 audits show the design at work, not the saving
        assert float(np.mean(used)) < 1.5 * fixed, (used, fixed)
        assert wilson(declared, audits)[1] >= 0.6, declared


@pytest.mark.slow
def test_listwise_audits_planned_at_80_percent_power_detect_the_gap_about_as_often(
    tmp_path: Path, full_size: bool
) -> None:
    """(a) for listwise audits: eight pilots of 30 pools each plan, from their own
    intervals (SE scaled by 1/sqrt(pools), the power averaged over the uncertainty of
    the pilot's variance on 29 degrees of freedom), the pools that detect B_M's gap with
    80% power; 15 audits of that size, each in a fresh world, detect it about as often:
    the rate's Wilson 95% interval over the 120 runs holds 80%.

    Measured: 74% (89 of 120, Wilson 66-81%); the plans ranged from 84 to 168 pools,
    and the z-test's power at those sizes, with the spread measured over 30 audits of
    100 pools, averages 78%. With the pilot's variance plugged in, the plans were 6%
    smaller and 73% detected the gap."""
    from biasaudit.kinds.listwise.power import planned as listwise_planned

    where = setting(tmp_path, ("W_M", "W_F", "B_M"))
    detect = abs(TRUTH_LISTWISE)

    def gap(pools: int, seed: int, **fields: Any) -> tuple[Path, list[float]]:
        spec = where.spec(method="listwise", names_per_group=100, pools=pools, seed=seed,
                          bootstrap=400, **fields)  # fmt: skip
        ran = run_spec(spec, provider=world(seed), stderr=io.StringIO())
        found = next(g for g in ran.metrics.gaps if g.group == "B_M" and g.k == 1)
        assert found.ci is not None
        return ran.run_dir, found.ci

    detected = runs = 0
    sizes = []
    for pilot in range(8 if full_size else 1):
        like, _ = gap(30, 300 + pilot)
        plan = listwise_planned(where.spec(method="listwise", names_per_group=100, pools=30,
                                           like=str(like), detect=detect), 1)  # fmt: skip
        size = plan.models["B_M"].names_for(detect, 0.8)
        assert size is not None
        sizes.append(size)
        for seed in range(15 if full_size else 3):
            low, high = gap(size, 40_000 + 100 * pilot + seed)[1]
            detected += high < 0 or low > 0
            runs += 1
    low, high = wilson(detected, runs)
    assert low <= 0.8 <= high, (detected, runs, sizes)
