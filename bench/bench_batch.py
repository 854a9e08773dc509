"""A 20,160-prompt resume-screening audit through ``--batch``, killed and restarted, vs the normal path.

The bar of issue 10: against the loopback OpenAI server (a separate process,
Batch API included, answers varying by prompt: ``--responder hashed``),

1. ``biasaudit run resume-screening --batch`` with 105 names per group
   (4 jobs x 6 resumes x 8 groups x 105 names = 20,160 pointwise prompts) is
   killed with SIGKILL once its batch id is recorded, before the results;
2. the same command again picks the pending batch up and completes: the
   server's log must show exactly one batch created and no direct request;
3. the same audit through the normal path (its own cache);
4. the two runs' metrics.json (groups, subtasks) and scores.csv must be equal.

The shipped names have 100 per group: the extra five per group pair a first
name with the last name of another name of the same group.

Run from the repository root:  python bench/bench_batch.py [--batch-delay 5] [--latency 0.05]
Prints timings; exits non-zero if a check fails.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fanout import ROOT, machine_line, spawn_server

NAMES = ROOT / "src" / "biasaudit" / "data" / "names.csv"
PER_GROUP = 105
PROMPTS = 4 * 6 * 8 * PER_GROUP


def write_names(path: Path) -> None:
    with open(NAMES, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    by_group: dict[str, list[str]] = {}
    for row in rows:
        by_group.setdefault(row["group"], []).append(row["name"])
    taken = {row["name"] for row in rows}
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["name", "group"])
        for group, names in by_group.items():
            extra: list[str] = []
            for first, last in itertools.product(names, reversed(names)):
                name = f"{first.split()[0]} {last.split()[-1]}"
                if len(names) + len(extra) < PER_GROUP and name not in taken:
                    extra.append(name)
                    taken.add(name)
            for name in names + extra:
                writer.writerow([name, group])


def start_server(
    log: Path, batch_delay: float, latency: float
) -> tuple[subprocess.Popen[str], str]:
    return spawn_server(
        ["-m", "tests.servers.openai_server", "--port", "0", "--log", str(log),
         "--batch-delay", str(batch_delay), "--latency", str(latency), "--responder", "hashed"]
    )  # fmt: skip


def audit(base_url: str, runs: Path, names: Path, *extra: str) -> subprocess.Popen[str]:
    args = [
        "run", "resume-screening", "--names", str(names), "--names-per-group", str(PER_GROUP),
        "--model", "openai/bench", "--base-url", base_url, "--api-key-env", "BENCH_KEY",
        "--runs-dir", str(runs), "--no-report", "--concurrency", "128", *extra,
    ]  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "biasaudit", *args], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "BENCH_KEY": "bench-key"},
    )  # fmt: skip


def finish(process: subprocess.Popen[str]) -> Path:
    out, err = process.communicate(timeout=1800)
    if process.returncode != 0:
        raise RuntimeError(f"biasaudit failed ({process.returncode}): {err[-2000:]}")
    return Path(out.strip().splitlines()[-1].removeprefix("run: "))


def batch_recorded(runs: Path) -> bool:
    for path in runs.glob("*/batches.json"):
        batches = json.loads(path.read_text())["batches"]
        if batches and all(batch["batch_id"] for batch in batches):
            return True
    return False


def logged(log: Path, path: str) -> int:
    return sum(line.split("\t", 1)[0] == path for line in log.read_text().splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-delay", type=float, default=5.0, help="server: seconds per batch")
    parser.add_argument(
        "--latency", type=float, default=0.05, help="server: seconds per direct request"
    )
    args = parser.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        names, log = work / "names.csv", work / "server.log"
        write_names(names)
        server, base_url = start_server(log, args.batch_delay, args.latency)
        try:
            batch_runs = work / "batch-runs"
            started = time.perf_counter()
            first = audit(base_url, batch_runs, names, "--batch", "--batch-poll", "0.5")
            while not batch_recorded(batch_runs):
                if first.poll() is not None:
                    raise RuntimeError(
                        f"the first run ended before the kill: {first.communicate()}"
                    )
                time.sleep(0.05)
            submitted = time.perf_counter() - started
            first.send_signal(signal.SIGKILL)
            first.communicate()
            print(
                f"batch   n={PROMPTS}: batch id recorded after {submitted:.2f}s (build, upload, create); killed with SIGKILL"
            )
            started = time.perf_counter()
            batch_dir = finish(audit(base_url, batch_runs, names, "--batch", "--batch-poll", "0.5"))
            resumed = time.perf_counter() - started
            created, direct_sent = logged(log, "/v1/batches"), logged(log, "/v1/chat/completions")
            print(
                f"resume  n={PROMPTS}: wall {resumed:.2f}s incl. start-up, the batch's remaining wait "
                f"(server delay {args.batch_delay:g}s), download and metrics; batches created {created}, "
                f"direct requests {direct_sent}"
            )
            if created != 1 or direct_sent != 0:
                raise RuntimeError(
                    "the batch was submitted twice, or requests went the normal path"
                )
            started = time.perf_counter()
            direct_dir = finish(audit(base_url, work / "direct-runs", names))
            direct = time.perf_counter() - started
            print(
                f"direct  n={PROMPTS}: wall {direct:.2f}s at concurrency 128, latency {args.latency * 1000:.0f}ms; "
                f"direct requests {logged(log, '/v1/chat/completions')}"
            )
        finally:
            server.terminate()
            server.communicate()
        batch_metrics = json.loads((batch_dir / "metrics.json").read_text())
        direct_metrics = json.loads((direct_dir / "metrics.json").read_text())
        manifest = json.loads((batch_dir / "manifest.json").read_text())
        same = all(batch_metrics[key] == direct_metrics[key] for key in ("groups", "subtasks"))
        same_scores = (batch_dir / "scores.csv").read_text() == (
            direct_dir / "scores.csv"
        ).read_text()
        print(
            f"equal   metrics.json groups and subtasks: {same}; scores.csv: {same_scores}; "
            f"batched {manifest['counts']['batched']}, sent {manifest['counts']['sent']}"
        )
        if not (same and same_scores and manifest["counts"]["batched"] == PROMPTS):
            raise RuntimeError("the batch run's metrics differ from the normal path's")


if __name__ == "__main__":
    main()
