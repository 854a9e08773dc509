"""Verdicts on null data: how often does a table with nothing to find call something
beyond noise, and how often does it find what is there?

Two surfaces, at the sizes users have:

- **The Local Law 144 summary of an employer's file** (``ll144_rates``): files of
  200, 2,000 and 20,000 people of the EEO-1 mix (two race categories under 2%),
  selected at 5%, 30% and 60% in every category. Per cell: the share of summaries
  calling any of their impact ratios beyond noise, with biasaudit's simultaneous
  score intervals, and with Katz's intervals read one at a time (the summary before
  2026-11-28). Then power: a category of about 500 people (Hispanic or Latino)
  selected at 0.7 and at 0.5 of everyone else's rate.
- **The allocation tables** (``run resume-screening`` on ``sim/fair``, names with
  effects of their own, in fresh worlds): the share of runs whose RABBI, ΔDP, ΔEO
  or impact-ratio table flags anything, each table adjusted on its own (Holm).
- **The stored verdicts of listwise and RUTEd runs** (``sim/fair``, fresh worlds):
  per table, the share of runs flagging anything.
- **compare** of two audits of the same fair model in fresh worlds: the share of
  comparisons calling any change.
- **The decisions table** (``run decisions`` on ``sim/fair``, which plants no effect):
  the share of audits with any score beyond noise, after Holm's adjustment over the
  table (what the table stars now) and with every interval read on its own (what it
  starred before); then, on ``sim/biased``, how often its planted race effect
  (-0.5 logit for Black persons described explicitly) is found.

Run from the repository root:
    python bench/bench_verdicts.py [--files 200] [--worlds 40]
Prints numbers; asserts nothing. (The suite checks the same at small size:
tests/metrics/test_metrics_ll144.py and tests/test_verdicts.py.)
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import tempfile
import time
from datetime import date
from typing import Any

import numpy as np

from biasaudit.metrics import impact_ratio_interval, ll144_rates

RACE_MIX = {
    "White": 0.58, "Hispanic or Latino": 0.16, "Black or African American": 0.13,
    "Asian": 0.08, "Two or More Races": 0.03, "Native Hawaiian or Pacific Islander": 0.01,
    "Native American or Alaska Native": 0.01,
}  # fmt: skip


def employer_file(rng: np.random.Generator, people: int, rate: float, factor: dict) -> tuple:
    races = rng.choice(list(RACE_MIX), people, p=list(RACE_MIX.values()))
    sexes = rng.choice(["Male", "Female"], people)
    chance = rate * np.array([factor.get(r, 1.0) for r in races])
    return list(sexes), list(races), (rng.random(people) < chance).astype(float)


def katz_one_at_a_time(result) -> set[str]:
    """The categories the summary's earlier verdict called beyond noise."""
    found = set()
    for dimension in ("sex", "race/ethnicity", "intersectional"):
        rows = [r for r in result.of(dimension) if r.n > 0]
        top = max(rows, key=lambda r: r.rate or 0.0)
        for row in rows:
            bounds = impact_ratio_interval(row.selected or 0, row.n, top.selected or 0, top.n)
            if row is not top and bounds is not None and bounds[1] < 0.8:
                found.add(row.category)
    return found


def ll144_null(files: int) -> None:
    print("\nLL144 summary of an employer's file, no difference: share of summaries with any "
          "ratio beyond noise (biasaudit / Katz one at a time)")  # fmt: skip
    print("| people | 5% selected | 30% selected | 60% selected |\n|---:|---:|---:|---:|")
    rng = np.random.default_rng(2026)
    for people in (200, 2000, 20000):
        cells = []
        for rate in (0.05, 0.3, 0.6):
            new = old = 0
            for _ in range(files):
                result = ll144_rates(*employer_file(rng, people, rate, {}))
                new += any(r.beyond_noise for r in result.rows)
                old += bool(katz_one_at_a_time(result))
            cells.append(f"{new / files:.3f} / {old / files:.3f}")
        print(f"| {people:,} | " + " | ".join(cells) + " |")


