"""Interval coverage from 3 units up, for every kind: the table ``bench/RESULTS.md`` records.

Run from the repository root (with the test extra installed)::

    python bench/bench_coverage.py [--scale 0.25]

It runs the null worlds of ``tests/metrics/test_metrics_small_samples.py`` at full
size (allocation 60 worlds per size, listwise 40, Grade Score and RUTEd 2,000) and
prints, per figure and number of units, how often a 95% interval missed the truth.
A few minutes on 2 cores. The suite runs the same worlds sized down.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.metrics.test_metrics_small_samples import SIZES, allowed_misses, coverage_table  # noqa: E402  (needs the root on the path)

FULL = {"allocation": 60, "listwise": 40, "listwise_pools": 40, "grade_score": 2000, "ruted": 2000}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="worlds x this (default 1)")
    scale = parser.parse_args().scale
    worlds = {kind: max(1, round(n * scale)) for kind, n in FULL.items()}
    started = time.perf_counter()
    table = coverage_table(worlds)
    print(f"# coverage of 95% intervals; {platform.processor() or platform.machine()}, "
          f"{time.perf_counter() - started:.0f} s; worlds per size: {worlds}")  # fmt: skip
    print("| figure | " + " | ".join(f"{u} units" for u in SIZES) + " |")
    print("| --- |" + " --- |" * len(SIZES))
    figures = dict.fromkeys(figure for figure, _ in table)
    failed = False
    for figure in figures:
        cells = []
        for units in SIZES:
            n, missed, none = table.get((figure, units), (0, 0, 0))
            if n == 0:
                cells.append(f"too few ({none})")
                continue
            failed |= missed > allowed_misses(n)
            cells.append(f"{100 * missed / n:.1f}% of {n}")
        print(f"| {figure} | " + " | ".join(cells) + " |")
    return int(failed)


if __name__ == "__main__":
    raise SystemExit(main())
