"""The test of "no change" of one figure between two runs, and how each kind's change
tests are built: the kit ``biasaudit compare`` and every kind's ``change_tests`` share.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scipy import special

from biasaudit.metrics._small_samples import critical_value

__all__ = ["ChangeTest", "normal_sf", "normal_test", "paired_test", "two_sided"]


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


ROUNDING = 1e-9
"""Relative size of a difference that floating-point rounding alone can make, and less."""


def within_rounding(difference: float, *values: float) -> bool:
    """Whether ``difference`` is no larger than rounding makes of figures of the size of
    ``values`` (:data:`ROUNDING` of the largest, at least of 1)."""
    return abs(difference) <= ROUNDING * max([1.0, *(abs(v) for v in values)])


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
