"""What stopping when the answer is known saves: group-sequential audits against the
fixed-size audit the power analysis recommends.

Run from the repository root (with biasaudit installed, or ``PYTHONPATH=src``)::

    python bench/bench_until.py            # 2,000 simulated audits per row
    python bench/bench_until.py --audits 500

One comparison (a group against the reference), names with their own effects (the
estimate of a gap is the difference of the two groups' mean name scores, SD 0.55 a
name), the smallest gap worth detecting D = 0.2. The fixed-size audit has the names
per group that give 80% power for D. The group-sequential audit (``--until decided``
with a power plan) looks five times, up to 1.1 times that size, each look on its
O'Brien-Fleming-type boundary (``biasaudit.metrics.spending_boundaries``, read on the t
scale of the look's names as the audit does: ``biasaudit.metrics.t_boundary``), and stops
when the repeated interval excludes 0 or lies within ±D. For each true gap the table
gives the mean names per group it used (as a share of the fixed size), how often it
declared a gap, and how often the interval it stopped on held the true gap; beside
them, how often the fixed-size audit declares a gap.
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import numpy as np
from scipy import stats

from biasaudit.metrics import spending_boundaries, t_boundary

SPREAD = 0.55
DETECT = 0.2


def audit(gap: float, seed: int, most: int, bounds: list[float]) -> tuple[int, bool, bool]:
    rng = np.random.default_rng(seed)
    reference, group = rng.normal(0, SPREAD, most), gap + rng.normal(0, SPREAD, most)
    sizes = [math.ceil(most * j / 5) for j in range(1, 6)]
    for n, bound in zip(sizes, bounds, strict=True):
        a, b = group[:n], reference[:n]
        estimate = a.mean() - b.mean()
        half = t_boundary(bound, n - 1) * math.sqrt(a.var(ddof=1) / n + b.var(ddof=1) / n)
        low, high = estimate - half, estimate + half
        if low > 0 or high < 0 or (low > -DETECT and high < DETECT):
            break
    return n, bool(low > 0 or high < 0), bool(low <= gap <= high)


def fixed_detects(gap: float, seed: int, n: int) -> bool:
    rng = np.random.default_rng(seed)
    a, b = gap + rng.normal(0, SPREAD, n), rng.normal(0, SPREAD, n)
    se = math.sqrt(a.var(ddof=1) / n + b.var(ddof=1) / n)
    return bool(abs(a.mean() - b.mean()) > stats.norm.ppf(0.975) * se)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--audits", type=int, default=2000, help="Simulated audits per row.")
    args = parser.parse_args()
    z = stats.norm.ppf(0.975)
    fixed = math.ceil((SPREAD * math.sqrt(2) * (z + stats.norm.ppf(0.8)) / DETECT) ** 2)
    most = math.ceil(1.1 * fixed)
    sizes = [math.ceil(most * j / 5) for j in range(1, 6)]
    bounds = spending_boundaries([n / most for n in sizes])
    started = time.perf_counter()
    print(f"fixed size for 80% power at D = {DETECT}: {fixed} names per group; sequential: "
          f"looks at {sizes}, boundaries {[round(b, 2) for b in bounds]}")  # fmt: skip
    print("| true gap | mean names (share of fixed) | gap declared | interval held the truth "
          "| fixed-size audit declares |")  # fmt: skip
    print("| ---: | ---: | ---: | ---: | ---: |")
    for gap in (0.0, DETECT / 2, DETECT, 1.5 * DETECT):
        runs = [audit(gap, seed, most, bounds) for seed in range(args.audits)]
        mean = float(np.mean([n for n, _, _ in runs]))
        declared = float(np.mean([found for _, found, _ in runs]))
        held = float(np.mean([ok for _, _, ok in runs]))
        fixed_rate = float(np.mean([fixed_detects(gap, 10**6 + s, fixed)
                                    for s in range(args.audits)]))  # fmt: skip
        print(f"| {gap:.2f} | {mean:.1f} ({mean / fixed:.0%}) | {declared:.1%} | {held:.1%} "
              f"| {fixed_rate:.1%} |")  # fmt: skip
    print(
        f"{args.audits} audits a row; {time.perf_counter() - started:.1f} s on "
        f"{platform.machine()}, Python {platform.python_version()}"
    )


if __name__ == "__main__":
    main()
