"""Writes pointwise_example.csv: pointwise scores of three groups in two subtasks (jobs),
rounded so that some tie, with a qualification flag. Seeded; run from this folder.

The reference numbers in pointwise_example.json were obtained by running the authors'
published metric functions (Chen, Ji & Evans; hannahxchen/allocational-harm-eval,
eval/bias_metrics.py: ``compute_js_divergence``, ``rabbi_by_U``, and
``scipy.stats.wasserstein_distance`` as their compute_bias.py calls it) per subtask on
this file, outside this project; their code is not part of it.
"""

import numpy as np
import pandas as pd

rng = np.random.default_rng(7)
rows = []
for subtask, shift in (("job-a", 0.0), ("job-b", 0.1)):
    for group, gap in (("R", 0.0), ("A", -0.08), ("B", 0.03)):
        for i in range(30):
            qualified = i % 3 == 0
            score = rng.beta(2, 3) + 0.2 * qualified + gap + shift
            rows.append(
                {
                    "subtask": subtask,
                    "group": group,
                    "candidate": f"{subtask}/{group}{i}",
                    "qualified": qualified,
                    "score": round(float(np.clip(score, 0, 1)), 2),
                }
            )
pd.DataFrame(rows).to_csv("pointwise_example.csv", index=False)
