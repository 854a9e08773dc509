"""The full resume-screening audit against a loopback server, measured as a user runs it.

1. ``biasaudit run resume-screening`` with the shipped data: 4 jobs x 6 resumes x
   8 groups x 100 names = 19,200 pointwise prompts, against a loopback
   OpenAI-compatible server (a separate process) that waits L seconds per
   request, at concurrency C: wall time including start-up and the metrics,
   requests/s, peak RSS, and the ratio to the floor N x L / C that the server
   alone imposes.
2. The same command again, ``--cached-runs`` times: every answer from the
   cache (the script checks that nothing was sent), so its wall time is
   start-up, cache reads, scoring, metrics and the report.
3. The metrics phase alone, in this process, as the audit computes it
   (every group against the reference per job and as the headline, with
   intervals over names and resumes, permutation p-values, balanced pools and
   the omnibus test), on the cached run's candidates with realistic scores put
   in: the loopback server gives every prompt the same answer, so the runs'
   scores all tie, which no real model does. The names carry effects of their
   own, as real names do.

Run from the repository root:  python bench/bench_allocation.py [--latency 0.05] [--concurrency 128]
[--workers 1] [--cached-runs 1]. Prints numbers; asserts nothing but that the runs completed.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fanout import machine_line, run_biasaudit, start_server

from biasaudit.kinds.allocation.metrics_file import MetricOptions, allocation_results
from biasaudit.kinds.candidates.task import PoolDesign

PROMPTS = 4 * 6 * 8 * 100
_COUNTS = re.compile(r"requests: (\d+) \((\d+) sent, (\d+) from cache, (\d+) failed")


def audit(port: int, concurrency: int, workers: int, runs: Path) -> tuple[float, int, str]:
    args = [
        "run", "resume-screening", "--model", "vllm/bench",
        "--base-url", f"http://127.0.0.1:{port}/v1", "--concurrency", str(concurrency),
        "--workers", str(workers), "--runs-dir", str(runs),
    ]  # fmt: skip
    return run_biasaudit(args)


def counts(out: str) -> tuple[int, int, int, int]:
    found = _COUNTS.search(out)
    if found is None:
        raise RuntimeError(f"no request counts in the output:\n{out}")
    requests, sent, cached, failed = (int(group) for group in found.groups())
    return requests, sent, cached, failed


def metrics_phase(scores_csv: Path, repeats: int = 5) -> float:
    """Best wall time of the audit's metrics phase on ``scores_csv`` with realistic scores."""
    scores = pd.read_csv(scores_csv)
    rng = np.random.default_rng(0)
    latent = rng.beta(2, 2, len(scores)) * 0.6 + 0.3 * scores["qualified"].to_numpy(bool)
    by_name = pd.Series(rng.normal(0, 0.05, scores["name"].nunique()), scores["name"].unique())
    latent += by_name[scores["name"]].to_numpy()
    scores["score"] = np.clip(np.round(latent - 0.04 * (scores["group"] == "B_F"), 6), 0, 1)
    options = MetricOptions(
        reference="W_M", groups=sorted(scores["group"].unique()), k_max=5,
        pool=PoolDesign("one_per_group"), rounds=1_800, value_range=(0.0, 1.0), seed=0,
        bootstrap=2_000, gap_bootstrap=200, confidence=0.95,
    )  # the defaults of `biasaudit run resume-screening`  # fmt: skip
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        allocation_results(scores, options, [], item_column="resume_id")
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--cached-runs", type=int, default=1, help="times to run from the cache")
    args = parser.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        server, port = start_server(args.latency)
        try:
            wall, peak_mb, out = audit(port, args.concurrency, args.workers, runs)
            requests, sent, _, failed = counts(out)
            if requests != PROMPTS or failed:
                raise RuntimeError(f"expected {PROMPTS} answered prompts:\n{out}")
            floor = PROMPTS * args.latency / args.concurrency
            print(
                f"audit   n={PROMPTS} concurrency={args.concurrency} workers={args.workers} "
                f"latency={args.latency * 1000:.0f}ms: wall {wall:.2f}s incl. start-up and metrics, "
                f"{sent / wall:.0f} req/s, peak RSS {peak_mb} MB, "
                f"server floor {floor:.2f}s (ratio {wall / floor:.2f})"
            )
            for _ in range(args.cached_runs):
                wall, peak_mb, out = audit(port, args.concurrency, args.workers, runs)
                requests, sent, cached, _ = counts(out)
                if sent or cached != PROMPTS:
                    raise RuntimeError(f"the run was not served from the cache:\n{out}")
                print(
                    f"cached  n={PROMPTS}: wall {wall:.2f}s incl. start-up, metrics and report, "
                    f"{cached} from cache, {sent} sent, peak RSS {peak_mb} MB"
                )
        finally:
            server.terminate()
            server.wait()
        scores_csv = next(runs.glob("*/scores.csv"))
        print(
            f"metrics phase on realistic scores (in-process, best of 5): "
            f"{metrics_phase(scores_csv):.3f}s"
        )


if __name__ == "__main__":
    main()
