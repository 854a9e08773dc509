"""Decisions audits of the simulated model in many worlds: do the intervals cover the
planted effects, and are the null attributes flagged at their level?

Each world (``SimProvider(world=w)``) draws fresh per-person noise; the planted race
shift (-0.5 for persons described as Black), age slope (-0.1 per decade) and the
answer-order lean are the same in every world, and no gender, Asian, Hispanic or
Native American effect is planted. Each audit runs the shipped scenarios (explicit
fills, both orders) in memory on the sim, then reads its 95% intervals.

Run from the repository root:  python bench/bench_decisions_calibration.py [--worlds 200]
Prints numbers; asserts nothing. (The test suite checks the same at small size on
simulated logits, tests/metrics/test_metrics_decisions.py.)
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from datetime import date

from biasaudit.kinds.decisions.run import run
from biasaudit.kinds.decisions.spec import DecisionsSpec
from biasaudit.providers.sim import SimProvider

PLANTED = {"black": -0.5, "per 10 years": -0.1}
NULLS = ("female", "non-binary", "asian", "hispanic", "native american")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", type=int, default=200)
    parser.add_argument("--scenarios", type=int, default=12)
    args = parser.parse_args()
    covered = dict.fromkeys(PLANTED, 0)
    flagged = dict.fromkeys(NULLS, 0)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for world in range(1, args.worlds + 1):
            spec = DecisionsSpec.model_validate(
                {"model": "sim/biased", "fills": "explicit", "runs_dir": f"{folder}/runs",
                 "cache": f"{folder}/cache.sqlite", "scenario_limit": args.scenarios}
            )  # fmt: skip
            result = run(spec, provider=SimProvider("biased", world=world))
            scores = {s.level: s for s in result.metrics.fills["explicit"].scores}
            for level, planted in PLANTED.items():
                low, high = scores[level].ci or (0.0, 0.0)
                covered[level] += low <= planted <= high
            for level in NULLS:
                low, high = scores[level].ci or (0.0, 0.0)
                flagged[level] += not low <= 0.0 <= high
    took = time.perf_counter() - started
    print(f"{date.today()} on {platform.machine()} ({platform.processor() or 'cpu'}), "
          f"{args.worlds} worlds x {args.scenarios} scenarios, {took:.0f} s")  # fmt: skip
    for level, count in covered.items():
        print(f"  covers planted {level:>14}: {count / args.worlds:.3f} (95% nominal)")
    for level, count in flagged.items():
        print(f"  null {level:>16} flagged: {count / args.worlds:.3f} (5% nominal)")


if __name__ == "__main__":
    main()
