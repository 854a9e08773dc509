"""Discrimination scores (Tamkin et al. 2023): each statistic against an independent
computation, and the intervals' coverage by simulation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf

from biasaudit.metrics import discrimination_scores, mixed_model_scores, scenario_mean, yes_logit

RACES = ["white", "black", "asian", "hispanic", "native american"]
GENDERS = ["male", "female", "non-binary"]

# lm-evaluation-harness's discrim_eval aggregation (lm_eval/tasks/discrim_eval/utils.py,
# agg_demographic_bias_regression), run outside biasaudit with statsmodels 0.15.0 on the
# rows of `_reference_rows` (2026-11-27). Its age score is the absolute value.
LM_EVAL = {
    "black": -0.3815275703921534,
    "asian": -0.02712140744471397,
    "hispanic": 0.08601200392305601,
    "native american": 0.004714471608044001,
    "female": 0.15190882300067443,
    "non-binary": -0.10006180970116725,
    "age": 0.12410337723035784,
}


def _reference_rows() -> pd.DataFrame:
    """10 scenarios x 135 persons, every value a closed formula (no random generator),
    with scenario-specific intercepts, age slopes, race and gender effects."""
    rows = []
    for q in range(10):
        for age in range(20, 101, 10):
            for gi, gender in enumerate(GENDERS):
                for ri, race in enumerate(RACES):
                    base = math.sin(3.1 * q + 0.7) * 1.5
                    slope = -0.05 + 0.04 * math.cos(2.3 * q)
                    race_effect = [0, -0.4 + 0.1 * math.sin(q), 0.05 * math.cos(q + 1), 0.1,
                                   -0.05 * math.sin(2 * q)][ri]  # fmt: skip
                    gender_effect = [0, 0.15 + 0.05 * math.cos(3 * q), -0.1][gi]
                    noise = 0.3 * math.sin(12.9898 * q + 78.233 * age + 37.719 * gi + 4.581 * ri)
                    value = base + slope * (age - 60) / 10 + race_effect + gender_effect + noise
                    rows.append({"scenario": q, "age": age, "gender": gender, "race": race,
                                 "logit": value})  # fmt: skip
    return pd.DataFrame(rows)


def test_the_papers_mixed_model_equals_lm_evaluation_harness_to_its_precision() -> None:
    fit = mixed_model_scores(_reference_rows(), age_scale="sd", paper=True)
    assert fit.error is None
    for term, expected in LM_EVAL.items():
        found = abs(fit.estimates[term]) if term == "age" else fit.estimates[term]
        assert found == pytest.approx(expected, abs=1e-6), term


def test_the_average_of_scenario_fits_is_the_mixed_models_estimate_on_a_full_grid() -> None:
    frame = _reference_rows()
    averaged = discrimination_scores(frame, age_scale="sd")
    fit = mixed_model_scores(frame, age_scale="sd", paper=True)
    for score in averaged.scores:
        assert score.estimate == pytest.approx(fit.estimates[score.term], abs=1e-6), score.term
    assert {s.scenarios for s in averaged.scores} == {10}


def test_each_scenario_fit_equals_statsmodels_ols_and_the_interval_is_t_over_scenarios() -> None:
    frame = _reference_rows()
    result = discrimination_scores(frame, confidence=0.9)
    formula = ("logit ~ I((age - 60) / 10) + C(race, Treatment('white'))"
               " + C(gender, Treatment('male'))")  # fmt: skip
    black = []
    for q, part in frame.groupby("scenario"):
        ols = smf.ols(formula, data=part).fit()
        row = result.per_scenario.set_index("scenario").loc[str(q)]
        assert row["black"] == pytest.approx(ols.params["C(race, Treatment('white'))[T.black]"])
        assert row["age"] == pytest.approx(ols.params["I((age - 60) / 10)"])
        black.append(row["black"])
    score = next(s for s in result.scores if s.level == "black")
    from scipy import stats

    low, high = stats.t.interval(0.9, len(black) - 1, np.mean(black), stats.sem(black))
    assert score.ci == pytest.approx((low, high))
    assert score.p == pytest.approx(stats.ttest_1samp(black, 0.0).pvalue)
    assert (score.scenarios, score.rows) == (10, 1350)


def _simulated(rng: np.random.Generator, scenarios: int) -> pd.DataFrame:
    """A small grid with a true black effect of -0.3 varying by scenario (SD 0.2), no
    gender effect, scenario intercepts and per-person noise."""
    ages, races, genders = [30, 60, 90], ["white", "black", "asian"], ["male", "female"]
    grid = pd.MultiIndex.from_product([range(scenarios), ages, genders, races],
                                      names=["scenario", "age", "gender", "race"])  # fmt: skip
    frame = grid.to_frame(index=False)
    intercept = rng.normal(0, 1, scenarios)[frame["scenario"]]
    black = rng.normal(-0.3, 0.2, scenarios)[frame["scenario"]]
    frame["logit"] = (intercept + np.where(frame["race"] == "black", black, 0.0)
                      + rng.normal(0, 0.4, len(frame)))  # fmt: skip
    return frame


def test_intervals_cover_a_planted_effect_and_a_null_is_flagged_at_its_level() -> None:
    rng = np.random.default_rng(2026)
    covered = flagged = 0
    draws = 300
    for _ in range(draws):
        scores = {s.level: s for s in discrimination_scores(_simulated(rng, 8)).scores}
        low, high = scores["black"].ci
        covered += low <= -0.3 <= high
        low, high = scores["female"].ci
        flagged += not low <= 0.0 <= high
    assert 0.92 <= covered / draws <= 0.98
    assert flagged / draws <= 0.08


def test_a_level_some_scenarios_lack_is_scored_over_those_that_have_it() -> None:
    frame = _reference_rows()
    frame = frame[~((frame["scenario"] == 3) & (frame["race"] == "asian"))]
    extra = frame[(frame["scenario"] == 5) & (frame["gender"] == "female")]
    frame = pd.concat([frame, extra.assign(gender="genderqueer", logit=extra["logit"] - 0.5)])
    result = discrimination_scores(frame)
    assert result.left_out == ()  # every scenario is fitted with the levels it has
    scores = {s.level: s for s in result.scores}
    assert scores["asian"].scenarios == 9 and scores["genderqueer"].scenarios == 1
    assert scores["black"].scenarios == scores["female"].scenarios == 10
    assert scores["genderqueer"].ci is not None and math.isnan(scores["genderqueer"].ci[0])
    assert result.notes == (
        "scored over the scenarios that ask about it (the others lack the level): "
        "race: asian (9 of 10 scenarios), gender: genderqueer (1 of 10 scenarios)",
    )
    # each scenario's own fit (statsmodels' OLS on that scenario alone), averaged
    formula = ("logit ~ I((age - 60) / 10) + C(race, Treatment('white'))"
               " + C(gender, Treatment('male'))")  # fmt: skip
    fits = {q: smf.ols(formula, data=part).fit().params for q, part in frame.groupby("scenario")}
    black = [p["C(race, Treatment('white'))[T.black]"] for p in fits.values()]
    asian = [p["C(race, Treatment('white'))[T.asian]"] for q, p in fits.items() if q != 3]
    assert scores["black"].estimate == pytest.approx(np.mean(black))
    assert scores["asian"].estimate == pytest.approx(np.mean(asian))
    assert scores["genderqueer"].estimate == pytest.approx(
        fits[5]["C(gender, Treatment('male'))[T.genderqueer]"]
    )
    assert scores["asian"].rows == len(frame[frame["scenario"] != 3])


def test_a_scenario_without_the_baseline_person_is_left_out_and_named() -> None:
    frame = _reference_rows()
    frame = frame[~((frame["scenario"] == 3) & (frame["race"] == "white"))]
    result = discrimination_scores(frame)
    assert result.left_out == ("3",) and "left out of the scores: 3" in result.notes[0]
    assert {s.scenarios for s in result.scores} == {9}


def test_bad_rows_raise_value_errors() -> None:
    frame = _reference_rows()
    with pytest.raises(ValueError, match="baseline person is white and male"):
        discrimination_scores(frame[frame["race"] != "white"])
    with pytest.raises(ValueError, match="finite"):
        discrimination_scores(frame.assign(logit=np.inf))
    with pytest.raises(ValueError, match="columns age"):
        discrimination_scores(frame.drop(columns="age"))


def test_logits_and_scenario_means() -> None:
    assert yes_logit(0.5) == 0.0 and yes_logit(0.0) == -10.0 and yes_logit(1.0) == 10.0
    assert yes_logit(0.75) == pytest.approx(math.log(3))
    from scipy import stats

    estimate, ci, p = scenario_mean([0.1, 0.3, 0.2, float("nan")], confidence=0.95)
    assert estimate == pytest.approx(0.2) and ci[0] < 0.2 < ci[1]
    assert p == pytest.approx(stats.ttest_1samp([0.1, 0.3, 0.2], 0.0).pvalue)
    assert math.isnan(scenario_mean([0.4])[1][0])
