"""Coverage of the allocation impact ratios' intervals in worlds whose truth is known.

Each world is a resume screen drawn afresh: eight groups, one posting with six
resumes (two of high fit, two medium, two low, each with an effect of its own),
names with effects of their own (sd 0.5), and a planted shift of a group's log-odds
(``--shift``, B_M only; 0 for a world with no group effect). A candidate's score is
the logistic of the sum plus answer noise. The figures are those an audit prints:
:func:`biasaudit.metrics.allocation_figures` with names and resumes as the units.

The truth of B_M's impact ratio at k=1 (its top-1 selection rate in pools of one
candidate per group, over the most selected group's) is taken two ways:

- ``population``: over names and resumes alike, the mean of the exact ratio in
  ``--truth-worlds`` worlds of 150 names a group and 150 resumes a fit level;
- ``these resumes``: over names alone, the exact ratio of each world's own six
  resumes shown with 400 fresh names a group (the audit's materials held fixed).

With no shift the truth is 1 for both. "Exact" is the expectation over pools, not a
simulation of them: P(a group's candidate is the highest of its pool), each other
group's member uniform over its candidates.

Prints, for each truth, the share of 95% intervals that held it and of those that
missed it from below and from above, with the worlds' mean estimate.
``python3 bench/bench_impact_coverage.py`` takes about 3 minutes on 2 cores (each row's
progress on stderr).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from biasaudit.metrics import allocation_figures

GROUPS = ("W_M", "W_F", "B_M", "B_F", "A_M", "A_F", "H_M", "H_F")
FIT = {"high": 1.5, "medium": 0.0, "low": -1.5}


def resumes_of(rng: np.random.Generator, per_fit: int) -> list[tuple[str, float]]:
    """``(resume id, its log-odds)`` for ``per_fit`` resumes of each fit level."""
    return [(f"{fit}-{i}", mean + rng.normal(0, 0.7)) for fit, mean in FIT.items()
            for i in range(per_fit)]  # fmt: skip


def screen(
    rng: np.random.Generator, names: int, resumes: list[tuple[str, float]], shift: float
) -> dict[str, np.ndarray]:
    """Every name of every group shown with every resume: the candidates' columns."""
    group = np.repeat(np.array(GROUPS), names * len(resumes))
    name = np.array([f"{g}-{i}" for g in GROUPS for i in range(names)]).repeat(len(resumes))
    resume = np.tile(np.array([r for r, _ in resumes]), len(GROUPS) * names)
    logit = np.tile(np.array([x for _, x in resumes]), len(GROUPS) * names)
    logit = logit + rng.normal(0, 0.5, len(GROUPS) * names).repeat(len(resumes))
    logit = logit + shift * (group == "B_M") + rng.normal(0, 0.3, logit.size)
    qualified = np.char.startswith(resume.astype(str), "high")
    return {"group": group, "name": name, "item": resume, "qualified": qualified,
            "score": 1 / (1 + np.exp(-logit))}  # fmt: skip


def exact_ratio(group: np.ndarray, score: np.ndarray) -> float:
    """B_M's top-1 rate over the highest group's, in expectation over the pools."""
    rates = {}
    for mine in GROUPS:
        wins = np.ones(int((group == mine).sum()))
        for other in GROUPS:
            if other != mine:
                theirs = np.sort(score[group == other])
                wins *= np.searchsorted(theirs, score[group == mine], side="left") / theirs.size
        rates[mine] = float(wins.mean())
    return rates["B_M"] / max(rates.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", type=int, default=100)
    parser.add_argument("--names", type=int, nargs="+", default=[5, 20])
    parser.add_argument("--shift", type=float, nargs="+", default=[-1.0, 0.0])
    parser.add_argument("--truth-worlds", type=int, default=6)
    parser.add_argument("--bootstrap", type=int, default=200)
    args = parser.parse_args()
    started = time.perf_counter()
    print(
        "| shift | names | truth | held (of worlds) | missed below | missed above | mean estimate |"
    )
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for shift in args.shift:
        rng = np.random.default_rng(2026)
        population = 1.0
        if shift:
            print(f"shift {shift:+.1f}: the population's truth, {args.truth_worlds} worlds of 150 "
                  "names a group and 450 resumes", file=sys.stderr)  # fmt: skip
            big = [screen(rng, 150, resumes_of(rng, 150), shift) for _ in range(args.truth_worlds)]
            population = float(np.mean([exact_ratio(w["group"], w["score"]) for w in big]))
        for names in args.names:
            tally = {"population": [0, 0, 0], "these resumes": [0, 0, 0]}
            estimates = []
            print(f"shift {shift:+.1f}, {names} names a group: {args.worlds} worlds",
                  file=sys.stderr)  # fmt: skip
            for world in range(args.worlds):
                resumes = resumes_of(rng, 2)
                found = screen(rng, names, resumes, shift)
                fixed = 1.0
                if shift:
                    again = screen(rng, 400, resumes, shift)
                    fixed = exact_ratio(again["group"], again["score"])
                figures = allocation_figures(
                    found["score"], found["group"], reference="W_M", names=found["name"],
                    items=found["item"], qualified=found["qualified"], k_max=1,
                    n_bootstrap=args.bootstrap, n_gap_bootstrap=args.bootstrap,
                    n_permutations=20, n_omnibus=19, seed=world,
                )  # fmt: skip
                impact = figures.impact
                row = impact[(impact.category == "group") & (impact.value == "B_M")].iloc[0]
                estimates.append(float(row.ratio))
                for label, truth in (("population", population), ("these resumes", fixed)):
                    side = 0 if row.low <= truth <= row.high else 1 if row.high < truth else 2
                    tally[label][side] += 1
            for label, (held, below, above) in tally.items():
                truth = f"{label} ({population:.3f})" if label == "population" else label
                print(f"| {shift:+.1f} | {names} | {truth} | {held / args.worlds:.0%} of "
                      f"{args.worlds} | {below / args.worlds:.0%} | {above / args.worlds:.0%} | "
                      f"{np.mean(estimates):.3f} |")  # fmt: skip
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
