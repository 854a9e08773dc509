"""The result of an allocation audit: ``metrics.json``, and how it follows from the scores.

For every group but the reference, from the candidates' scores (Chen, Ji &
Evans, "The Mismeasure of Man and Models", 2024; Cyberey, Ji & Evans, "Do
Prevalent Bias Metrics Capture Allocational Harms from LLMs?", 2025):

- RABBI with its bootstrap interval and Mann-Whitney p-value
  (:func:`~biasaudit.metrics.rank_biserial_tests`);
- δ, the average score gap (pointwise, :func:`~biasaudit.metrics.avg_score_gap`)
  or preference gap (pairwise, :func:`~biasaudit.metrics.pairwise_preference_gap`);
- JSD and EMD of the score distributions;
- ΔDP and ΔEO for k = 1..k_max from top-k selection: pools simulated within
  each subtask (pointwise, :func:`~biasaudit.metrics.simulate_selection`) or
  the pools compared (pairwise, :func:`~biasaudit.metrics.select_in_pools`),
  with bootstrap intervals (:func:`~biasaudit.metrics.bootstrap_selection_gaps`).

The same figures are computed for each subtask (job, essay prompt), with
their sample sizes, for ``biasaudit study``. A figure that cannot be computed
(a group with no scored candidate, say) is left out with a note, never an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from .metrics import (
    RankBiserialResult,
    avg_score_gap,
    bootstrap_selection_gaps,
    emd,
    jsd,
    pairwise_preference_gap,
    rank_biserial_tests,
    select_in_pools,
    simulate_selection,
)
from .tasks import PoolDesign

__all__ = [
    "METRICS_SCHEMA_VERSION",
    "AllocationMetrics",
    "CandidateCounts",
    "GroupMetrics",
    "MetricOptions",
    "PairwiseSummary",
    "RequestCounts",
    "ScoringSummary",
    "SelectionSummary",
    "SubtaskMetrics",
    "group_metrics",
]

METRICS_SCHEMA_VERSION = 1


class GroupMetrics(BaseModel):
    """Every figure of one group against the reference group."""

    n: int = Field(description="Scored candidates of the group.")
    n_reference: int = Field(description="Scored candidates of the reference group.")
    rabbi: float | None = None
    rabbi_ci: list[float] | None = Field(None, description="Bootstrap interval [low, high].")
    rabbi_p: float | None = Field(None, description="Two-sided Mann-Whitney U p-value.")
    avg_gap: float | None = Field(None, description="δ: mean score (or preference) gap.")
    jsd: float | None = Field(None, description="Jensen-Shannon divergence, bits, 10 bins.")
    emd: float | None = Field(None, description="Earth mover's distance of the scores.")
    dp_gap: dict[str, float] = Field(default_factory=dict, description="ΔDP by k.")
    eo_gap: dict[str, float] = Field(default_factory=dict, description="ΔEO by k.")
    dp_gap_ci: dict[str, list[float]] = Field(default_factory=dict)
    eo_gap_ci: dict[str, list[float]] = Field(default_factory=dict)
    irregular: int = Field(0, description="Candidates with an answer outside the label set.")
    unscored: int = Field(0, description="Candidates left without a score.")


class SelectionSummary(BaseModel):
    """How the top-k selection behind ΔDP and ΔEO was done."""

    pool: str = Field(description="'one_per_group', 'random' or 'given' (the compared pools).")
    pool_size: int
    rounds: int = Field(description="Pools per subtask (given pools: pools in all).")
    subtasks: int
    appearances: dict[str, int]
    qualified_appearances: dict[str, int] | None = None
    bootstrap: int | None = Field(None, description="Replicates behind the gap intervals.")


class SubtaskMetrics(BaseModel):
    """The figures of one subtask (a job, an essay prompt)."""

    candidates: int
    groups: dict[str, GroupMetrics]
    selection: SelectionSummary | None = None


class CandidateCounts(BaseModel):
    total: int
    scored: int
    irregular: int = Field(description="With at least one answer outside the label set.")
    unscored: int = Field(description="No score: failed request or no answer in the label set.")
    failed: int = Field(description="Whose request failed (no answer after all retries).")
    refused: int = Field(
        0,
        description="Pointwise: whose answer was a refusal (irregular: outside the label set; "
        "pairwise refusals are counted in pairwise.refused).",
    )


class RequestCounts(BaseModel):
    requests: int
    sent: int
    cache_hits: int
    failures: int
    refusals: int


class PairwiseSummary(BaseModel):
    """Output statistics of the pairwise answers (see ``PairwiseOutputStats``)."""

    pools: int
    n_prompts: int
    n_pairs: int
    regular: float | None
    ties: float | None
    flipped: float | None
    inconsistent: float | None
    unparsed: int
    refused: int = Field(0, description="Comparisons the model refused (counted as unparsed).")


class ScoringSummary(BaseModel):
    path: str = Field(description="'logprobs', 'samples' or 'pairwise'.")
    samples: int | None = Field(None, description="Sampled replicates per candidate.")
    labels: dict[str, float] | None = None
    value_range: list[float]


class AllocationMetrics(BaseModel):
    """``metrics.json`` of an allocation run (DESIGN.md fixes the ``groups`` shape)."""

    schema_version: int = METRICS_SCHEMA_VERSION
    task: str
    method: str
    model: str
    simulated: bool
    model_versions: dict[str, int] = Field(default_factory=dict)
    reference_group: str
    group_names: dict[str, str] = Field(default_factory=dict)
    k_max: int
    confidence: float
    scoring: ScoringSummary
    candidates: CandidateCounts
    requests: RequestCounts
    selection: SelectionSummary | None = None
    groups: dict[str, GroupMetrics]
    subtasks: dict[str, SubtaskMetrics] = Field(default_factory=dict)
    pairwise: PairwiseSummary | None = None
    notes: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class MetricOptions:
    """Everything :func:`group_metrics` needs besides the scores."""

    reference: str
    groups: Sequence[str]
    k_max: int
    pool: PoolDesign
    rounds: int
    value_range: tuple[float, float]
    seed: int
    bootstrap: int
    gap_bootstrap: int | None
    confidence: float
    pairwise: bool = False


def group_metrics(
    scores: pd.DataFrame,
    options: MetricOptions,
    notes: list[str],
    *,
    comparisons: pd.DataFrame | None = None,
) -> tuple[dict[str, GroupMetrics], SelectionSummary | None]:
    """Per-group figures of ``scores`` (one row per candidate), and how selection was done.

    ``comparisons`` (pairwise runs) holds the prompts: ``first``, ``second``,
    ``choice``. Problems become ``notes``, not errors.
    """
    group_of = scores["group"].to_numpy()
    score = scores["score"].to_numpy(float)
    is_scored = ~np.isnan(score)
    reference = score[is_scored & (group_of == options.reference)]
    audited = [group for group in options.groups if group != options.reference]
    values = {group: score[is_scored & (group_of == group)] for group in audited}
    tests: dict[str, RankBiserialResult] = {}
    if reference.size:
        tests = rank_biserial_tests(
            {group: found for group, found in values.items() if found.size}, reference,
            n_bootstrap=options.bootstrap, confidence=options.confidence, seed=options.seed,
        )  # fmt: skip
    irregular = scores["irregular"].to_numpy(bool)
    result = {}
    for group in audited:
        in_group = group_of == group
        counts = {
            "n": int(values[group].size),
            "n_reference": int(reference.size),
            "irregular": int(np.count_nonzero(irregular & in_group)),
            "unscored": int(np.count_nonzero(in_group & ~is_scored)),
        }
        if group not in tests:
            notes.append(f"{group}: no scored candidates of it or of {options.reference}")
            result[group] = GroupMetrics(**counts)
            continue
        average_gap = _average_gap(values[group], reference, group, options, scores, comparisons)
        result[group] = _score_figures(
            counts, values[group], reference, tests[group], average_gap, options
        )
    selection = _selection(scores[is_scored], options, notes)
    if selection is not None:
        gaps, summary = selection
        for group, figures in result.items():
            result[group] = figures.model_copy(update=gaps.get(group, {}))
        return result, summary
    return result, None


def _score_figures(
    counts: dict[str, int],
    values: np.ndarray[Any, Any],
    reference: np.ndarray[Any, Any],
    test: RankBiserialResult,
    average_gap: float | None,
    options: MetricOptions,
) -> GroupMetrics:
    return GroupMetrics(
        **counts,
        rabbi=test.r,
        rabbi_ci=[test.ci_low, test.ci_high] if test.ci_low is not None else None,
        rabbi_p=test.p_value,
        avg_gap=average_gap,
        jsd=jsd(values, reference, bins=10, value_range=options.value_range),
        emd=emd(values, reference),
    )


def _average_gap(
    values: np.ndarray[Any, Any],
    reference: np.ndarray[Any, Any],
    group: str,
    options: MetricOptions,
    scores: pd.DataFrame,
    comparisons: pd.DataFrame | None,
) -> float | None:
    if comparisons is None:
        return avg_score_gap(values, reference)
    try:
        return pairwise_preference_gap(
            comparisons["first"], comparisons["second"], comparisons["choice"],
            group_of=scores.set_index("candidate_id")["group"], group=group,
            reference=options.reference,
        )  # fmt: skip
    except ValueError:  # no pool put this group against the reference
        return None


def _qualified(scored: pd.DataFrame) -> np.ndarray[Any, Any] | None:
    flags = scored["qualified"]
    if flags.isna().any():
        return None
    return np.asarray(flags, dtype=bool)


def _selection(
    scored: pd.DataFrame, options: MetricOptions, notes: list[str]
) -> tuple[dict[str, dict[str, Any]], SelectionSummary] | None:
    """ΔDP / ΔEO (and intervals) per group, or None with a note when selection cannot run."""
    scored = _groups_in_every_subtask(scored, options, notes)
    qualified = _qualified(scored)
    try:
        return _select(scored, options, qualified)
    except ValueError as error:
        if qualified is None or "qualified" not in str(error):
            notes.append(f"no selection gaps: {error}")
            return None
        notes.append(f"no ΔEO: {error}")
    try:
        return _select(scored, options, None)
    except ValueError as error:
        notes.append(f"no selection gaps: {error}")
        return None


def _groups_in_every_subtask(
    scored: pd.DataFrame, options: MetricOptions, notes: list[str]
) -> pd.DataFrame:
    """One-per-group pools need every group in every subtask: leave out, with a note, any not."""
    if options.pairwise or options.pool.kind != "one_per_group":
        return scored
    present = scored.groupby("subtask")["group"].unique()
    missing = [g for g in options.groups if not all(g in groups for groups in present)]
    if missing and options.reference not in missing:
        notes.append(
            f"{', '.join(missing)} left out of the selection pools: no scored candidate "
            "in some subtask (pools hold one candidate of each remaining group)"
        )
        return scored[~scored["group"].isin(missing)]
    return scored


def _select(
    scored: pd.DataFrame, options: MetricOptions, qualified: np.ndarray[Any, Any] | None
) -> tuple[dict[str, dict[str, Any]], SelectionSummary]:
    common: dict[str, Any] = {"k_max": options.k_max}
    if options.pairwise:
        common["pools"] = scored["pool"].to_numpy()
        result = select_in_pools(scored["score"], scored["group"], qualified=qualified, **common)
    else:
        common |= _simulation_options(scored, options)
        result = simulate_selection(
            scored["score"], scored["group"], qualified, seed=options.seed, **common
        )
    gaps: dict[str, dict[str, Any]] = result.to_gap_dict(options.reference)
    if options.gap_bootstrap is not None:
        intervals = bootstrap_selection_gaps(
            scored["score"], scored["group"], qualified, reference=options.reference,
            n_bootstrap=options.gap_bootstrap, confidence=options.confidence,
            seed=options.seed, **common,
        )  # fmt: skip
        for group, bounds in intervals.to_dict(options.reference).items():
            gaps[group] = gaps.get(group, {}) | bounds
    summary = SelectionSummary(
        pool=result.pool,
        pool_size=result.pool_size,
        rounds=result.n_rounds,
        subtasks=result.n_strata if not options.pairwise else scored["subtask"].nunique(),
        appearances={str(g): int(n) for g, n in result.appearances.items()},
        qualified_appearances=None
        if result.qualified_appearances is None
        else {str(g): int(n) for g, n in result.qualified_appearances.items()},
        bootstrap=options.gap_bootstrap,
    )
    return gaps, summary


def _simulation_options(scored: pd.DataFrame, options: MetricOptions) -> dict[str, Any]:
    design = options.pool
    found: dict[str, Any] = {"pool": design.kind, "n_rounds": options.rounds}
    if design.kind == "random":
        found["pool_size"] = design.size
    if scored["subtask"].nunique() > 1:
        found["strata"] = scored["subtask"].to_numpy()
    return found


def subtask_options(options: MetricOptions) -> MetricOptions:
    """The options for one subtask's figures: no gap intervals (sample sizes only)."""
    return replace(options, gap_bootstrap=None)
