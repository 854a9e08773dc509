"""Allocation's ΔDP and ΔEO change between two runs of the same candidates, paired: does
its interval cover the truth at its level, and how much narrower is it than comparing
the two runs' own intervals?

The world: a resume-screening audit, crossed (every name with every resume of two jobs),
each name and resume with an effect of its own, scored 1-5 under two prompts (run a and
run b): each candidate scored afresh under b (its own noise), and group B's scores
moved by ``--shift`` under b. A fresh world draws fresh names, resumes and noise.

The truth of each figure's change is the mean change over a population: ``--truth-worlds``
worlds of ``--truth-names`` names per group (the estimate of a large world is close to
its population value, and their mean closer still). Per world: the paired change and
its interval (:func:`biasaudit.metrics.paired_selection_gaps`, what ``compare`` and a
mitigation experiment use), and the unpaired one (the normal test on each run's own
interval, what ``compare`` did before). Reported: coverage of the truth (and of 0 for
the null, shift 0) by the paired interval, by the pigeonhole bootstrap's alone, and by
the unpaired one; the mean widths and the ratio of unpaired to paired; the change's
spread over the worlds beside its mean SE.

Run from the repository root:
    python bench/bench_paired_selection.py [--worlds 200] [--names 8] [--shift 0.6]
Prints numbers; asserts nothing. (The suite checks the level and the widths at small
size: tests/metrics/test_metrics_paired.py.)
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

from biasaudit.metrics import allocation_figures, critical_value, normal_test, paired_selection_gaps

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.metrics.test_metrics_paired import screening_world  # noqa: E402  (needs the root on the path)


def arguments(frame: pd.DataFrame, seed: int, replicates: int) -> dict[str, object]:
    return {"reference": "W", "subtasks": frame["subtask"], "qualified": frame["qualified"],
            "names": frame["name"], "items": frame["item"], "k_max": 1, "n_rounds": 300,
            "n_gap_bootstrap": replicates, "seed": seed}  # fmt: skip


FIGURES = ("dp_gap", "eo_gap")


def change(
    frame: pd.DataFrame, seed: int, replicates: int, unpaired: bool = True
) -> dict[str, float]:
    """Group B's ΔDP and ΔEO change at k = 1, paired (and unpaired, unless told not)."""
    args = arguments(frame, seed, replicates)
    found_all = paired_selection_gaps(frame["a"], frame["b"], frame["group"], **args)
    found: dict[str, float] = {}
    for figure in FIGURES:
        gap = found_all[(figure, "B", 1)]
        t = critical_value(0.95, gap.units)
        found[f"{figure}:change"] = gap.after - gap.before
        found[f"{figure}:half"] = t * gap.se
        found[f"{figure}:pigeonhole"] = t * float(np.std(gap.replicates, ddof=1))
    if not unpaired:
        return found
    tables = [allocation_figures(frame[c], frame["group"], n_bootstrap=20, n_permutations=20,
                                 **args).table for c in ("a", "b")]  # fmt: skip
    for figure in FIGURES:
        own = []
        for table in tables:
            row = table[(table["figure"] == figure) & table["subtask"].isna()
                        & (table["group"] == "B") & (table["k"] == 1)].iloc[0]  # fmt: skip
            own.append((row.estimate, (row.low, row.high)))
        test = normal_test(figure, "B", own[0][0], own[0][1], own[1][0], own[1][1], 0.95)
        assert test is not None
        found[f"{figure}:unpaired_low"], found[f"{figure}:unpaired_high"] = test.ci
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", type=int, default=200)
    parser.add_argument("--names", type=int, default=8)
    parser.add_argument("--shift", type=float, default=0.6)
    parser.add_argument("--truth-worlds", type=int, default=20)
    parser.add_argument("--truth-names", type=int, default=60)
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"# bench_paired_selection: {args.worlds} worlds of {args.names} names per group; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{date.today()}")  # fmt: skip
    print("| figure | shift | truth | paired coverage | pigeonhole alone | unpaired coverage | "
          "paired width | pigeonhole width | unpaired width | ratio | change's spread | "
          "its SE |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    t = critical_value(0.95, args.names)
    for shift in (args.shift, 0.0):
        rng = np.random.default_rng(1)
        truths = dict.fromkeys(FIGURES, 0.0)
        if shift:
            big = [change(screening_world(rng, args.truth_names, shift), int(rng.integers(2**31)),
                          20, unpaired=False) for _ in range(args.truth_worlds)]  # fmt: skip
            truths = {f: float(np.mean([b[f"{f}:change"] for b in big])) for f in FIGURES}
        frame = pd.DataFrame([
            change(screening_world(rng, args.names, shift), int(rng.integers(2**31)), 200)
            for _ in range(args.worlds)
        ])  # fmt: skip
        for figure, truth in truths.items():
            c, half = frame[f"{figure}:change"], frame[f"{figure}:half"]
            pig = frame[f"{figure}:pigeonhole"]
            low, high = frame[f"{figure}:unpaired_low"], frame[f"{figure}:unpaired_high"]
            covered = ((c - half <= truth) & (truth <= c + half)).mean()
            pigeonhole = ((c - pig <= truth) & (truth <= c + pig)).mean()
            unpaired = ((low <= truth) & (truth <= high)).mean()
            width, unpaired_width = float((2 * half).mean()), float((high - low).mean())
            print(f"| {figure} | {shift:+.2f} | {truth:+.3f} | {covered:.3f} | {pigeonhole:.3f} | "
                  f"{unpaired:.3f} | {width:.3f} | {float((2 * pig).mean()):.3f} | "
                  f"{unpaired_width:.3f} | {unpaired_width / width:.2f} | "
                  f"{float(c.std(ddof=1)):.3f} | {float(half.mean()) / t:.3f} |")  # fmt: skip
    print(f"# {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
