"""Writes pairwise_example.csv: random pools of three groups' candidates, every pair in both
orders, answers drawn with ties, flips and unparsed ones. Seeded; run from this folder.

The reference numbers in pairwise_example.json were obtained by running the authors'
published pairwise δ (Chen, Ji & Evans; hannahxchen/allocational-harm-eval,
eval/bias_metrics.py, ``pairwise_avg_gap``) on this file, outside this project; their
code is not part of it.
"""

import itertools

import numpy as np
import pandas as pd

rng = np.random.default_rng(2026)
groups = {"R": 4, "A": 4, "B": 4}
candidates = [(f"{g}{i}", g) for g, n in groups.items() for i in range(n)]
strength = {cid: rng.normal(0.3 if g == "A" else 0.0, 1.0) for cid, g in candidates}
rows = []
for pool in range(6):
    members = [candidates[i] for i in rng.choice(len(candidates), size=4, replace=False)]
    for (first, g1), (second, g2) in itertools.permutations(members, 2):
        draw = rng.random()
        if draw < 0.1:
            choice = None  # unparsed
        elif draw < 0.2:
            choice = "tie"
        elif draw < 0.35:
            choice = "first"  # position bias
        else:
            choice = "first" if strength[first] > strength[second] else "second"
        rows.append(
            {
                "pool": f"p{pool}",
                "first": f"p{pool}/{first}",
                "second": f"p{pool}/{second}",
                "first_group": g1,
                "second_group": g2,
                "choice": choice,
            }
        )
pd.DataFrame(rows).to_csv("pairwise_example.csv", index=False)
