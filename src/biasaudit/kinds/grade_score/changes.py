"""Did a judge's Grade Score change between two runs? Mean Grade Score, entropy and
choice scores by a paired t-test over the items both runs scored; see
:mod:`biasaudit.reports.compare`."""

from __future__ import annotations

import math
from functools import partial

import pandas as pd
from scipy import special

from biasaudit.kinds.common import RunPair
from biasaudit.kinds.grade_score.metrics_file import ITEMS_COLUMNS
from biasaudit.metrics import ChangeTest, two_sided
from biasaudit.store.tables import read_run_table

__all__ = ["change_tests"]


def _t_sf(df: int, x: float) -> float:
    """Student t's upper tail with ``df`` degrees of freedom (scipy.stats.t.sf's own)."""
    return float(special.stdtr(df, -x))


_GRADE_SCORES = {"grade_score": "grade", "entropy": "entropy", "choice": "choice"}


def change_tests(pair: RunPair) -> list[ChangeTest]:
    """One paired test per score over the items both runs scored, B - A."""
    items_a = read_run_table(pair.path_a / "items.csv", ITEMS_COLUMNS).set_index("item_id")
    items_b = read_run_table(pair.path_b / "items.csv", ITEMS_COLUMNS).set_index("item_id")
    tests = []
    for metric, column in _GRADE_SCORES.items():
        both = pd.concat([items_a[column], items_b[column]], axis=1, join="inner").dropna()
        if len(both) < 2:
            pair.notes.append(f"{metric}: fewer than two items scored in both runs; not tested")
            continue
        before, after = both.iloc[:, 0].to_numpy(float), both.iloc[:, 1].to_numpy(float)
        diffs = after - before
        diff = float(diffs.mean())
        se = float(diffs.std(ddof=1) / math.sqrt(len(diffs)))
        df = len(diffs) - 1
        t = float(special.stdtrit(df, 0.975))
        p = two_sided(diff, se, partial(_t_sf, df))
        interval = (diff - t * se, diff + t * se)
        method = f"paired t over {len(diffs)} items"
        mean_a, mean_b = float(before.mean()), float(after.mean())
        tests.append(ChangeTest(metric, None, mean_a, mean_b, diff, interval, p, method))
    return tests