def ll144_power(files: int) -> None:
    print("\nLL144 power: Hispanic or Latino (about 500 of 3,125 people) selected at a "
          "fraction of the others' 30% (biasaudit / Katz one at a time)")  # fmt: skip
    rng = np.random.default_rng(11)
    for ratio in (0.7, 0.5):
        new = old = 0
        for _ in range(files):
            result = ll144_rates(*employer_file(rng, 3125, 0.3, {"Hispanic or Latino": ratio}))
            new += {r.category: r for r in result.rows}["Hispanic or Latino"].beyond_noise
            old += "Hispanic or Latino" in katz_one_at_a_time(result)
        print(f"  impact ratio {ratio}: found in {new / files:.3f} / {old / files:.3f}")


def decisions(worlds: int) -> None:
    from biasaudit.kinds.decisions.run import run
    from biasaudit.kinds.decisions.spec import DecisionsSpec
    from biasaudit.providers.sim import SimProvider

    print(f"\ndecisions, 12 scenarios, explicit and implicit fills, {worlds} worlds")
    with tempfile.TemporaryDirectory() as folder:
        for model, settings in (("fair", {}), ("biased", {}), ("biased", {"black_shift": -0.3})):
            any_new = any_old = black = 0
            for world in range(1, worlds + 1):
                spec = DecisionsSpec.model_validate(
                    {"model": f"sim/{model}", "runs_dir": f"{folder}/runs",
                     "cache": f"{folder}/cache-{model}-{len(settings)}.sqlite"}
                )  # fmt: skip
                provider = SimProvider(model, world=world, **settings)
                result = run(spec, provider=provider, stderr=io.StringIO())
                scores = [s for f in result.metrics.fills.values() for s in f.scores]
                any_new += any(s.beyond_noise for s in scores)
                any_old += any(s.ci and not s.ci[0] <= 0 <= s.ci[1] for s in scores)
                explicit = {s.level: s for s in result.metrics.fills["explicit"].scores}
                black += explicit["black"].beyond_noise
            if model == "fair":
                print(f"  sim/fair: audits with any score beyond noise {any_new / worlds:.3f} "
                      f"(Holm over the table; 5% nominal); any interval excluding 0 "
                      f"{any_old / worlds:.3f} (as starred before)")  # fmt: skip
            else:
                size = settings.get("black_shift", -0.5)
                print(f"  sim/biased, race effect {size} logit (explicit Black persons): found in "
                      f"{black / worlds:.3f} of audits (Holm over the table)")  # fmt: skip


RESUMES = {"task": "resume-screening", "jobs": ["software-engineer"]}


def sim_world(
    folder: str,
    settings: dict,
    world: int,
    variant: str = "fair",
    *,
    seed: int | None = None,
    cache: str = "cache.sqlite",
    **sim: float,
) -> Any:
    """One audit of ``settings`` on ``sim/<variant>`` in world ``world`` (its names' own
    effects and its noise, ``sim`` the simulator's settings), run as ``biasaudit run``
    runs it; the finished run (``run_dir``, ``metrics``)."""
    from biasaudit.kinds.registry import kind_of_spec
    from biasaudit.providers.sim import SimProvider
    from biasaudit.spec import parse_spec

    spec = parse_spec({**settings, "model": f"sim/{variant}", "seed": world if seed is None
                       else seed, "runs_dir": f"{folder}/runs", "cache": f"{folder}/{cache}"})  # fmt: skip
    provider = SimProvider(variant, world=world, **sim)
    return kind_of_spec(spec).run(spec, provider=provider, stderr=io.StringIO())


