"""What a dry run holds: peak memory and time of ``run decisions --dry-run`` on files of
long scenario templates (about 90,000 characters each, near the 100,000 a text may
hold), 414 requests a scenario (both fills, both orders).

Since 2026-11-29 the plan is read as it is made, a chunk at a time
(``biasaudit.pricing.PLAN_CHUNK_REQUESTS`` / ``PLAN_CHUNK_TOKENS``), and a person
holds its scenario's template, filled when its prompt is made, not a filled copy:
memory should stay flat as the file grows. Each size runs in a child process (its
peak resident memory from ``getrusage``).

Run from the repository root:
    python bench/bench_plan_memory.py [--scenarios 10 60 240]
Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

FILLER = "The applicant's file runs long. " * 2_800


def scenarios_file(folder: Path, count: int) -> Path:
    path = folder / f"scenarios-{count}.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            template = f"Scenario {i}: {{who}} asks for a loan. {FILLER}Should it be approved?"
            out.write(json.dumps({"id": f"s{i}", "template": template}) + "\n")
    return path


def dry_run(path: Path, folder: Path) -> tuple[float, float, str]:
    """Seconds, peak resident MB and the dry run's first line."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-bench"}
    command = [sys.executable, "-m", "biasaudit", "run", "decisions", "--scenarios", str(path),
               "--model", "openai/gpt-4o-mini", "--dry-run", "--cache",
               str(folder / "cache.sqlite")]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of the children is the largest child so far: sizes run smallest first.
    return seconds, max(peak, before) / 1024, done.stdout.splitlines()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenarios", type=int, nargs="+", default=[10, 60, 240])
    args = parser.parse_args()
    print(f"# {date.today()}  {platform.machine()}  {os.cpu_count()} CPUs  "
          f"Python {platform.python_version()}")  # fmt: skip
    print("| scenarios | requests | prompt text planned | dry run | peak memory |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for count in sorted(args.scenarios):
            path = scenarios_file(folder, count)
            seconds, peak, line = dry_run(path, folder)
            requests = int(line.split(": ", 1)[1].split()[0])
            text = requests * (len(FILLER) + 60) / 1e9
            print(f"| {count} | {requests:,} | {text:.1f} GB | {seconds:.1f} s | {peak:,.0f} MB |")


if __name__ == "__main__":
    main()
