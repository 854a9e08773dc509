"""Power before spending: the chance an audit of a given size detects a gap of a given
size, and the size that reaches a target chance.

A figure's interval is ``estimate ± z · SE``; a gap is *detected* when its interval
excludes 0. With the estimate near normal around the true gap ``d`` and SE its
sampling standard deviation, the chance of that is (the two-sided power of a z-test;
Cohen, *Statistical Power Analysis for the Behavioral Sciences*, 1988, ch. 1)

    power(d, SE) = Φ(|d|/SE - z) + Φ(-|d|/SE - z),   z = Φ⁻¹(1 - alpha/2)

with alpha = 1 - confidence.

How SE shrinks as an audit grows is a matter of its variance components. Adding names
(the units that vary within each group) shrinks the part that comes from names; the
part from a task's fixed items (its resumes, its essays) does not shrink, however many
names are added. With ``n`` names per group

    SE(n)² = A / n + B,

``A`` the names' share and ``B`` the items' (and the model's own noise averaged over
a fixed set of prompts). :func:`variance_model` finds A and B from the SE of one
audit at two sizes: its own, and the same audit with half its names
(:func:`fit_components` of a run's figures computed on a random half of its names,
averaged over a few halves). The size that reaches a target power is then the
smallest ``n`` whose power (below) reaches it; where ``B`` alone keeps the interval
wider than the gap, no number of names reaches it and the answer says so.

The interval's width is ``z · SE(n)``, both parts. The estimate itself, over repeated
audits of the same task (new names on the same resumes), strays by less: the items are
the same in every such audit (the interval counts them as random only so that its
claim reaches resumes like these), and the pigeonhole bootstrap counts the names x
items noise more than once (Owen 2007). Its spread ``s(n)`` is best measured apart, by
a bootstrap of the names alone, ``s(n)² = S/n + M`` (``VarianceModel.spread_names``,
``spread_fixed``; without it, ``sqrt(A/n)``). The chance that the interval excludes 0
is then

    power = Φ((|d| - z·SE(n)) / s(n)) + Φ((-|d| - z·SE(n)) / s(n)),

the formula above where s = SE. As n grows (and M = 0) it tends to 1 where
|d| > z·sqrt(B) and to 0 where |d| < z·sqrt(B): no number of names narrows the
interval below the items' share.
Where the variance was estimated from a small pilot (``VarianceModel.df``, its degrees
of freedom), plugging the estimate in plans too small on average: a pilot that
underestimates the variance plans an audit that loses more power than one that
overestimates it gains. The power is then averaged over what the variance may be given
the estimate, ``sigma² = s²·df/χ²_df`` (the expected power allowing for the
uncertainty of the variance; Julious & Owen, "Sample size calculations for clinical
studies allowing for uncertainty about the variance", Pharmaceutical Statistics 5,
2006), so that audits planned from pilots reach the target on average.

The planned power is the chance of the event the report calls "beyond noise". The
tests check the planning by simulation, at the metrics level
(``tests/metrics/test_metrics_power.py``) and end to end against the simulated model
(``tests/test_power_calibration.py``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from biasaudit.metrics._small_samples import critical_value
from biasaudit.metrics._validate import check_confidence

__all__ = ["VarianceModel", "detection_power", "fit_components", "variance_model"]


_z = critical_value  # the normal quantile of a two-sided ``confidence`` interval
_phi = NormalDist().cdf


def detection_power(
    effect: float, se: float, *, confidence: float = 0.95, spread: float | None = None
) -> float:
    """The chance that an interval at ``confidence``, ``estimate ± z · se``, around an
    estimate of true value ``effect`` excludes 0; see the module docstring. The estimate
    spreads with SD ``spread`` [default: ``se``]: ``Φ((|d| - z·se)/spread) +
    Φ((-|d| - z·se)/spread)``.

    Raises
    ------
    ValueError
        ``se`` is not positive and finite, or ``effect`` is not finite.
    """
    check_confidence(confidence)
    if not (math.isfinite(se) and se > 0) or not math.isfinite(effect):
        raise ValueError(f"se must be positive and finite and effect finite, got {se}, {effect}")
    spread = se if spread is None else spread
    if not (math.isfinite(spread) and spread > 0):
        raise ValueError(f"spread must be positive and finite, got {spread}")
    z = _z(confidence)
    return _phi((abs(effect) - z * se) / spread) + _phi((-abs(effect) - z * se) / spread)


@dataclass(frozen=True)
class VarianceModel:
    """``SE(n)² = names / n + fixed`` (see the module docstring): ``names`` the variance
    that more names shrink (A), ``fixed`` what they do not (B); ``n_now`` the names per
    group of the audit it was fitted on. Where it was measured apart, the estimate's own
    spread over repeated audits of the same items is ``spread_names / n +
    spread_fixed`` (what more names shrink, and what they do not: the noise of a fixed
    number of simulated pools); else ``sqrt(names / n)``."""

    names: float
    fixed: float
    n_now: int
    spread_names: float | None = None
    spread_fixed: float = 0.0
    df: int | None = None
    """The degrees of freedom of the variance's estimate (a pilot's units - 1), where the
    power is to allow for its uncertainty (see the module docstring); None: taken as
    known."""

    def se(self, n: float) -> float:
        """The SE with ``n`` names per group."""
        return math.sqrt(self.names / n + self.fixed)

    def spread(self, n: float) -> float:
        """The estimate's SD over repeated audits with ``n`` names per group."""
        if self.spread_names is not None and self.spread_names / n + self.spread_fixed > 0:
            return math.sqrt(self.spread_names / n + self.spread_fixed)
        return math.sqrt(self.names / n) if self.names > 0 else self.se(n)

    def power(self, effect: float, n: float, *, confidence: float = 0.95) -> float:
        """The chance the interval excludes 0 with ``n`` names per group: its width from
        :meth:`se`, the estimate's spread from :meth:`spread` (the items are the same in
        every audit of the task; see the module docstring); with ``df``, averaged over
        the variance's uncertainty."""
        se, spread = self.se(n), self.spread(n)
        if self.df is None:
            return detection_power(effect, se, confidence=confidence, spread=spread)
        detection_power(effect, se, confidence=confidence, spread=spread)  # checks the inputs
        z, d = _z(confidence), abs(effect)
        found = 0.0
        for scale in _variance_scales(self.df):  # the SE and the spread scale alike
            root = math.sqrt(scale)
            found += _phi((d - z * se * root) / (spread * root))
            found += _phi((-d - z * se * root) / (spread * root))
        return found / len(_variance_scales(self.df))

    def ceiling(self, effect: float, *, confidence: float = 0.95) -> float:
        """The power that many names approach: where the estimate's spread vanishes, 1
        if the interval narrows below ``|effect|`` (no items' share, or ``|effect| >
        z·sqrt(fixed)``) and 0 if not; where part of it stays, the power at the limit."""
        if self.spread_names is not None:
            limit = math.sqrt(self.spread_fixed)
        else:
            limit = 0.0 if self.names > 0 else math.sqrt(self.fixed)
        if limit > 0:
            width = math.sqrt(self.fixed)
            return detection_power(effect, width if width > 0 else limit, confidence=confidence,
                                   spread=limit)  # fmt: skip
        if self.fixed <= 0:
            return 1.0
        return 1.0 if abs(effect) > _z(confidence) * math.sqrt(self.fixed) else 0.0

    def names_for(
        self, effect: float, power: float, *, confidence: float = 0.95, most: int = 1_000_000
    ) -> int | None:
        """The fewest names per group whose power reaches ``power``; None where no number
        up to ``most`` does (the fixed part keeps it below)."""
        if not 0 < power < 1:
            raise ValueError(f"power must be in (0, 1), got {power}")
        if self.ceiling(effect, confidence=confidence) < power:
            return None
        if self.power(effect, 1, confidence=confidence) >= power:
            return 1
        low, high = 1, 2
        while self.power(effect, high, confidence=confidence) < power:
            low, high = high, high * 2
            if high > most:
                return None
        while high - low > 1:
            middle = (low + high) // 2
            if self.power(effect, middle, confidence=confidence) >= power:
                high = middle
            else:
                low = middle
        return high