def allocation_power(worlds: int, names: int, shift: float) -> None:
    """sim/biased with a planted shift for B_M in fresh worlds: the share of runs that
    flag B_M's RABBI, its ΔDP at k=1, any of its ΔEO, and any other group's figure."""
    from biasaudit.kinds.allocation.table import findings

    found = {"RABBI": 0, "ΔDP k=1": 0, "ΔEO any k": 0, "another group": 0}
    with tempfile.TemporaryDirectory() as folder:
        for world in range(1, worlds + 1):
            ran = sim_world(folder, {**RESUMES, "names_per_group": names}, world, "biased",
                            shift=shift, name_sd=0.5)  # fmt: skip
            flags = findings(ran.metrics)
            found["RABBI"] += flags.rabbi["B_M"]
            found["ΔDP k=1"] += flags.gaps.get(("dp_gap", "B_M", 1), False)
            found["ΔEO any k"] += any(v for (kind, g, _), v in flags.gaps.items()
                                      if kind == "eo_gap" and g == "B_M")  # fmt: skip
            found["another group"] += any(
                [v for (_, g, _), v in flags.gaps.items() if g != "B_M"]
                + [v for g, v in flags.rabbi.items() if g != "B_M"]
            )
    print(
        f"  power, B_M shifted by {shift} logit, {names} names: "
        + ", ".join(f"{name} {count / worlds:.3f}" for name, count in found.items())
    )


