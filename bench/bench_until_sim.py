"""What ``--until decided`` saves end to end: group-sequential audits of the simulated
model against the fixed-size audit their power plan recommends.

Run from the repository root (with biasaudit installed, or ``PYTHONPATH=src``)::

    python bench/bench_until_sim.py               # 40 audits a row
    python bench/bench_until_sim.py --audits 100

Every audit runs as a user's does: the task, the engine, the cache, the figures' own
intervals. The model is ``sim/biased`` with names that have their own effects
(``SimProvider(name_sd=0.5)``), one group (``B_M``) against the reference (``W_M``) on
the six software-engineer resumes, each audit in a fresh world (new names' effects, new
answers' noise). A pilot of 30 names per group, with the planted log-odds shift -0.5,
plans for D = its gap (a ΔDP of 0.166 at k=1): the fixed size for 80% power, and the
group-sequential design (five looks up to 1.1 times it). Each row plants another shift
and runs both audits: the group-sequential one (``--until decided --like PILOT``) and
the fixed-size one; the table gives the names and requests the first used, and how
often each declared a gap: means with their 95% interval over the audits, shares with
their Wilson interval; n is the audits a row.
"""

from __future__ import annotations

import argparse
import csv
import io
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from biasaudit.kinds._rounds import read_rounds
from biasaudit.kinds.allocation.power import planned
from biasaudit.kinds.allocation.run import run as audit
from biasaudit.kinds.registry import run_spec
from biasaudit.providers.sim import SimProvider
from biasaudit.spec import parse_spec

DETECT = 0.166
"""B_M's ΔDP at k=1 with the shift -0.5 (tests/test_power_calibration.py measures it)."""
FIRSTS = {"W_M": ["Greg", "Todd", "Brad", "Brett"], "B_M": ["Darnell", "Hakim", "Jamal", "Tyrone"]}


def spec_of(root: Path, **fields: Any) -> Any:
    return parse_spec({
        "task": "resume-screening", "model": "sim/biased", "jobs": "software-engineer",
        "names": str(root / "names.csv"), "reference_group": "W_M", "k_max": 1,
        "runs_dir": str(root / "runs"), "cache": str(root / "cache.sqlite"), **fields,
    })  # fmt: skip


def provider(shift: float, world: int) -> SimProvider:
    return SimProvider("biased", shift=shift, name_sd=0.5, world=world)


def rate(hits: int, runs: int) -> str:
    """A share with its 95% Wilson interval (Wilson, JASA 22, 1927)."""
    z, p = 1.96, hits / runs
    centre = (p + z * z / (2 * runs)) / (1 + z * z / runs)
    half = z * np.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs)) / (1 + z * z / runs)
    return f"{p:.0%} [{max(0.0, centre - half):.0%}, {min(1.0, centre + half):.0%}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--audits", type=int, default=40, help="Audits of each kind a row.")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        with (root / "names.csv").open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["name", "group"])
            for group, firsts in FIRSTS.items():
                writer.writerows([f"{firsts[i % 4]} Surname{i:03d}", group] for i in range(400))
        pilot = audit(spec_of(root, names_per_group=30, seed=7200),
                      provider=provider(-0.5, 7200), stderr=io.StringIO())  # fmt: skip
        like = str(pilot.run_dir)
        plan = planned(spec_of(root, names_per_group=30, like=like, detect=DETECT), 1)
        fixed = plan.models["B_M"].names_for(DETECT, 0.8)
        assert fixed is not None
        print(f"pilot: 30 names per group; the plan for D = {DETECT}: {fixed} names per group "
              f"for 80% power ({fixed * 12} requests)")  # fmt: skip
        print("| planted shift | mean names ± 95% (share of fixed) | mean requests "
              "| gap declared [95%] | fixed-size audit declares [95%] |")  # fmt: skip
        print("| ---: | ---: | ---: | ---: | ---: |")
        for shift in (0.0, -0.5, -0.8):
            used, sent, declared, fixed_declared = [], [], 0, 0
            for run in range(args.audits):
                world = 100_000 + 1000 * int(-10 * shift) + run
                result = run_spec(
                    spec_of(root, until="decided", detect=DETECT, names_per_group=3,
                            max_names=400, like=like, seed=world),
                    provider=provider(shift, world), stderr=io.StringIO(),
                )  # fmt: skip
                record = read_rounds(result.run_dir)
                assert record is not None
                last = record.rounds[-1]
                used.append(last.size)
                sent.append(record.sent)
                low, high = last.figures["B_M"].interval
                declared += low > 0 or high < 0
                other = audit(spec_of(root, names_per_group=fixed, seed=world + 500),
                              provider=provider(shift, world + 500), stderr=io.StringIO())  # fmt: skip
                low, high = other.metrics.figures["B_M"].dp_gap_ci["1"]
                fixed_declared += low > 0 or high < 0
            mean = float(np.mean(used))
            half = 1.96 * float(np.std(used, ddof=1)) / np.sqrt(args.audits)
            print(f"| {shift:+.1f} | {mean:.1f} ± {half:.1f} ({mean / fixed:.0%}) "
                  f"| {np.mean(sent):.0f} | {rate(declared, args.audits)} "
                  f"| {rate(fixed_declared, args.audits)} |")  # fmt: skip
    print(f"{args.audits} audits of each kind a row; {time.perf_counter() - started:.0f} s on "
          f"{platform.machine()}, Python {platform.python_version()}")  # fmt: skip


if __name__ == "__main__":
    main()
