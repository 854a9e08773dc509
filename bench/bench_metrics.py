"""Benchmark the metrics that run at scale against straightforward reference implementations.

Run from the repository root (with biasaudit installed, or ``PYTHONPATH=src``)::

    python bench/bench_metrics.py

Each row times a biasaudit function and, in the same run, a straightforward
reference implementation of the same computation, and reports the ratio:

- ``rank_biserial`` on 10^6 x 10^6 scores with heavy ties, against the pair
  loop of the definition (pure Python, and NumPy broadcasting), each timed on
  a subsample and scaled up by the number of pairs;
- ``simulate_selection`` at 12,000 rounds (8 groups, k = 1..5), against a
  per-round pandas loop timed on fewer rounds and scaled up by the rounds;
- the bootstrap intervals of a resume-screening audit (4 jobs x 8 groups x
  600 candidates): ``rank_biserial_tests`` of 7 groups against the reference
  (2,000 replicates) and ``bootstrap_selection_gaps`` (1,800 pools per job,
  200 replicates), against the definition replicate by replicate (resample,
  then compute the statistic afresh), timed on fewer replicates and scaled up.

The references are also checked to give the same answer: exactly for RABBI;
for the selection rates, both are compared with the exact expected rates
(computed by dynamic programming) in Monte Carlo standard errors.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from datetime import date

import numpy as np
import pandas as pd
import scipy

from biasaudit.metrics import (
    bootstrap_selection_gaps,
    dp_gap,
    rank_biserial,
    rank_biserial_test,
    rank_biserial_tests,
    simulate_selection,
)

GROUPS = ["W_F", "W_M", "B_F", "B_M", "A_F", "A_M", "H_F", "H_M"]


def best_time(function: Callable[[], object], repeats: int) -> float:
    """Fastest wall time of ``repeats`` calls, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def pair_loop_rabbi(a: list[float], b: list[float]) -> float:
    total = 0
    for x in a:
        for y in b:
            total += (x > y) - (x < y)
    return total / (len(a) * len(b))


def broadcast_rabbi(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sign(a[:, None] - b[None, :]).mean())


def bench_rank_biserial(n: int, loop_n: int, broadcast_n: int, repeats: int) -> None:
    rng = np.random.default_rng(0)
    # Probabilities to 3 decimals, as label probabilities often are: many ties.
    a = rng.integers(0, 1000, n) / 1000
    b = np.clip(rng.integers(0, 1000, n) + 3, 0, 999) / 1000

    fast = best_time(lambda: rank_biserial(a, b), repeats)
    pairs = n * n

    a_loop, b_loop = a[:loop_n].tolist(), b[:loop_n].tolist()
    start = time.perf_counter()
    loop_value = pair_loop_rabbi(a_loop, b_loop)
    loop_time = (time.perf_counter() - start) * pairs / loop_n**2
    assert loop_value == rank_biserial(a_loop, b_loop), "pair loop disagrees"

    a_cast, b_cast = a[:broadcast_n], b[:broadcast_n]
    cast_time = best_time(lambda: broadcast_rabbi(a_cast, b_cast), repeats) * pairs / broadcast_n**2
    assert abs(broadcast_rabbi(a_cast, b_cast) - rank_biserial(a_cast, b_cast)) < 1e-12

    with_test = best_time(lambda: rank_biserial_test(a, b, n_bootstrap=None), 1)
    typical_a, typical_b = a[:2400], b[:2400]
    bootstrap = best_time(lambda: rank_biserial_test(typical_a, typical_b), repeats)

    print(f"rank_biserial {n:,} x {n:,} ({len(np.unique(np.r_[a, b]))} distinct scores)")
    print(f"  biasaudit                         {fast:10.3f} s   r = {rank_biserial(a, b):+.6f}")
    print(f"  rank_biserial_test, U test only   {with_test:10.3f} s   (Mann-Whitney p-value)")
    print(f"  rank_biserial_test, 2,400 x 2,400, 2,000 bootstrap replicates  {bootstrap:.3f} s")
    print(
        f"  pure-Python pair loop (est.)      {loop_time:10.3g} s   "
        f"x{loop_time / fast:,.0f}   [timed on {loop_n:,} x {loop_n:,}, scaled by pairs]"
    )
    print(
        f"  NumPy broadcast pairs (est.)      {cast_time:10.3g} s   "
        f"x{cast_time / fast:,.0f}   [timed on {broadcast_n:,} x {broadcast_n:,}, scaled by pairs]"
    )


def fractional_top_k(scores: list[float], k: int) -> list[float]:
    ordered = sorted(set(scores), reverse=True)
    share, left = {}, float(k)
    for value in ordered:
        block = scores.count(value)
        share[value] = min(1.0, left / block) if left > 0 else 0.0
        left = max(0.0, left - block)
    return [share[value] for value in scores]