@functools.cache
def _variance_scales(df: int, points: int = 64) -> tuple[float, ...]:
    """Equally likely values of sigma²/s² given an estimate s² on ``df`` degrees of
    freedom: ``df/q`` at the midpoint quantiles q of χ²_df."""
    from scipy import stats

    quantiles = stats.chi2.ppf([(i + 0.5) / points for i in range(points)], max(df, 1))
    return tuple(float(max(df, 1) / q) for q in quantiles)


def variance_model(se_full: float, n_full: int, se_half: float, n_half: int) -> VarianceModel:
    """A and B from the SE at ``n_full`` and at ``n_half`` names per group (two
    equations ``SE² = A/n + B``). A negative B (noise in the two SEs) is taken as 0 and A
    refitted on the full audit alone; a negative A as no names' share at all.

    Raises
    ------
    ValueError
        The SEs are not positive, or the sizes are not distinct positive counts.
    """
    if not (se_full > 0 and se_half > 0) or not (0 < n_half < n_full):
        raise ValueError("need positive SEs at two sizes, n_half < n_full")
    v_full, v_half = se_full**2, se_half**2
    names = (v_half - v_full) / (1 / n_half - 1 / n_full)
    fixed = v_full - names / n_full
    if names <= 0:
        return VarianceModel(0.0, v_full, n_full)
    if fixed < 0:
        return VarianceModel(v_full * n_full, 0.0, n_full)
    return VarianceModel(names, fixed, n_full)


def fit_components(
    se_full: float, n_full: int, se_halves: Sequence[float], n_half: int
) -> VarianceModel:
    """:func:`variance_model` with the SE at half size averaged over several random
    halves of the names (as variances: the mean of SE²)."""
    found = [s for s in se_halves if s > 0 and math.isfinite(s)]
    if not found:
        raise ValueError("no usable SE at half size")
    mean_half = math.sqrt(sum(s * s for s in found) / len(found))
    return variance_model(se_full, n_full, mean_half, n_half)
