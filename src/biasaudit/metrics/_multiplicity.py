"""Several figures read at once: Holm's adjustment, and a test read off an interval.

A table of per-group figures invites a reader to find the one interval that
misses 0; with seven groups at 95% each, one in three tables of a model with
no bias at all would show one. The flags biasaudit prints ("beyond noise",
bold cells) are therefore read after Holm's step-down adjustment over the
figures of a table (S. Holm, "A Simple Sequentially Rejective Multiple Test
Procedure", Scand. J. Statist. 6, 1979), which holds the chance of any false
flag in the table at alpha, whatever the figures' dependence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from biasaudit.metrics._small_samples import P_FLOOR, critical_value, two_sided_p
from biasaudit.metrics._validate import check_confidence

__all__ = ["below_four_fifths_verdicts", "holm_adjust", "interval_p_value"]


def holm_adjust(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values, in the order given; None stays None (not tested).

    The i-th smallest of m p-values becomes ``max_{j <= i} min(1, (m - j + 1) p_(j))``
    (Holm 1979); a figure is flagged at level alpha when its adjusted value is
    below alpha.

    Examples
    --------
    >>> holm_adjust([0.01, 0.04, None, 0.03])
    [0.03, 0.06, None, 0.06]
    """
    tested = [(p, i) for i, p in enumerate(p_values) if p is not None]
    for p, _ in tested:
        if not 0.0 <= p <= 1.0 or math.isnan(p):
            raise ValueError(f"p-values must lie in [0, 1], got {p}")
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    m = len(tested)
    for rank, (p, index) in enumerate(sorted(tested)):
        running = max(running, min(1.0, p * (m - rank)))
        adjusted[index] = round(running, 15)
    return adjusted


def interval_p_value(
    estimate: float | None,
    bounds: Sequence[float] | None,
    *,
    null: float = 0.0,
    confidence: float = 0.95,
    units: int | None = None,
) -> float | None:
    """The two-sided p-value of ``estimate`` against ``null`` that its interval implies.

    The standard error is the larger half-width over the interval's critical
    value (the larger, since an interval clipped to its figure's range is
    narrower on the clipped side only): Student's t over ``units`` units as
    :func:`~biasaudit.metrics.critical_value` gives it, normal where
    ``units`` is None. The p-value is read on the same distribution, so it is
    below 1 - ``confidence`` exactly when the interval excludes ``null``.
    None where there is no interval; an interval of no width gives 1 or
    :data:`~biasaudit.metrics.P_FLOOR` (never 0).
    """
    if estimate is None or bounds is None or len(bounds) != 2 or math.isnan(estimate):
        return None
    from biasaudit.metrics._small_samples import within_rounding

    multiplier = critical_value(check_confidence(confidence), units)
    se = max(bounds[1] - estimate, estimate - bounds[0], 0.0) / multiplier
    if within_rounding(estimate - null, estimate, null):  # rounding is not a finding
        return 1.0
    if se == 0.0:
        return P_FLOOR
    return two_sided_p(abs(estimate - null) / se, units)


def below_four_fifths_verdicts(
    ratios: Sequence[float],
    intervals: Sequence[Sequence[float] | None],
    *,
    confidence: float = 0.95,
    units: int | None = None,
    alpha: float = 0.05,
) -> list[tuple[float | None, bool]]:
    """Each impact ratio's Holm-adjusted p-value against 0.8 and its verdict.

    The family is the ratios given (one table); each p-value is read off its interval
    (:func:`interval_p_value`, Student t over ``units``), adjusted (:func:`holm_adjust`),
    and a ratio is **below four fifths beyond noise** where its adjusted p is under
    ``alpha`` and the ratio is under 0.8 (the EEOC's rule of thumb, 29 CFR
    1607.4(D)): the whole of it, not only its estimate, lies under 0.8. ``units``
    None with no interval, or a ratio without one: no verdict.

    Against 0.8, not 1: an audit's ratio is taken to the highest of its groups' own
    rates, and its interval over names and resumes leans low near 1 (with no
    difference at all, 9% of them stop short of 1: ``bench/bench_verdicts.py``), so
    a test of 1 would flag 12-15% of tables of a fair model; against 0.8 it flags
    5-8%.
    """
    four_fifths = 0.8
    adjusted = holm_adjust(
        [
            interval_p_value(ratio, bounds, null=four_fifths, confidence=confidence, units=units)
            for ratio, bounds in zip(ratios, intervals, strict=True)
        ]
    )
    return [
        (p, p is not None and p < alpha and ratio < four_fifths)
        for ratio, p in zip(ratios, adjusted, strict=True)
    ]
