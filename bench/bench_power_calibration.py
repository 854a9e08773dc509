"""The power and --until calibrations at the full size their claims rest on.

Run from the repository root (with the test extra installed)::

    python bench/bench_power_calibration.py

It runs ``tests/test_power_calibration.py`` with ``--calibration``: (a) 8 pilots of
30 names a group, 20 audits of each plan's size (160 runs), detection between 75%
and 85% for a plan at 80% power; (b) 32 audits by ``--until decided``, coverage and
false alarms; (c) 30 group-sequential audits against the plan's fixed size; and the
listwise (a), 8 pilots x 15 audits; the plan-at-80% check of the metrics (4 pilots x
60 audits) and the listwise intervals' coverage (120 audits). About 12 minutes on 2
cores. The test suite runs each sized down (a few pilots and audits).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    files = ["tests/test_power_calibration.py", "tests/metrics/test_metrics_power.py",
             "tests/metrics/test_metrics_listwise.py"]  # fmt: skip
    command = [sys.executable, "-m", "pytest", "-q", "--calibration", "-p", "no:cacheprovider",
               "--durations=0", *(str(ROOT / f) for f in files)]  # fmt: skip
    print("$", " ".join(command), flush=True)
    return subprocess.call(command, cwd=ROOT)


if __name__ == "__main__":
    raise SystemExit(main())
