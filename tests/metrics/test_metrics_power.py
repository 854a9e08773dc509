"""Power before spending: the detection chance checked against its formula, the variance
model against the components it was built from, and the planning against simulation:
audits sized for 80% power by a pilot's intervals detect the planted gap about 80% of
the time (names with their own effects, resumes with theirs, the allocation figures'
own intervals)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from biasaudit.metrics import VarianceModel, allocation_figures, detection_power, variance_model


def test_detection_power_is_the_two_sided_z_test_s() -> None:
    z = stats.norm.ppf(0.975)
    assert detection_power(0.0, 0.1) == pytest.approx(0.05)  # no gap: the false-alarm rate
    assert detection_power(0.3, 0.1) == pytest.approx(detection_power(-0.3, 0.1))
    planned = (z + stats.norm.ppf(0.8)) * 0.05  # |d|/SE = z + z_0.8: 80% (+ the other tail)
    expected = stats.norm.cdf(planned / 0.05 - z) + stats.norm.cdf(-planned / 0.05 - z)
    assert detection_power(planned, 0.05) == pytest.approx(expected)
    assert detection_power(planned, 0.05) == pytest.approx(0.8, abs=1e-3)
    assert detection_power(0.1, 0.05, confidence=0.99) < detection_power(0.1, 0.05)
    with pytest.raises(ValueError, match="se must be positive"):
        detection_power(0.1, 0.0)


def test_the_variance_model_finds_its_components_and_the_names_that_reach_a_power() -> None:
    truth = VarianceModel(names=0.4, fixed=0.002, n_now=40)
    fitted = variance_model(truth.se(40), 40, truth.se(20), 20)
    assert fitted.names == pytest.approx(0.4) and fitted.fixed == pytest.approx(0.002)
    n = fitted.names_for(0.2, 0.8)
    assert n is not None and fitted.power(0.2, n) >= 0.8 > fitted.power(0.2, n - 1)
    # The resumes' share alone keeps the interval at least ±z·sqrt(B) = ±0.088 wide: a
    # gap of 0.1 is reached with enough names, one of 0.08 never.
    assert fitted.ceiling(0.1) == 1.0 and fitted.names_for(0.1, 0.95) is not None
    assert fitted.ceiling(0.08) == 0.0 and fitted.names_for(0.08, 0.5) is None
    # The estimate spreads by the names' share alone; the interval is wider by B.
    n = 50
    se, spread = fitted.se(n), math.sqrt(fitted.names / n)
    z = stats.norm.ppf(0.975)
    expected = stats.norm.cdf((0.2 - z * se) / spread) + stats.norm.cdf((-0.2 - z * se) / spread)
    assert fitted.power(0.2, n) == pytest.approx(expected)
    assert fitted.power(0.2, n) > detection_power(0.2, se)
    # Measured apart, the spread is S/n + M; M (pools' noise) stays however many names.
    apart = VarianceModel(0.4, 0.002, 40, spread_names=0.2, spread_fixed=0.0004)
    assert apart.spread(n) == pytest.approx(math.sqrt(0.2 / n + 0.0004))
    expected = stats.norm.cdf((0.2 - z * se) / apart.spread(n)) + stats.norm.cdf(
        (-0.2 - z * se) / apart.spread(n)
    )
    assert apart.power(0.2, n) == pytest.approx(expected)
    limit = stats.norm.cdf((0.1 - z * math.sqrt(0.002)) / 0.02)
    assert apart.ceiling(0.1) == pytest.approx(limit, rel=1e-3)
    # Noise that makes the fixed part negative is read as none.
    assert variance_model(0.1, 40, 0.16, 20).fixed == 0.0


RESUMES = np.random.default_rng(7).normal(0, 0.5, 6)
"""Each resume's own effect: the same six resumes in every audit, as a task's shipped
resumes are; the names are drawn afresh."""


def simulate(names: int, seed: int, gap: float = -0.3) -> tuple[np.ndarray, ...]:
    """Scores of two groups on six resumes: each name's own effect (SD 0.5), each resume's
    (:data:`RESUMES`), the answer's noise (SD 0.5), and the planted gap on the log-odds
    scale."""
    rng = np.random.default_rng(seed)
    items = RESUMES
    scores, groups, who, what = [], [], [], []
    for group in ("W_M", "B_M"):
        for name in range(names):
            own = rng.normal(0, 0.5) + (gap if group == "B_M" else 0.0)
            for item in range(6):
                logit = own + items[item] + rng.normal(0, 0.5)
                scores.append(1 / (1 + math.exp(-logit)))
                groups.append(group)
                who.append(f"{group}-{name}")
                what.append(f"r{item}")
    return np.array(scores), np.array(groups), np.array(who), np.array(what)


def dp_gap(names: int, seed: int, replicates: int = 200) -> tuple[float, float, float]:
    """ΔDP at k=1 with its interval (``replicates``: the fewest, 20, where only the
    estimate is read)."""
    scores, groups, who, what = simulate(names, seed)
    figures = allocation_figures(
        scores, groups, reference="W_M", names=who, items=what, k_max=1,
        n_bootstrap=replicates, n_gap_bootstrap=replicates, n_permutations=20, n_omnibus=20,
        seed=seed,
    )  # fmt: skip
    table = figures.table
    row = table[(table["figure"] == "dp_gap") & table["subtask"].isna()].iloc[0]
    return float(row["estimate"]), float(row["low"]), float(row["high"])


@pytest.mark.slow
def test_audits_planned_at_80_percent_power_detect_the_gap_about_80_percent_of_the_time(
    full_size: bool,
) -> None:
    """The true ΔDP comes from many audits; each of four pilots (40 names per group) sizes
    an audit for 80% power from its own interval (SE scaled by 1/sqrt(names)); repeated
    audits of that size, new names on the same resumes, detect the gap in 75-85% of runs
    overall. (Measured: 83%.) Sized down without ``--calibration``: two pilots of 25
    audits, whose detection rate's Wilson interval must hold 80%."""
    truths = [dp_gap(60, 10_000 + s, replicates=20)[0] for s in range(60 if full_size else 30)]
    true_gap = float(np.mean(truths))
    z = stats.norm.ppf(0.975)
    detected = runs = 0
    for pilot in range(4 if full_size else 2):
        _, low, high = dp_gap(40, 900 + pilot)
        se = (high - low) / (2 * z)
        size = VarianceModel(se * se * 40, 0.0, 40).names_for(true_gap, 0.8)
        assert size is not None
        for seed in range(60 if full_size else 25):
            _, low, high = dp_gap(size, 20_000 + 100 * pilot + seed)
            detected += high < 0 or low > 0
            runs += 1
    if full_size:
        assert 0.75 <= detected / runs <= 0.85, detected / runs
    else:
        rate = detected / runs
        half = z * math.sqrt(rate * (1 - rate) / runs + z * z / (4 * runs * runs))
        centre = (rate + z * z / (2 * runs)) / (1 + z * z / runs)
        assert abs(centre - 0.8) <= half / (1 + z * z / runs), (detected, runs)