def pandas_round_loop(frame: pd.DataFrame, *, n_rounds: int, k_max: int, seed: int) -> pd.DataFrame:
    """One pool per round with pandas: sample one per group, rank, select top k with ties split."""
    rng = np.random.default_rng(seed)
    selected = pd.DataFrame(0.0, index=GROUPS, columns=range(1, k_max + 1))
    for _ in range(n_rounds):
        pool = frame.groupby("group").sample(1, random_state=rng)
        for k in range(1, k_max + 1):
            shares = fractional_top_k(pool["score"].tolist(), k)
            selected[k] += pd.Series(shares, index=pool["group"].to_numpy())
    return selected / n_rounds


def exact_one_per_group_rates(scores: np.ndarray, groups: np.ndarray, k_max: int) -> pd.DataFrame:
    """Exact expected selection rates of one-per-group pools, for judging Monte Carlo error.

    For each candidate, the law of (#other groups' draws scoring higher, #tied)
    is built one group at a time; its expected share follows from that law.
    """
    n_groups = len(GROUPS)
    law = np.zeros((scores.size, n_groups, n_groups))
    law[:, 0, 0] = 1.0
    for other in GROUPS:
        drawn = np.sort(scores[groups == other])
        above = 1 - np.searchsorted(drawn, scores, side="right") / drawn.size
        tie = 1 - above - np.searchsorted(drawn, scores, side="left") / drawn.size
        own = groups == other
        above[own], tie[own] = 0.0, 0.0
        below = 1 - above - tie
        updated = law * below[:, None, None]
        updated[:, 1:, :] += law[:, :-1, :] * above[:, None, None]
        updated[:, :, 1:] += law[:, :, :-1] * tie[:, None, None]
        law = updated
    higher = np.arange(n_groups)[:, None]
    tied = np.arange(n_groups)[None, :]
    rates = {}
    for k in range(1, k_max + 1):
        share = np.clip((k - higher) / (tied + 1), 0, 1)
        per_candidate = (law * share).sum(axis=(1, 2))
        rates[k] = pd.Series(per_candidate).groupby(groups).mean()
    return pd.DataFrame(rates).loc[GROUPS]


def bench_selection(rounds: int, loop_rounds: int, repeats: int) -> None:
    rng = np.random.default_rng(1)
    per_group = 300
    groups = np.repeat(GROUPS, per_group)
    shift = np.repeat(np.linspace(-0.2, 0.2, len(GROUPS)), per_group)
    scores = np.round(rng.normal(size=groups.size) + shift, 1)
    qualified = rng.random(groups.size) < 0.5
    frame = pd.DataFrame({"score": scores, "group": groups})

    def fast_one() -> object:
        return simulate_selection(scores, groups, qualified, n_rounds=rounds, k_max=5)

    def fast_random() -> object:
        return simulate_selection(
            scores, groups, qualified, pool="random", pool_size=10, n_rounds=rounds, k_max=5
        )

    one = best_time(fast_one, repeats)
    random_pools = best_time(fast_random, repeats)
    start = time.perf_counter()
    loop = pandas_round_loop(frame, n_rounds=loop_rounds, k_max=5, seed=2)
    loop_time = (time.perf_counter() - start) * rounds / loop_rounds

    rates = simulate_selection(scores, groups, n_rounds=rounds, k_max=5).selection_rate.loc[GROUPS]
    exact = exact_one_per_group_rates(scores, groups, 5)
    spread = np.sqrt(exact * (1 - exact))
    worst_fast = float(((rates - exact).abs() / (spread / np.sqrt(rounds))).max().max())
    worst_loop = float(((loop - exact).abs() / (spread / np.sqrt(loop_rounds))).max().max())

    print(f"simulate_selection {rounds:,} rounds, 8 groups x {per_group} candidates, k = 1..5")
    print(f"  biasaudit, one per group          {one:10.4f} s")
    print(f"  biasaudit, random pools of 10     {random_pools:10.4f} s")
    print(
        f"  per-round pandas loop (est.)      {loop_time:10.3g} s   x{loop_time / one:,.0f}   "
        f"[timed on {loop_rounds:,} rounds, scaled by rounds]"
    )
    print(
        f"  largest deviation from the exact expected rates (40 cells): biasaudit "
        f"{worst_fast:.2f} SE, pandas loop {worst_loop:.2f} SE"
    )


