"""`biasaudit ll144` of an employer's file: wall time, rows/s and peak memory.

Writes CSVs of 10^5 and 10^6 people (sex, race/ethnicity in short forms and a few
declined, a 0/1 outcome), runs the command on each as a user would (all four files
written) and prints wall time, rows per second and the child's peak RSS.

Run from the repository root:  python bench/bench_ll144.py [--rows 100000 1000000]
Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

RACES = ["White", "Black", "Hispanic", "Asian", "Two or more", "Declined", "Native American",
         "NHPI"]  # fmt: skip


def write_people(path: Path, rows: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    pd.DataFrame(
        {
            "sex": rng.choice(["M", "F", ""], rows, p=[0.49, 0.49, 0.02]),
            "race": rng.choice(RACES, rows),
            "selected": rng.integers(0, 2, rows),
        }
    ).to_csv(path, index=False)


def run(path: Path, out: Path) -> tuple[float, int]:
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "biasaudit", "ll144", str(path), "--out", str(out)],
        stdout=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"biasaudit ll144 failed on {path}")
    return time.perf_counter() - started, usage.ru_maxrss // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    args = parser.parse_args()
    print(f"# {date.today()}  {platform.machine()}  {os.cpu_count()} CPUs  "
          f"Python {platform.python_version()}")  # fmt: skip
    print("| rows | wall | rows/s | peak RSS |\n|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for rows in args.rows:
            path = Path(folder) / f"people-{rows}.csv"
            write_people(path, rows)
            wall, peak = run(path, Path(folder) / f"out-{rows}")
            print(f"| {rows:,} | {wall:.1f} s | {rows / wall:,.0f} | {peak:,} MB |")


if __name__ == "__main__":
    main()