def test_plans_from_a_pilot_reach_the_target_on_average_when_they_allow_for_its_variance() -> None:
    """Pilots of 30 units estimate a unit's variance (s² = sigma² χ²_29 / 29). Planned
    with the estimate plugged in, the audits' true power averages below 80% (an
    underestimate loses more than an overestimate gains); planned with ``df`` (the
    expected power over the variance's uncertainty, Julious & Owen 2006), it averages
    80% within simulation noise. The true power is the z-test's at the planned size."""
    rng = np.random.default_rng(11)
    sigma2, effect, df = 0.25, 0.1, 29
    estimates = sigma2 * rng.chisquare(df, size=1000) / df

    def average(with_df: bool) -> float:
        powers = []
        for s2 in estimates:
            model = VarianceModel(float(s2), 0.0, df + 1, df=df if with_df else None)
            n = model.names_for(effect, 0.8)
            assert n is not None
            powers.append(detection_power(effect, math.sqrt(sigma2 / n)))
        return float(np.mean(powers))

    plugged, allowed = average(False), average(True)
    assert plugged < 0.79
    assert allowed == pytest.approx(0.8, abs=0.01), (plugged, allowed)
    known = VarianceModel(sigma2, 0.0, 30)
    assert VarianceModel(sigma2, 0.0, 30, df=29).power(effect, 200) < known.power(effect, 200)
    assert VarianceModel(sigma2, 0.0, 30, df=100_000).power(effect, 200) == pytest.approx(
        known.power(effect, 200), abs=1e-3
    )
