"""`biasaudit score allocation` of large imports: wall time, rows/s and peak memory.

Writes CSVs of 10^5 and 10^6 candidates (four groups, four subtasks, qualified
flags, scores on a 0-10 scale with two decimals, every candidate its own
unit: no name or item columns), runs the command on each as a user would
(report included) and prints wall time, rows per second and the child's peak
RSS. ``--coverage R`` also simulates R data sets of 30,000 candidates with no
group effect and counts how often the 95% intervals of the little bootstrap
miss 0.

Run from the repository root:  python bench/bench_score_scale.py [--rows 100000 1000000]
Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd


def write_scores(path: Path, rows: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "candidate": [f"c{i}" for i in range(rows)],
            "group": np.array(["W_M", "W_F", "B_M", "B_F"])[rng.integers(0, 4, rows)],
            "score": np.round(np.clip(rng.normal(5, 2, rows), 0, 10), 2),
            "subtask": np.array(["HR", "finance", "engineering", "sales"])[
                rng.integers(0, 4, rows)
            ],
            "qualified": np.where(rng.random(rows) < 0.5, "true", "false"),
        }
    )
    frame.to_csv(path, index=False)


def time_score(path: Path, runs: Path) -> tuple[float, float, int]:
    """Wall seconds, peak RSS of the child in MB, exit status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "biasaudit", "score", "allocation", str(path),
         "--runs-dir", str(runs)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
    return wall, max(peak, before) / 1024, done.returncode


def coverage(replications: int, n: int = 30_000) -> None:
    from biasaudit.metrics import allocation_figures

    missed = {f: 0 for f in ("rabbi", "avg_gap")}
    rng = np.random.default_rng(11)
    for done in range(replications):
        if done % 25 == 0:
            print(f"coverage: {done} of {replications} worlds", file=sys.stderr, flush=True)
        group = np.where(rng.random(n) < 0.5, "B", "W")
        score = np.round(np.clip(rng.normal(5, 2, n), 0, 10) * 2) / 2
        table = allocation_figures(
            score, group, reference="W", selection=False, n_bootstrap=1000,
            seed=int(rng.integers(2**31)),
        ).table  # fmt: skip
        for figure in missed:
            row = table[(table.figure == figure) & (table.scope == "all")].iloc[0]
            missed[figure] += not (row["low"] <= 0 <= row["high"])
    for figure, count in missed.items():
        share = count / replications
        se = (0.05 * 0.95 / replications) ** 0.5
        print(f"{figure}: 95% intervals missed 0 in {share:.1%} of {replications} (MC SE {se:.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--coverage", type=int, default=0, metavar="R")
    options = parser.parse_args()
    print(f"# {date.today()}  {platform.processor() or platform.machine()}  "
          f"{os.cpu_count()} CPUs  Python {platform.python_version()}")  # fmt: skip
    print("| rows | wall | rows/s | peak RSS |")
    print("|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as scratch:
        for rows in options.rows:
            path = Path(scratch) / f"scores_{rows}.csv"
            write_scores(path, rows)
            wall, peak, status = time_score(path, Path(scratch) / "runs")
            note = "" if status == 0 else f" (exit {status})"
            print(f"| {rows:,} | {wall:.1f} s | {rows / wall:,.0f} | {peak:,.0f} MB |{note}")
    if options.coverage:
        coverage(options.coverage)


if __name__ == "__main__":
    main()