def allocation(worlds: int, names: int) -> None:
    """sim/fair in fresh worlds (names with effects of their own, sd 0.5): the share of
    runs whose table flags anything, table by table, as the run prints it."""
    from biasaudit.kinds.allocation.table import findings

    print(f"\nallocation, resume screening, {names} names per group, one job, {worlds} worlds "
          "of sim/fair (names sd 0.5): share of runs whose table flags anything")  # fmt: skip
    tables = {"RABBI": 0, "ΔDP": 0, "ΔEO": 0, "impact ratios": 0, "any": 0}
    excluded: dict[tuple[str, int], list[bool]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for world in range(1, worlds + 1):
            metrics = sim_world(folder, {**RESUMES, "names_per_group": names}, world,
                                name_sd=0.5).metrics  # fmt: skip
            found = findings(metrics)
            for figures in metrics.groups.values():
                for gap in ("dp_gap", "eo_gap"):
                    for k, ci in getattr(figures, f"{gap}_ci").items():
                        if ci:
                            excluded.setdefault((gap, int(k)), []).append(ci[0] > 0 or ci[1] < 0)
            flags = {
                "RABBI": any(found.rabbi.values()),
                "ΔDP": any(v for (kind, _, _), v in found.gaps.items() if kind == "dp_gap"),
                "ΔEO": any(v for (kind, _, _), v in found.gaps.items() if kind == "eo_gap"),
                "impact ratios": any(found.impact.values()),
            }
            for table, flagged in flags.items():
                tables[table] += flagged
            tables["any"] += any(flags.values())
    for table, count in tables.items():
        print(f"  {table:>14}: {count / worlds:.3f} (5% nominal per table)")
    print("  each gap's own 95% interval excluding 0 (5% nominal), by k:")
    for gap in ("dp_gap", "eo_gap"):
        shares = [
            f"k={k} {sum(v) / len(v):.3f}"
            for (name, k), v in sorted(excluded.items()) if name == gap
        ]  # fmt: skip
        print(f"    {gap}: " + ", ".join(shares))


def stored_null(
    worlds: int, label: str, settings: dict, variant: str = "fair", **sim: float
) -> None:
    """Fresh worlds of a kind run on ``sim/fair`` (or ``variant``, with ``sim`` settings):
    per family of the verdicts its metrics.json stores, the share of runs flagging
    anything (on ``sim/biased``: the share flagging the planted group, B_M)."""
    flagged: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as folder:
        for world in range(1, worlds + 1):
            ran = sim_world(folder, settings, world, variant, **sim)
            families: dict[str, bool] = {}
            for verdict in ran.metrics.verdicts:
                table = verdict.family.split(" ", 2)[-1]  # "the 35 ΔEO figures..." -> table
                counts = variant == "fair" or verdict.unit == "B_M"
                families[table] = families.get(table, False) or (counts and verdict.beyond_noise)
            for table, any_flag in families.items():
                flagged[table] = flagged.get(table, 0) + any_flag
    print(f"  {label}: " + ", ".join(f"{t} {n / worlds:.3f}" for t, n in flagged.items()))


def grade_null(worlds: int, first_option_rate: float) -> None:
    """Grade Score on the demo items (16 items x 4 cyclic orders) in fresh worlds, the
    judge choosing the first slot with ``first_option_rate`` beyond its content choice:
    the share of runs whose slot test (exact binomial per slot, Bonferroni) says a slot
    is preferred."""
    found = 0
    with tempfile.TemporaryDirectory() as folder:
        for world in range(1, worlds + 1):
            settings = {"task": "grade-score", "items": "demo", "temperature": 1.0}
            metrics = sim_world(folder, settings, world,
                                first_option_rate=first_option_rate).metrics  # fmt: skip
            found += metrics.slot_p is not None and metrics.slot_p < 0.05
    print(
        f"  Grade Score, demo items, first-option rate {first_option_rate}: runs finding a "
        f"preferred slot {found / worlds:.3f}"
    )


def compare_null(worlds: int, label: str, settings: dict, **sim: float) -> None:
    """Two audits of the same fair model in fresh worlds (new names, new noise), compared:
    the share of comparisons that call any change (``compare``'s drift)."""
    from biasaudit.reports.compare import compare_runs

    drift = tests = 0
    with tempfile.TemporaryDirectory() as folder:
        for world in range(1, worlds + 1):
            runs = [
                sim_world(folder, settings, 2 * world + twin, seed=world,
                          cache=f"cache-{world}-{twin}.sqlite", **sim).run_dir
                for twin in (0, 1)
            ]  # fmt: skip
            comparison = compare_runs(runs[0], runs[1], bootstrap=200, seed=world)
            drift += comparison.drift
            tests += len(comparison.tests)
    print(
        f"  compare, {label}: comparisons calling a change {drift / worlds:.3f} "
        f"({tests / worlds:.0f} tests a comparison)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--worlds", type=int, default=40)
    parser.add_argument("--names", type=int, default=20, help="names per group (allocation)")
    args = parser.parse_args()
    print(f"# {date.today()}  {platform.machine()}  {os.cpu_count()} CPUs  "
          f"Python {platform.python_version()}")  # fmt: skip
    started = time.perf_counter()
    ll144_null(args.files)
    ll144_power(args.files)
    decisions(args.worlds)
    for names in (args.names, 8):
        allocation(args.worlds, names)
        for shift in (-0.5, -1.0):
            allocation_power(args.worlds, names, shift)
    print("\nstored verdicts of other kinds on null worlds: share of runs with any flag, "
          "per table (5% nominal)")  # fmt: skip
    for names in (args.names, 8):
        stored_null(args.worlds, f"listwise, {names} names, names sd 0.5",
                    {**RESUMES, "method": "listwise", "names_per_group": names}, name_sd=0.5)  # fmt: skip
    for shift in (-0.5, -1.0):
        stored_null(args.worlds, f"listwise power, B_M shifted {shift} logit, {args.names} names",
                    {**RESUMES, "method": "listwise", "names_per_group": args.names},
                    variant="biased", name_sd=0.5, shift=shift)  # fmt: skip
    stored_null(args.worlds, "RUTEd, 40 occupations, 30 texts each, gender_lean 0",
                {"task": "ruted"})  # fmt: skip
    for rate in (0.0, 0.2):
        grade_null(args.worlds, rate)
    print("\ncompare on null pairs (the same fair model audited twice, fresh worlds)")
    compare_null(args.worlds, f"resume screening, {args.names} names, names sd 0.5",
                 {"task": "resume-screening", "jobs": ["software-engineer"],
                  "names_per_group": args.names}, name_sd=0.5)  # fmt: skip
    compare_null(args.worlds, "decisions", {"task": "decisions"})
    print(f"\n{time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
