"""The test of "no change" of one figure between two runs, and how each kind's change
tests are built: the kit ``biasaudit compare`` and every kind's ``change_tests`` share.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scipy import special

from biasaudit.metrics._small_samples import critical_value, within_rounding

__all__ = [
    "ChangeTest",
    "normal_sf",
    "normal_test",
    "paired_gap_tests",
    "paired_test",
    "two_sided",
]


@dataclass(frozen=True)
class ChangeTest:
    """One test of "no change" of one figure between run A and run B."""

    metric: str
    group: str | None
    before: float | None
    after: float | None
    difference: float
    ci: tuple[float, float]
    p_value: float
    method: str
    p_adjusted: float = 1.0

    def changed(self, alpha: float) -> bool:
        return self.p_adjusted < alpha

    @property
    def label(self) -> str:
        return f"{self.group} {self.metric}" if self.group else self.metric


def normal_test(
    metric: str,
    group: str | None,
    a: float | None,
    a_ci: Sequence[float] | None,
    b: float | None,
    b_ci: Sequence[float] | None,
    confidence: float,
) -> ChangeTest | None:
    """Difference of two independent estimates whose intervals give their standard errors."""
    if a is None or b is None or not a_ci or not b_ci:
        return None
    z = critical_value(confidence)
    se = math.hypot((a_ci[1] - a_ci[0]) / (2 * z), (b_ci[1] - b_ci[0]) / (2 * z))
    diff = b - a
    # Two runs' figures that differ by floating-point rounding alone (a planted constant
    # computed in another order) have not changed, whatever their intervals' width.
    p = 1.0 if within_rounding(diff, a, b) else two_sided(diff, se, normal_sf)
    method = "normal, from the runs' intervals"
    return ChangeTest(metric, group, a, b, diff, (diff - z * se, diff + z * se), p, method)


def paired_test(
    metric: str,
    group: str | None,
    before: Sequence[float],
    after: Sequence[float],
    confidence: float,
) -> ChangeTest | None:
    """The change of a mean over units both runs asked (each unit's figure before and
    after, in the same order): the mean of the units' differences, with Student's t
    interval and p-value on ``units - 1`` degrees of freedom (the paired t test; the
    units are the figure's units that vary, such as scenarios). None with fewer than two
    units both runs have.

    Pairing removes what a unit's two figures share (its own effect) from the error:
    the difference's variance is var(a) + var(b) - 2 cov(a, b), where two independent
    runs' intervals would count var(a) + var(b)."""
    import numpy as np

    a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    both = np.isfinite(a) & np.isfinite(b)
    a, b = a[both], b[both]
    units = int(a.size)
    if units < 2:
        return None
    differences = b - a
    diff = float(differences.mean())
    se = float(differences.std(ddof=1)) / math.sqrt(units)
    t = critical_value(confidence, units)
    if within_rounding(diff, float(a.mean()), float(b.mean())):
        p = 1.0
    elif se == 0:
        p = two_sided(diff, se, normal_sf)
    else:
        from biasaudit.metrics._small_samples import two_sided_p

        p = two_sided_p(diff / se, units)
    method = f"paired over {units} units: t on their differences"
    return ChangeTest(metric, group, float(a.mean()), float(b.mean()), diff,
                      (diff - t * se, diff + t * se), p, method)  # fmt: skip


def paired_gap_tests(
    rows: Any,
    *,
    reference: str,
    metric: str,
    confidence: float,
    replicates: int = 1000,
    seed: int = 0,
) -> list[ChangeTest]:
    """The change of each group's gap in selection rate from ``reference`` (ΔDP) between
    two runs that showed the same appearances: ``rows`` one per appearance (a candidate
    in an answer), with ``group``, ``pool`` (and ``name``, ``item``, ``subtask`` where
    known) and ``selected_a``, ``selected_b`` (1 selected, 0 not; NaN where that run's
    answer could not say).

    Each appearance's difference b - a is taken over the appearances both runs could
    say; the change of a group's gap is the mean difference of its appearances minus the
    reference's. Its interval sums the one-way variances of resampling names, items and
    pools (:class:`~biasaudit.metrics._resampling.MultiwayClusters`, as the listwise
    figures' own intervals), each resampling the same clusters in both runs, so that
    what an appearance's two answers share (its name's and its item's own effects, its
    pool's competitors) leaves the error. Student's t on the fewest clusters behind a
    group; the p-value read off the interval (:func:`~biasaudit.metrics.interval_p_value`).
    """
    import numpy as np
    import pandas as pd

    from biasaudit.metrics._multiplicity import interval_p_value
    from biasaudit.metrics._resampling import MIN_UNITS, MultiwayClusters

    both = rows[rows["selected_a"].notna() & rows["selected_b"].notna()].reset_index(drop=True)
    if both.empty or reference not in set(both["group"]):
        return []
    codes, labels = pd.factorize(both["group"].astype(str))
    clusters = MultiwayClusters.of(both, codes.astype(np.intp), np.random.default_rng(seed),
                                   replicates)  # fmt: skip
    a = both["selected_a"].to_numpy(dtype=float)
    b = both["selected_b"].to_numpy(dtype=float)
    difference = b - a
    base = codes == list(labels).index(reference)
    t = critical_value(confidence, clusters.fewest)
    tests = []
    for index, group in enumerate(labels):
        rows_g = codes == index
        if group == reference or not rows_g.any():
            continue
        units = min(np.unique(clusters.units.units[m]).size for m in (rows_g, base))
        before = float(a[rows_g].mean() - a[base].mean())
        after = float(b[rows_g].mean() - b[base].mean())
        change = float(difference[rows_g].mean() - difference[base].mean())
        draws = [(term.sign, term.rate(rows_g, difference) - term.rate(base, difference))
                 for term in clusters.terms]  # fmt: skip
        bounds = None if units < MIN_UNITS else clusters.interval(change, draws, t, -2.0, 2.0)
        if bounds is None:
            continue
        p = interval_p_value(change, bounds, confidence=confidence, units=clusters.fewest)
        if within_rounding(change, before, after):
            p = 1.0
        method = ("paired over the appearances both runs answered: names, items and pools "
                  "resampled alike, one-way variances summed")  # fmt: skip
        tests.append(ChangeTest(metric, str(group), before, after, change, bounds,
                                1.0 if p is None else p, method))  # fmt: skip
    return tests


def normal_sf(x: float) -> float:
    """The standard normal's upper tail, as scipy.stats.norm.sf computes it (from
    scipy.special, which loads in a third of scipy.stats' time)."""
    return float(special.ndtr(-x))


def two_sided(diff: float, se: float, survival: Callable[[float], Any]) -> float:
    """Two-sided p-value of ``diff`` against 0; a difference with no spread is exact
    (never 0: at least ``metrics.P_FLOOR``)."""
    from biasaudit.metrics._small_samples import P_FLOOR, floor_p

    if se == 0:
        return 1.0 if diff == 0 else P_FLOOR
    return floor_p(float(2 * survival(abs(diff) / se)))
