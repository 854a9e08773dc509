"""Mitigation experiments on the sim: does the paired estimate of an intervention's
effect cover the truth at its level, and how much narrower is it than comparing two
independent runs?

The world: ``sim/biased`` decisions audits described explicitly, every scenario with a
Black person's shift of its own (the planted -0.5 logit plus a scenario's own draw of
sd ``--scenario-sd``, a random slope as the paper's mixed model has), and per-prompt
noise; a fresh world (``SimProvider(world=w)``) draws fresh scenarios' slopes and fresh
noise. The intervention ``illegal`` names "age, gender, race", which the sim heeds by
half (``HEED``): the true change of the race:black score is +0.25 (half of -0.5;
the scenarios' own slopes average to zero over the population of scenarios). A null
intervention (a sentence the sim ignores, put after the question) changes nothing.

Per world: the experiment's paired estimate and interval (over scenarios), and the
unpaired comparison of the same two runs (``normal_test`` on each run's interval, what
``compare`` did before). Reported: coverage of +0.25 (and of 0 for the null), the mean
widths and their ratio, and the ratio pairing predicts from each world's scenarios'
own scores in the two arms, sqrt((var a + var b) / (var a + var b - 2 cov)) (rho their
correlation).

Run from the repository root:
    python bench/bench_experiment.py [--worlds 200] [--scenarios 12] [--scenario-sd 0.4]
Prints numbers; asserts nothing. (The suite checks the same at small size:
tests/test_experiment.py.)
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import tempfile
import time
from datetime import date

import numpy as np
import pandas as pd

from biasaudit.experiments.runner import run_experiment
from biasaudit.interventions import BUILT_IN, Intervention
from biasaudit.kinds.decisions.spec import DecisionsSpec
from biasaudit.metrics import normal_test
from biasaudit.providers.sim import SimProvider

TRUE_CHANGE = 0.25
NULL = Intervention(name="null", append="This request is one of many.")


def world(seed: int, scenarios: int, scenario_sd: float, folder: str) -> dict[str, float]:
    spec = DecisionsSpec.model_validate({
        "model": "sim/biased", "fills": "explicit", "scenario_limit": scenarios,
        "runs_dir": os.path.join(folder, f"w{seed}"), "cache": os.path.join(folder, "cache.sqlite"),
    })  # fmt: skip
    provider = SimProvider(world=seed + 1, scenario_sd=scenario_sd)
    result = run_experiment(spec, [BUILT_IN["illegal"], NULL], provider=provider, bootstrap=100)
    experiment = result.experiment
    found: dict[str, float] = {}
    scenarios_of = {}
    for arm in experiment.arms:
        table = pd.read_csv(experiment.run_dir(arm.name, result.folder) / "scenarios.csv")
        scenarios_of[arm.name] = table.set_index("scenario")["black"]
        metrics = pd.read_json(experiment.run_dir(arm.name, result.folder) / "metrics.json",
                               typ="series")  # fmt: skip
        score = next(s for s in metrics["fills"]["explicit"]["scores"] if s["level"] == "black")
        found[f"estimate:{arm.name}"], found[f"ci:{arm.name}"] = score["estimate"], score["ci"]
    for name, truth in (("illegal", TRUE_CHANGE), ("null", 0.0)):
        effect = next(e for e in experiment.effects if e.arm == name and e.figure == "race:black")
        found[f"covered:{name}"] = float(effect.ci[0] <= truth <= effect.ci[1])
        found[f"width:{name}"] = effect.ci[1] - effect.ci[0]
        unpaired = normal_test("race:black", None, found["estimate:baseline"],
                               found["ci:baseline"], found[f"estimate:{name}"],
                               found[f"ci:{name}"], 0.95)  # fmt: skip
        assert unpaired is not None
        found[f"unpaired_width:{name}"] = unpaired.ci[1] - unpaired.ci[0]
        found[f"unpaired_covered:{name}"] = float(unpaired.ci[0] <= truth <= unpaired.ci[1])
        a, b = scenarios_of["baseline"], scenarios_of[name].reindex(scenarios_of["baseline"].index)
        va, vb, cov = float(a.var(ddof=1)), float(b.var(ddof=1)), float(np.cov(a, b)[0, 1])
        found[f"rho:{name}"] = cov / math.sqrt(va * vb)
        found[f"predicted:{name}"] = math.sqrt((va + vb) / max(1e-12, va + vb - 2 * cov))
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", type=int, default=200)
    parser.add_argument("--scenarios", type=int, default=12)
    parser.add_argument("--scenario-sd", type=float, default=0.4)
    args = parser.parse_args()
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for seed in range(args.worlds):
            rows.append(world(seed, args.scenarios, args.scenario_sd, folder))
    frame = pd.DataFrame(rows)
    print(f"# bench_experiment: {args.worlds} worlds, {args.scenarios} scenarios, "
          f"scenario sd {args.scenario_sd}; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, {date.today()}, {time.perf_counter() - started:.0f} s")  # fmt: skip
    print(
        "| intervention | truth | paired coverage | unpaired coverage | paired width | "
        "unpaired width | ratio | predicted |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, truth in (("illegal", TRUE_CHANGE), ("null", 0.0)):
        rho = float(frame[f"rho:{name}"].mean())
        ratio = frame[f"unpaired_width:{name}"].mean() / frame[f"width:{name}"].mean()
        print(f"| {name} | {truth:+.2f} | {frame[f'covered:{name}'].mean():.3f} | "
              f"{frame[f'unpaired_covered:{name}'].mean():.3f} | "
              f"{frame[f'width:{name}'].mean():.3f} | {frame[f'unpaired_width:{name}'].mean():.3f} | "
              f"{ratio:.2f} | {frame[f'predicted:{name}'].mean():.2f} (rho {rho:.2f}) |")  # fmt: skip


if __name__ == "__main__":
    main()
