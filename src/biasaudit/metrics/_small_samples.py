"""Intervals from few units: Student's t critical values with the units' degrees of freedom.

A bootstrap standard error over G clusters (names, items, occupations) is
itself estimated from G values, so ``estimate ± z·SE`` covers too little
when G is small: with 3 names per group, a 95% normal interval of a group
gap misses a true gap of 0 about 15% of the time. biasaudit therefore takes
the critical value from Student's t with the units' degrees of freedom, as
the cluster-robust literature does for few clusters (Bester, Conley &
Hansen, "Inference with dependent data using cluster covariance
estimators", J. Econometrics 165, 2011: t with G - 1 degrees of freedom;
Cameron, Gelbach & Miller, "Bootstrap-based improvements for inference with
clustered errors", Rev. Econ. Stat. 90(3), 2008, §IV).

A gap between a group and its reference rests on two samples of units; its
degrees of freedom are the smaller sample's units less one, the
conservative lower bound of the Welch-Satterthwaite degrees of freedom
(P. L. Hsu, "Contributions to the theory of Student's t-test as applied to
the problem of two samples", Statist. Res. Mem. 2, 1938; H. Scheffé,
"Practical solutions of the Behrens-Fisher problem", JASA 65, 1970). At 20
units t adds 7% to the width of a 95% interval; at 3 units it more than
doubles it. ``tests/metrics/test_metrics_small_samples.py`` and
``bench/bench_coverage.py`` check the coverage from 3 units up.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

__all__ = [
    "P_FLOOR",
    "RATIO_MIN_UNITS",
    "ROUNDING",
    "critical_value",
    "floor_p",
    "two_sided_p",
    "within_rounding",
]

# No p-value is reported below this (about the smallest normal double's 1e-308, with
# room): an analytic tail that underflows to 0 would read as certainty. Reports print
# p at or below it as "< 1e-300".
P_FLOOR = 1e-300

# An impact ratio (a rate over the most selected group's) gets an interval only from
# this many units per group: the rates of fewer names are skewed beyond what t
# corrects (3 names per group, a null world of 7 groups: 12% of 95% intervals miss 1).
RATIO_MIN_UNITS = 5


@lru_cache(maxsize=256)
def critical_value(confidence: float, units: int | None = None) -> float:
    """The two-sided critical value of a ``confidence`` interval over ``units`` units.

    Student's t with ``units - 1`` degrees of freedom; the normal quantile
    when ``units`` is None (a figure with no units to count) or large.

    Examples
    --------
    >>> round(critical_value(0.95), 3)
    1.96
    >>> round(critical_value(0.95, 3), 3)
    4.303
    """
    if units is None or units > 10_000:
        return NormalDist().inv_cdf(0.5 + confidence / 2)
    # scipy.special's Student t (what scipy.stats.t calls), without loading scipy.stats.
    from scipy.special import stdtrit

    return float(stdtrit(max(int(units), 2) - 1, 0.5 + confidence / 2))


def floor_p(p: float) -> float:
    """``p``, or :data:`P_FLOOR` where it is smaller (0 included): never exactly 0."""
    return p if math.isnan(p) else max(float(p), P_FLOOR)


def two_sided_p(statistic: float, units: int | None = None) -> float:
    """The two-sided p-value of ``statistic`` (an estimate over its standard error)
    on the distribution :func:`critical_value` uses, at least :data:`P_FLOOR`."""
    if math.isinf(statistic):
        return P_FLOOR
    if units is None or units > 10_000:
        return floor_p(2.0 * NormalDist().cdf(-abs(statistic)))
    from scipy.special import stdtr

    return floor_p(float(2.0 * stdtr(max(int(units), 2) - 1, -abs(statistic))))


ROUNDING = 1e-9
"""Relative size of a difference that floating-point rounding alone can make, and less."""


def within_rounding(difference: float, *values: float) -> bool:
    """Whether ``difference`` is no larger than rounding makes of figures of the size of
    ``values`` (:data:`ROUNDING` of the largest, at least of 1)."""
    return abs(difference) <= ROUNDING * max([1.0, *(abs(v) for v in values)])
