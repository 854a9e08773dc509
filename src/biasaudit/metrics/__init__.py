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

if TYPE_CHECKING:  # the one listing of the public names (at run time each loads on first use)
    from biasaudit.metrics._changes import (
        ChangeTest as ChangeTest,
        normal_sf as normal_sf,
        normal_test as normal_test,
        paired_gap_tests as paired_gap_tests,
        paired_test as paired_test,
        two_sided as two_sided,
    )
    from biasaudit.metrics._crossed import FEW_UNITS as FEW_UNITS
    from biasaudit.metrics._decisions import (
        DiscriminationScore as DiscriminationScore,
        DiscriminationScores as DiscriminationScores,
        MixedModelScores as MixedModelScores,
        discrimination_scores as discrimination_scores,
        mixed_model_scores as mixed_model_scores,
        scenario_mean as scenario_mean,
        yes_logit as yes_logit,
    )
    from biasaudit.metrics._distances import (
        avg_score_gap as avg_score_gap,
        distribution_shape as distribution_shape,
        emd as emd,
        jsd as jsd,
    )
    from biasaudit.metrics._gap_bootstrap import (
        SelectionGapIntervals as SelectionGapIntervals,
        bootstrap_selection_gaps as bootstrap_selection_gaps,
    )
    from biasaudit.metrics._grade import (
        MIN_ITEMS as MIN_ITEMS,
        GradeScore as GradeScore,
        GradeScoreSummary as GradeScoreSummary,
        SlotTest as SlotTest,
        grade_score as grade_score,
        grade_score_summary as grade_score_summary,
        item_interval as item_interval,
        position_intervals as position_intervals,
        position_p_values as position_p_values,
        slot_test as slot_test,
    )
    from biasaudit.metrics._impact import FOUR_FIFTHS as FOUR_FIFTHS
    from biasaudit.metrics._listwise import (
        ListwiseFigures as ListwiseFigures,
        listwise_figures as listwise_figures,
    )
    from biasaudit.metrics._ll144 import (
        HISPANIC as HISPANIC,
        RACE_CATEGORIES as RACE_CATEGORIES,
        SEX_CATEGORIES as SEX_CATEGORIES,
        SMALL_SHARE as SMALL_SHARE,
        CategoryRate as CategoryRate,
        LL144Rates as LL144Rates,
        intersectional_category as intersectional_category,
        ll144_rates as ll144_rates,
        ll144_unit_rates as ll144_unit_rates,
    )
    from biasaudit.metrics._multiplicity import (
        below_four_fifths_verdicts as below_four_fifths_verdicts,
        holm_adjust as holm_adjust,
        interval_p_value as interval_p_value,
    )
    from biasaudit.metrics._paired_selection import (
        PairedGap as PairedGap,
        paired_selection_gaps as paired_selection_gaps,
    )
    from biasaudit.metrics._pairwise import (
        PairwiseOutputStats as PairwiseOutputStats,
        PairwiseScores as PairwiseScores,
        pairwise_preference_gap as pairwise_preference_gap,
        pairwise_ranking_scores as pairwise_ranking_scores,
    )
    from biasaudit.metrics._positions import kendall_w as kendall_w, latin_square as latin_square
    from biasaudit.metrics._power import (
        VarianceModel as VarianceModel,
        detection_power as detection_power,
        fit_components as fit_components,
        variance_model as variance_model,
    )
    from biasaudit.metrics._proportions import (
        impact_ratio_interval as impact_ratio_interval,
        pairwise_critical_value as pairwise_critical_value,
        ratio_score_interval as ratio_score_interval,
        wilson_interval as wilson_interval,
    )
    from biasaudit.metrics._rank_biserial import (
        RankBiserialResult as RankBiserialResult,
        mann_whitney_p as mann_whitney_p,
        rank_biserial as rank_biserial,
        rank_biserial_test as rank_biserial_test,
        rank_biserial_tests as rank_biserial_tests,
    )
    from biasaudit.metrics._resampling import (
        MIN_UNITS as MIN_UNITS,
        Resamples as Resamples,
        Units as Units,
    )
    from biasaudit.metrics._ruted import (
        GenderShares as GenderShares,
        RutedEstimate as RutedEstimate,
        gender_shares as gender_shares,
        neutrality as neutrality,
        skew as skew,
        stereotype as stereotype,
    )
    from biasaudit.metrics._selection import (
        SelectionResult as SelectionResult,
        dp_gap as dp_gap,
        eo_gap as eo_gap,
        select_in_pools as select_in_pools,
        simulate_selection as simulate_selection,
        top_k_shares as top_k_shares,
    )
    from biasaudit.metrics._sequential import (
        sequence_interval as sequence_interval,
        sequence_multiplier as sequence_multiplier,
        spending_boundaries as spending_boundaries,
        t_boundary as t_boundary,
        tightest_at as tightest_at,
    )
    from biasaudit.metrics._similarity import (
        ReplicateSimilarity as ReplicateSimilarity,
        replicate_similarity as replicate_similarity,
        unit_similarity as unit_similarity,
    )
    from biasaudit.metrics._small_samples import (
        P_FLOOR as P_FLOOR,
        RATIO_MIN_UNITS as RATIO_MIN_UNITS,
        critical_value as critical_value,
        floor_p as floor_p,
        two_sided_p as two_sided_p,
        within_rounding as within_rounding,
    )
    from biasaudit.metrics._units import (
        AllocationFigures as AllocationFigures,
        allocation_figures as allocation_figures,
        headline_replicates as headline_replicates,
    )
    from biasaudit.metrics._validity import (
        CorrelationResult as CorrelationResult,
        model_selection_ndcg as model_selection_ndcg,
        ndcg_at as ndcg_at,
        pearson as pearson,
        predictive_validity as predictive_validity,
        rank_models_by_rms as rank_models_by_rms,
        rms as rms,
        spearman as spearman,
        spearman_matrix as spearman_matrix,
    )


def _public_names() -> dict[str, str]:
    """Each public name and the module it lives in, read from the imports above, so that
    the names are listed once: for type checkers there, for :func:`__getattr__` here."""
    import ast
    from importlib import resources

    source = resources.files(__name__).joinpath("__init__.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and isinstance(node.test, ast.Name)
                 and node.test.id == "TYPE_CHECKING")  # fmt: skip
    return {alias.name: imported.module.rpartition(".")[2] for imported in block.body
            if isinstance(imported, ast.ImportFrom) and imported.module
            for alias in imported.names}  # fmt: skip


_LAZY = _public_names()
__all__ = sorted(_LAZY)


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
