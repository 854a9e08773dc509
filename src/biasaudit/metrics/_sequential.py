"""Intervals that stay valid when an audit looks at its figures as it grows and stops
once it knows enough (``--until``, issue 22): asymptotic confidence sequences.

An ordinary 95% interval, recomputed after every round and acted on as soon as it
excludes 0, is wrong far more often than 5% of the time (each look is another chance).
A confidence sequence holds at every look at once: with probability at least the
confidence, the true value lies inside the interval at *every* size n, so any rule for
stopping keeps the coverage. Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas,
"Time-uniform central limit theory and asymptotic confidence sequences" (Annals of
Statistics, 2024, Theorem 2.2) give, for an estimate that is asymptotically normal with
standard error ``SE = sigma/√n``, the interval

    estimate ± SE · m(n),
    m(n) = sqrt( 2 (n r + 1) / (n r) · log( sqrt(n r + 1) / alpha ) ),

with alpha = 1 - confidence and r = rho², which chooses the size at which the sequence
is tightest: :func:`tightest_at` sets it for a size n* (their eq. 2.3,
r = (-2 log alpha + log(-2 log alpha + 1)) / n*). At n* the multiplier is about 3.0
for 95%, where a fixed-size interval's is 1.96: that is the price of looking as often
as one likes. Here n counts the units that grow (names per group, pools, items or replicates).
"""

from __future__ import annotations

import itertools
import math

from biasaudit.metrics._small_samples import critical_value
from biasaudit.metrics._validate import check_confidence

__all__ = [
    "sequence_interval",
    "sequence_multiplier",
    "spending_boundaries",
    "t_boundary",
    "tightest_at",
]


def tightest_at(target_n: float, *, confidence: float = 0.95) -> float:
    """rho² that makes the sequence tightest at ``target_n`` units (see the module docstring).

    Raises
    ------
    ValueError
        ``target_n`` is not positive.
    """
    check_confidence(confidence)
    if not target_n > 0:
        raise ValueError(f"target_n must be positive, got {target_n}")
    alpha = 1.0 - confidence
    log_term = -2.0 * math.log(alpha)
    return (log_term + math.log(log_term + 1.0)) / target_n


def sequence_multiplier(n: float, *, target_n: float, confidence: float = 0.95) -> float:
    """m(n): the interval's half-width in SEs at ``n`` units, for a sequence tightest at
    ``target_n`` (see the module docstring)."""
    if not n > 0:
        raise ValueError(f"n must be positive, got {n}")
    rho2 = tightest_at(target_n, confidence=confidence)
    alpha = 1.0 - confidence
    nr = n * rho2
    return math.sqrt(2.0 * (nr + 1.0) / nr * math.log(math.sqrt(nr + 1.0) / alpha))


def sequence_interval(
    estimate: float, se: float, n: float, *, target_n: float, confidence: float = 0.95
) -> tuple[float, float]:
    """The confidence sequence's interval at ``n`` units: ``estimate ± se · m(n)``."""
    half = se * sequence_multiplier(n, target_n=target_n, confidence=confidence)
    return estimate - half, estimate + half


def spending_boundaries(fractions: list[float], *, confidence: float = 0.95) -> list[float]:
    """Two-sided group-sequential critical values for looks at information ``fractions``
    (increasing, the last 1): Lan & DeMets' O'Brien-Fleming-type alpha spending,
    alpha(t) = 2 (1 - Phi(z_{alpha/2} / sqrt t)) ("Discrete sequential boundaries for
    clinical trials", Biometrika 70, 1983), each look's value found so that the chance
    of crossing there first, with no gap, is the alpha spent since the look before
    (recursive numerical integration of the Brownian motion the looks sample; Armitage,
    McPherson & Rowe 1969). ``estimate ± c_k · SE_k`` at the looks are then repeated
    confidence intervals (Jennison & Turnbull 1989): all of them hold at once with
    ``confidence``, whatever the look at which the audit stops. Early values are large,
    the last near the fixed-size 1.96.

    Raises
    ------
    ValueError
        Fractions not increasing in (0, 1], or not ending at 1.
    """
    import numpy as np
    from scipy import stats

    check_confidence(confidence)
    if not fractions or any(b <= a for a, b in itertools.pairwise(fractions)):
        raise ValueError("fractions must increase")
    if not (fractions[0] > 0 and abs(fractions[-1] - 1.0) < 1e-12):
        raise ValueError("fractions must lie in (0, 1] and end at 1")
    z_half = critical_value(confidence)

    def spent(t: float) -> float:
        return float(2 * (1 - stats.norm.cdf(z_half / math.sqrt(t))))

    step = 0.005
    grid = np.arange(-12.0, 12.0 + step / 2, step)
    boundaries: list[float] = []
    density = None
    previous_t, previous_spent = 0.0, 0.0
    for t in fractions:
        if density is None:
            unrestricted = stats.norm.pdf(grid, scale=math.sqrt(t))
        else:
            spread = math.sqrt(t - previous_t)
            half = math.ceil(9 * spread / step)
            kernel = stats.norm.pdf(np.arange(-half, half + 1) * step, scale=spread) * step
            unrestricted = np.convolve(density, kernel, mode="same")
        target = spent(t) - previous_spent
        tail = np.cumsum(unrestricted[::-1])[::-1] * step  # P(S >= grid[i]), by symmetry x2

        def exit_above(b: float, tail: np.ndarray = tail) -> float:
            return 2.0 * float(np.interp(b, grid, tail))

        low, high = 0.0, 12.0
        for _ in range(80):
            middle = (low + high) / 2
            if exit_above(middle) > target:
                low = middle
            else:
                high = middle
        bound = (low + high) / 2
        boundaries.append(bound / math.sqrt(t))
        density = np.where(np.abs(grid) < bound, unrestricted, 0.0)
        previous_t, previous_spent = t, spent(t)
    return boundaries


def t_boundary(boundary: float, df: float) -> float:
    """A group-sequential critical value for a look whose SE is estimated on ``df``
    degrees of freedom: the t quantile with the normal boundary's tail probability,
    ``t_df^-1(Phi(c))`` (Jennison & Turnbull, *Group Sequential Methods with
    Applications to Clinical Trials*, 2000, section 3.8). The boundaries of
    :func:`spending_boundaries` assume a known SE; an estimated one, at a look of few
    units, crosses them too often (5.4% false alarms at 5% in ``bench/bench_until.py``
    with the normal values, 5.1% with these).

    Raises
    ------
    ValueError
        ``df`` is not positive.
    """
    from scipy import stats

    if not df > 0:
        raise ValueError(f"df must be positive, got {df}")
    return float(stats.t.ppf(stats.norm.cdf(boundary), df))
