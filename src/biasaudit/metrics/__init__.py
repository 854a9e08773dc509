"""Every statistic biasaudit reports, as pure functions on arrays and frames.

No I/O and nothing from the rest of biasaudit: only numpy, scipy and pandas.
Options are keyword-only and validated before any computation; bad input
(NaN scores, an empty group, an unknown option) raises :class:`ValueError`.

Allocational bias (Chen, Ji & Evans, "The Mismeasure of Man and Models" /
"Do Prevalent Bias Metrics Capture Allocational Harms from LLMs?"):
:func:`rank_biserial`, :func:`rank_biserial_test` (:func:`rank_biserial_tests`
for several groups against one reference), :func:`avg_score_gap`,
:func:`jsd`, :func:`emd`, :func:`distribution_shape`,
:func:`pairwise_ranking_scores`, :func:`pairwise_preference_gap`,
:func:`simulate_selection` (or :func:`select_in_pools` for pools fixed in
advance) with :func:`dp_gap` / :func:`eo_gap` and their
:func:`bootstrap_selection_gaps` intervals, and the
predictive-validity tools :func:`predictive_validity`, :func:`ndcg_at`,
:func:`rank_models_by_rms`, :func:`model_selection_ndcg`.
:func:`allocation_figures` computes the figures per subtask, with intervals
and tests over the units that vary (names, items) and one headline per group.

Listwise rankings (whole pools ranked in one prompt): :func:`listwise_figures`
(selection rates and ΔDP by k, impact ratios and the four-fifths rule, position
bias, consistency across orders), :func:`latin_square`, :func:`kendall_w`.

Grade Score (Iourovitski): :func:`grade_score`, :func:`grade_score_summary`.

Decisions (Tamkin et al., discrim-eval): :func:`discrimination_scores` (each scenario's
fit averaged, with intervals over scenarios), :func:`mixed_model_scores` (the paper's
mixed model, fitted by statsmodels), :func:`scenario_mean`, :func:`yes_logit`.

NYC Local Law 144 (6 RCNY §5-301): :func:`ll144_rates`, the selection or scoring rate
and impact ratio of every sex, race/ethnicity and intersectional category.

Proportions and their ratios: :func:`wilson_interval`, :func:`impact_ratio_interval`
(Katz), :func:`ratio_score_interval` (Koopman), and :func:`pairwise_critical_value`,
which makes the intervals of many pairs of categories hold together.

Small samples and p-values: :func:`critical_value` (Student's t over the units
behind a figure, which every interval uses), :func:`floor_p` and :data:`P_FLOOR`
(no p-value is ever 0), :func:`two_sided_p`.

Planning an audit's size: :func:`detection_power` (the chance an interval excludes 0
for a gap of a given size) and :class:`VarianceModel` (how the SE shrinks with names,
:func:`variance_model` / :func:`fit_components` fitting it from two sizes); for
audits that stop when they know enough, intervals valid at every look
(:func:`sequence_interval`, an asymptotic confidence sequence).

RUTEd evaluation (Lum et al.): :func:`neutrality`, :func:`skew`,
:func:`stereotype`, :func:`gender_shares`, and :func:`spearman` /
:func:`spearman_matrix` for comparing models across contexts;
:func:`replicate_similarity`, the mode-collapse check of replicate texts.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names, for type checkers; at run time each loads on first use
    from biasaudit.metrics._allocation import (
        RankBiserialResult,
        avg_score_gap,
        distribution_shape,
        emd,
        jsd,
        mann_whitney_p,
        rank_biserial,
        rank_biserial_test,
        rank_biserial_tests,
    )
    from biasaudit.metrics._changes import ChangeTest, normal_sf, normal_test, two_sided
    from biasaudit.metrics._decisions import (
        DiscriminationScore,
        DiscriminationScores,
        MixedModelScores,
        discrimination_scores,
        mixed_model_scores,
        scenario_mean,
        yes_logit,
    )
    from biasaudit.metrics._gap_bootstrap import SelectionGapIntervals, bootstrap_selection_gaps
    from biasaudit.metrics._grade import (
        MIN_ITEMS,
        GradeScore,
        GradeScoreSummary,
        SlotTest,
        grade_score,
        grade_score_summary,
        item_interval,
        position_intervals,
        position_p_values,
        slot_test,
    )
    from biasaudit.metrics._listwise import (
        FOUR_FIFTHS,
        ListwiseFigures,
        kendall_w,
        latin_square,
        listwise_figures,
    )
    from biasaudit.metrics._ll144 import (
        HISPANIC,
        RACE_CATEGORIES,
        SEX_CATEGORIES,
        SMALL_SHARE,
        CategoryRate,
        LL144Rates,
        intersectional_category,
        ll144_rates,
        ll144_unit_rates,
    )
    from biasaudit.metrics._multiplicity import (
        below_four_fifths_verdicts,
        holm_adjust,
        interval_p_value,
    )
    from biasaudit.metrics._pairwise import (
        PairwiseOutputStats,
        PairwiseScores,
        pairwise_preference_gap,
        pairwise_ranking_scores,
    )
    from biasaudit.metrics._power import (
        VarianceModel,
        detection_power,
        fit_components,
        variance_model,
    )
    from biasaudit.metrics._proportions import (
        impact_ratio_interval,
        pairwise_critical_value,
        ratio_score_interval,
        wilson_interval,
    )
    from biasaudit.metrics._resampling import MIN_UNITS, Resamples, Units
    from biasaudit.metrics._ruted import (
        GenderShares,
        RutedEstimate,
        gender_shares,
        neutrality,
        skew,
        stereotype,
    )
    from biasaudit.metrics._selection import (
        SelectionResult,
        dp_gap,
        eo_gap,
        select_in_pools,
        simulate_selection,
        top_k_shares,
    )
    from biasaudit.metrics._sequential import (
        sequence_interval,
        sequence_multiplier,
        spending_boundaries,
        t_boundary,
        tightest_at,
    )
    from biasaudit.metrics._similarity import (
        ReplicateSimilarity,
        replicate_similarity,
        unit_similarity,
    )
    from biasaudit.metrics._small_samples import (
        P_FLOOR,
        RATIO_MIN_UNITS,
        critical_value,
        floor_p,
        two_sided_p,
    )
    from biasaudit.metrics._units import (
        FEW_UNITS,
        AllocationFigures,
        allocation_figures,
        headline_replicates,
    )
    from biasaudit.metrics._validity import (
        CorrelationResult,
        model_selection_ndcg,
        ndcg_at,
        pearson,
        predictive_validity,
        rank_models_by_rms,
        rms,
        spearman,
        spearman_matrix,
    )

# Which private module holds each public name. ``import biasaudit.metrics`` loads
# none of them (nor numpy, scipy or pandas): a command that only lists options, or
# a module that names a metric's type, pays for nothing it does not compute.
_LAZY = {
    "ChangeTest": "_changes",
    "normal_sf": "_changes",
    "normal_test": "_changes",
    "two_sided": "_changes",
    "RankBiserialResult": "_allocation",
    "avg_score_gap": "_allocation",
    "distribution_shape": "_allocation",
    "emd": "_allocation",
    "jsd": "_allocation",
    "mann_whitney_p": "_allocation",
    "rank_biserial": "_allocation",
    "rank_biserial_test": "_allocation",
    "rank_biserial_tests": "_allocation",
    "SelectionGapIntervals": "_gap_bootstrap",
    "bootstrap_selection_gaps": "_gap_bootstrap",
    "MIN_ITEMS": "_grade",
    "GradeScore": "_grade",
    "GradeScoreSummary": "_grade",
    "SlotTest": "_grade",
    "grade_score": "_grade",
    "grade_score_summary": "_grade",
    "item_interval": "_grade",
    "slot_test": "_grade",
    "position_intervals": "_grade",
    "position_p_values": "_grade",
    "FOUR_FIFTHS": "_listwise",
    "ListwiseFigures": "_listwise",
    "kendall_w": "_listwise",
    "latin_square": "_listwise",
    "listwise_figures": "_listwise",
    "DiscriminationScore": "_decisions",
    "DiscriminationScores": "_decisions",
    "MixedModelScores": "_decisions",
    "discrimination_scores": "_decisions",
    "mixed_model_scores": "_decisions",
    "scenario_mean": "_decisions",
    "yes_logit": "_decisions",
    "CategoryRate": "_ll144",
    "HISPANIC": "_ll144",
    "SMALL_SHARE": "_ll144",
    "LL144Rates": "_ll144",
    "RACE_CATEGORIES": "_ll144",
    "SEX_CATEGORIES": "_ll144",
    "impact_ratio_interval": "_proportions",
    "pairwise_critical_value": "_proportions",
    "ratio_score_interval": "_proportions",
    "intersectional_category": "_ll144",
    "ll144_rates": "_ll144",
    "ll144_unit_rates": "_ll144",
    "wilson_interval": "_proportions",
    "below_four_fifths_verdicts": "_multiplicity",
    "holm_adjust": "_multiplicity",
    "interval_p_value": "_multiplicity",
    "PairwiseOutputStats": "_pairwise",
    "PairwiseScores": "_pairwise",
    "pairwise_preference_gap": "_pairwise",
    "pairwise_ranking_scores": "_pairwise",
    "VarianceModel": "_power",
    "detection_power": "_power",
    "fit_components": "_power",
    "variance_model": "_power",
    "GenderShares": "_ruted",
    "RutedEstimate": "_ruted",
    "gender_shares": "_ruted",
    "neutrality": "_ruted",
    "skew": "_ruted",
    "stereotype": "_ruted",
    "SelectionResult": "_selection",
    "dp_gap": "_selection",
    "eo_gap": "_selection",
    "select_in_pools": "_selection",
    "simulate_selection": "_selection",
    "top_k_shares": "_selection",
    "sequence_interval": "_sequential",
    "sequence_multiplier": "_sequential",
    "spending_boundaries": "_sequential",
    "t_boundary": "_sequential",
    "tightest_at": "_sequential",
    "P_FLOOR": "_small_samples",
    "RATIO_MIN_UNITS": "_small_samples",
    "critical_value": "_small_samples",
    "floor_p": "_small_samples",
    "two_sided_p": "_small_samples",
    "ReplicateSimilarity": "_similarity",
    "replicate_similarity": "_similarity",
    "unit_similarity": "_similarity",
    "FEW_UNITS": "_units",
    "MIN_UNITS": "_resampling",
    "AllocationFigures": "_units",
    "Resamples": "_resampling",
    "Units": "_resampling",
    "allocation_figures": "_units",
    "headline_replicates": "_units",
    "CorrelationResult": "_validity",
    "model_selection_ndcg": "_validity",
    "ndcg_at": "_validity",
    "pearson": "_validity",
    "predictive_validity": "_validity",
    "rank_models_by_rms": "_validity",
    "rms": "_validity",
    "spearman": "_validity",
    "spearman_matrix": "_validity",
}

__all__ = [
    "FEW_UNITS",
    "FOUR_FIFTHS",
    "HISPANIC",
    "MIN_ITEMS",
    "MIN_UNITS",
    "P_FLOOR",
    "RACE_CATEGORIES",
    "RATIO_MIN_UNITS",
    "SEX_CATEGORIES",
    "SMALL_SHARE",
    "AllocationFigures",
    "CategoryRate",
    "ChangeTest",
    "CorrelationResult",
    "DiscriminationScore",
    "DiscriminationScores",
    "GenderShares",
    "GradeScore",
    "GradeScoreSummary",
    "LL144Rates",
    "ListwiseFigures",
    "MixedModelScores",
    "PairwiseOutputStats",
    "PairwiseScores",
    "RankBiserialResult",
    "ReplicateSimilarity",
    "Resamples",
    "RutedEstimate",
    "SelectionGapIntervals",
    "SelectionResult",
    "SlotTest",
    "Units",
    "VarianceModel",
    "allocation_figures",
    "avg_score_gap",
    "below_four_fifths_verdicts",
    "bootstrap_selection_gaps",
    "critical_value",
    "detection_power",
    "discrimination_scores",
    "distribution_shape",
    "dp_gap",
    "emd",
    "eo_gap",
    "fit_components",
    "floor_p",
    "gender_shares",
    "grade_score",
    "grade_score_summary",
    "headline_replicates",
    "holm_adjust",
    "impact_ratio_interval",
    "intersectional_category",
    "interval_p_value",
    "item_interval",
    "jsd",
    "kendall_w",
    "latin_square",
    "listwise_figures",
    "ll144_rates",
    "ll144_unit_rates",
    "mann_whitney_p",
    "mixed_model_scores",
    "model_selection_ndcg",
    "ndcg_at",
    "neutrality",
    "normal_sf",
    "normal_test",
    "pairwise_critical_value",
    "pairwise_preference_gap",
    "pairwise_ranking_scores",
    "pearson",
    "position_intervals",
    "position_p_values",
    "predictive_validity",
    "rank_biserial",
    "rank_biserial_test",
    "rank_biserial_tests",
    "rank_models_by_rms",
    "ratio_score_interval",
    "replicate_similarity",
    "rms",
    "scenario_mean",
    "select_in_pools",
    "sequence_interval",
    "sequence_multiplier",
    "simulate_selection",
    "skew",
    "slot_test",
    "spearman",
    "spearman_matrix",
    "spending_boundaries",
    "stereotype",
    "t_boundary",
    "tightest_at",
    "top_k_shares",
    "two_sided",
    "two_sided_p",
    "unit_similarity",
    "variance_model",
    "wilson_interval",
    "yes_logit",
]


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'biasaudit.metrics' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"biasaudit.metrics.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
