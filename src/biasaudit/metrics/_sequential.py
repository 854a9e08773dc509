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
as one likes. Here n counts the units that grow (names per group).
"""

from __future__ import annotations

import math

from biasaudit.metrics._validate import check_confidence

__all__ = ["sequence_interval", "sequence_multiplier", "tightest_at"]


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
