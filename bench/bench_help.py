"""How long the command line takes to answer ``--help``, against a bare interpreter.

Run from the repository root with biasaudit installed::

    python bench/bench_help.py [--runs 15]

Each command is started afresh ``--runs`` times, alternating, as a new process
(what a user waits for when they type it); the table gives the minimum and the
median wall time of each, and of ``python -c pass`` in the same loop, the floor
any Python command pays. The goal (issue 31): ``biasaudit --help`` and
``biasaudit run --help`` well under a second. ``run --help`` lists every task,
so it loads each kind's spec classes (pydantic), never the metrics, numpy,
scipy or pandas: ``import biasaudit.metrics`` loads its modules on first use.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "biasaudit --help": [sys.executable, "-m", "biasaudit", "--help"],
    "biasaudit run --help": [sys.executable, "-m", "biasaudit", "run", "--help"],
    "biasaudit run resume-screening --help": [
        sys.executable, "-m", "biasaudit", "run", "resume-screening", "--help",
    ],
}  # fmt: skip

HEAVY = ("numpy", "scipy", "pandas", "matplotlib")


def heavy_modules(command: list[str]) -> list[str]:
    """The heavy libraries a command imports (its -X importtime log names them)."""
    done = subprocess.run(
        [command[0], "-X", "importtime", *command[1:]], capture_output=True, text=True, check=True
    )
    loaded = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    return [name for name in HEAVY if name in loaded]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, command in COMMANDS.items():
            started = time.perf_counter()
            subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
            times[name].append(time.perf_counter() - started)
    print(
        f"# {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{runs} runs each"
    )
    print("| command | min (s) | median (s) | heavy libraries loaded |")
    print("| --- | ---: | ---: | --- |")
    for name, found in times.items():
        heavy = ", ".join(heavy_modules(COMMANDS[name])) or "none"
        print(f"| `{name}` | {min(found):.3f} | {statistics.median(found):.3f} | {heavy} |")


if __name__ == "__main__":
    main()