def audit_scores(seed: int) -> pd.DataFrame:
    """Scores shaped like a resume-screening audit: 4 jobs x 6 resumes x 8 groups x 100 names."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "job": np.repeat(np.arange(4), 4_800),
            "qualified": np.tile(np.repeat(np.arange(6) < 2, 800), 4),
            "group": np.tile(np.repeat(GROUPS, 100), 24),
        }
    )
    # Label probabilities of many distinct values, qualified resumes higher, B_F lower.
    latent = rng.beta(2, 2, len(frame)) * 0.6 + 0.3 * frame["qualified"]
    frame["score"] = np.clip(np.round(latent - 0.04 * (frame["group"] == "B_F"), 6), 0, 1)
    return frame


def naive_rabbi_replicates(a: np.ndarray, b: np.ndarray, n: int, seed: int) -> np.ndarray:
    """The definition: resample A and B with replacement, compute RABBI afresh."""
    rng = np.random.default_rng(seed)
    return np.array([rank_biserial(rng.choice(a, a.size), rng.choice(b, b.size)) for _ in range(n)])


def naive_gap_replicates(frame: pd.DataFrame, n: int, seed: int) -> np.ndarray:
    """The definition: resample within group x job x qualification, simulate afresh."""
    rng = np.random.default_rng(seed)
    cells = [
        rows.to_numpy() for _, rows in frame.groupby(["group", "job", "qualified"]).groups.items()
    ]
    gaps = []
    for replicate in range(n):
        picked = np.concatenate([cell[rng.integers(0, cell.size, cell.size)] for cell in cells])
        order = np.concatenate(cells)
        resampled = frame.loc[order].assign(score=frame["score"].to_numpy()[picked])
        result = simulate_selection(
            resampled["score"], resampled["group"], resampled["qualified"].to_numpy(),
            strata=resampled["job"], n_rounds=1_800, seed=replicate + 1,
        )  # fmt: skip
        gaps.append(dp_gap(result, reference="W_M").loc[GROUPS].to_numpy())
    return np.stack(gaps)


def bench_audit_bootstrap(repeats: int, naive_rabbi: int, naive_gaps: int) -> None:
    frame = audit_scores(3)
    by_group = {g: frame.loc[frame["group"] == g, "score"].to_numpy() for g in GROUPS}
    reference = by_group.pop("W_M")
    rabbi = best_time(lambda: rank_biserial_tests(by_group, reference), repeats)
    start = time.perf_counter()
    naive = naive_rabbi_replicates(by_group["B_F"], reference, naive_rabbi, seed=1)
    rabbi_naive = (time.perf_counter() - start) * len(by_group) * 2_000 / naive_rabbi
    tests = rank_biserial_tests(by_group, reference)
    naive_interval = np.quantile(naive, [0.025, 0.975])

    qualified = frame["qualified"].to_numpy()

    def gaps() -> object:
        return bootstrap_selection_gaps(
            frame["score"], frame["group"], qualified, reference="W_M", strata=frame["job"]
        )

    gap_time = best_time(gaps, repeats)
    start = time.perf_counter()
    naive_gap = naive_gap_replicates(frame, naive_gaps, seed=2)
    gap_naive = (time.perf_counter() - start) * 200 / naive_gaps
    intervals = bootstrap_selection_gaps(
        frame["score"], frame["group"], qualified, reference="W_M", strata=frame["job"]
    )

    print("bootstrap intervals of a resume-screening audit (4 jobs x 8 groups x 600 candidates)")
    print(f"  rank_biserial_tests, 7 groups vs W_M (2,400 each), 2,000 replicates  {rabbi:8.3f} s")
    print(
        f"  per-replicate resample + rank_biserial (est.)  {rabbi_naive:8.3g} s   "
        f"x{rabbi_naive / rabbi:,.0f}   [timed on {naive_rabbi} replicates of B_F, scaled]"
    )
    b_f = tests["B_F"]
    print(
        f"  B_F interval: biasaudit [{b_f.ci_low:+.4f}, {b_f.ci_high:+.4f}], "
        f"per-replicate definition [{naive_interval[0]:+.4f}, {naive_interval[1]:+.4f}] "
        f"({naive_rabbi} replicates)"
    )
    print(
        f"  bootstrap_selection_gaps, 1,800 pools per job, 200 replicates       {gap_time:8.3f} s"
    )
    print(
        f"  per-replicate resample + simulate_selection (est.)  {gap_naive:8.3g} s   "
        f"x{gap_naive / gap_time:,.0f}   [timed on {naive_gaps} replicates, scaled]"
    )
    low, high = np.quantile(naive_gap, [0.025, 0.975], axis=0)
    row = GROUPS.index("B_F")
    print(
        f"  B_F ΔDP at k=1: biasaudit [{intervals.dp_low.loc['B_F', 1]:+.4f}, "
        f"{intervals.dp_high.loc['B_F', 1]:+.4f}], per-replicate definition "
        f"[{low[row, 0]:+.4f}, {high[row, 0]:+.4f}] ({naive_gaps} replicates)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="scores per group for RABBI")
    parser.add_argument("--rounds", type=int, default=12_000, help="selection rounds")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (best is kept)")
    args = parser.parse_args()

    print(
        f"date {date.today()}  python {platform.python_version()}  numpy {np.__version__}  "
        f"scipy {scipy.__version__}  pandas {pd.__version__}"
    )
    print(f"machine {platform.machine()}  cpus {os.cpu_count()}  {platform.platform()}")
    print()
    bench_rank_biserial(args.n, loop_n=1_000, broadcast_n=5_000, repeats=args.repeats)
    print()
    bench_selection(args.rounds, loop_rounds=600, repeats=args.repeats)
    print()
    bench_audit_bootstrap(args.repeats, naive_rabbi=400, naive_gaps=100)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
