"""The result of an allocation audit: ``metrics.json``, and how it follows from the scores.

For every group but the reference, from the candidates' scores (Chen, Ji &
Evans, "The Mismeasure of Man and Models", 2024; Cyberey, Ji & Evans, "Do
Prevalent Bias Metrics Capture Allocational Harms from LLMs?", 2025), each
computed within every subtask (job, essay prompt) and aggregated into one
headline per group (:func:`~biasaudit.metrics.allocation_figures`):

- RABBI, δ, JSD and EMD, on all candidates and on the qualified ones, with
  intervals over the units that vary (names, items) and permutation p-values;
- every group's selection rate, and ΔDP / ΔEO for k = 1..k_max from top-k
  selection in balanced simulated pools, or (pairwise, imported pools) in the
  pools given (:func:`~biasaudit.metrics.select_in_pools`, intervals from
  resampling the pools, :func:`~biasaudit.metrics.bootstrap_selection_gaps`);
- pairwise: δ is the preference gap of the comparisons
  (:func:`~biasaudit.metrics.pairwise_preference_gap`).

A figure that cannot be computed (a group with no scored candidate, say) is
left out with a note, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field, model_validator

from biasaudit.kinds.candidates.task import PoolDesign
from biasaudit.kinds.common import (
    FigureVerdict,
    MetricsHeader,
    RatioVerdict,
    RequestCounts,
    export_verdicts,
    figure_row,
    stored_verdict,
    table_verdicts,
    with_verdicts,
)
from biasaudit.metrics import (
    FEW_UNITS,
    MIN_UNITS,
    AllocationFigures,
    allocation_figures,
    bootstrap_selection_gaps,
    interval_p_value,
    jsd,
    listwise_figures,
    mann_whitney_p,
    pairwise_preference_gap,
    select_in_pools,
)

__all__ = [
    "METRICS_SCHEMA_VERSION",
    "SCORES_COLUMNS",
    "AllocationMetrics",
    "CandidateCounts",
    "GroupMetrics",
    "MetricOptions",
    "PairwiseSummary",
    "ScoringSummary",
    "SelectionSummary",
    "SubtaskMetrics",
    "allocation_results",
]

SCORES_COLUMNS = ("candidate_id", "group", "subtask", "score")
"""Columns every ``scores.csv`` has (audit and import) that its readers need."""

METRICS_SCHEMA_VERSION = 5


class GroupMetrics(BaseModel):
    """Every figure of one group against the reference group."""

    n: int = Field(description="Scored candidates of the group.")
    n_reference: int = Field(description="Scored candidates of the reference group.")
    units: int | None = Field(
        None, description="Units (names, else items) of the group behind the intervals."
    )
    units_reference: int | None = Field(None, description="Units of the reference group.")
    rabbi: float | None = None
    rabbi_ci: list[float] | None = Field(
        None, description="Interval [low, high] over the units (None: too few units)."
    )
    rabbi_p: float | None = Field(
        None, description="Two-sided permutation p-value: the units' group labels shuffled."
    )
    avg_gap: float | None = Field(None, description="δ: mean score (or preference) gap.")
    avg_gap_ci: list[float] | None = None
    avg_gap_p: float | None = None
    jsd: float | None = Field(None, description="Jensen-Shannon divergence, bits, 10 bins.")
    jsd_ci: list[float] | None = None
    emd: float | None = Field(None, description="Earth mover's distance of the scores.")
    emd_ci: list[float] | None = None
    n_qualified: int | None = Field(
        None, description="Qualified candidates of the group and the reference (the "
        "'_qualified' figures, which ΔEO is compared with)."
    )  # fmt: skip
    rabbi_qualified: float | None = None
    rabbi_qualified_ci: list[float] | None = None
    rabbi_qualified_p: float | None = None
    avg_gap_qualified: float | None = None
    avg_gap_qualified_ci: list[float] | None = None
    jsd_qualified: float | None = None
    jsd_qualified_ci: list[float] | None = None
    emd_qualified: float | None = None
    emd_qualified_ci: list[float] | None = None
    dp_gap: dict[str, float] = Field(default_factory=dict, description="ΔDP by k.")
    eo_gap: dict[str, float] = Field(default_factory=dict, description="ΔEO by k.")
    dp_gap_ci: dict[str, list[float]] = Field(default_factory=dict)
    eo_gap_ci: dict[str, list[float]] = Field(default_factory=dict)
    irregular: int = Field(0, description="Candidates with an answer outside the label set.")
    unscored: int = Field(0, description="Candidates left without a score.")


class SelectionSummary(BaseModel):
    """How the top-k selection behind ΔDP and ΔEO was done."""

    pool: str = Field(description="'one_per_group', 'random' or 'given' (the compared pools).")
    draw: str = Field(
        "balanced",
        description="'balanced': every candidate appears equally often (shuffled, taken in "
        "turn); 'given': the pools compared.",
    )
    pool_size: int
    rounds: int = Field(description="Pools per subtask (given pools: pools in all).")
    subtasks: int
    appearances: dict[str, int]
    qualified_appearances: dict[str, int] | None = None
    bootstrap: int | None = Field(None, description="Replicates behind the gap intervals.")


class GroupRates(BaseModel):
    """One group's own selection rates by k (the reference too)."""

    selection_rate: dict[str, float] = Field(default_factory=dict)
    selection_rate_ci: dict[str, list[float]] = Field(default_factory=dict)
    true_positive_rate: dict[str, float] = Field(default_factory=dict)
    true_positive_rate_ci: dict[str, list[float]] = Field(default_factory=dict)
    n: int = 0
    units: int | None = None


class OmnibusTest(BaseModel):
    """Permutation test that no group's selection rate differs, at one k."""

    statistic: float = Field(description="Candidate-weighted variance of the groups' rates.")
    p: float
    permutations: int


class IntervalSummary(BaseModel):
    """Which units the intervals and tests resample, and how."""

    units: str = Field(description="'names x items', 'names', 'items' or 'candidates'.")
    method: str
    bootstrap: int
    gap_bootstrap: int | None = None
    permutations: int
    headline: str = Field(description="How the headline aggregates the subtasks.")
    few_units: int = Field(description="Fewer units per group than this draw a warning.")


class SubtaskMetrics(BaseModel):
    """The figures of one subtask (a job, an essay prompt)."""

    candidates: int
    groups: dict[str, GroupMetrics]
    selection: SelectionSummary | None = None
    rates: dict[str, GroupRates] = Field(default_factory=dict)


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
    path: str = Field(
        description="'logprobs', 'continuation', 'samples', 'pairwise' or 'imported'."
    )
    samples: int | None = Field(None, description="Sampled replicates per candidate.")
    labels: dict[str, float] | None = None
    value_range: list[float]
    chat_template: str | None = Field(
        None, description="Continuation: the chat template the prompts were rendered with."
    )

    def describe(self) -> str:
        """How the scores were obtained, in one phrase for the text and HTML reports."""
        if self.path == "imported":
            return "scores imported with biasaudit score: no request was sent"
        if self.path == "pairwise":
            pairs = "both orders of every pair in a pool; score = wins per pair within the pool"
            return f"pairwise: {pairs}"
        labels = ", ".join(f"{k}={v:g}" for k, v in (self.labels or {}).items())
        if self.path == "logprobs":
            source = "first-token logprobs"
        elif self.path == "continuation":
            source = (
                "every label scored whole as a continuation of the prompt rendered with "
                f"the {self.chat_template} chat template"
            )
        else:
            source = f"{self.samples} sampled answers per candidate (temperature 1)"
        return f"pointwise: expected label value ({labels}) from {source}"


class ImpactRatio(RatioVerdict):
    """One category value's selection rate over the most selected value's (the
    four-fifths rule: 29 CFR 1607.4(D); New York City Local Law 144)."""

    category: str = Field(description="'race', 'sex', ... or 'group' (the intersections).")
    value: str
    k: int
    rate: float
    rate_ci: list[float] | None = Field(
        None, description="The rate's interval over the units that vary (names, items)."
    )
    n: int = Field(description="Candidates of the value's groups.")
    flagged: bool = Field(description="The ratio is below 0.8.")


class AllocationMetrics(MetricsHeader):
    """``metrics.json`` of an allocation run (its ``groups`` shape is a contract)."""

    schema_version: int = METRICS_SCHEMA_VERSION
    method: str
    reference_group: str
    group_names: dict[str, str] = Field(default_factory=dict)
    k_max: int
    confidence: float
    scoring: ScoringSummary
    candidates: CandidateCounts
    requests: RequestCounts
    selection: SelectionSummary | None = None
    intervals: IntervalSummary | None = None
    headline_k: int = Field(1, description="The k the headline of the report uses.")
    groups: dict[str, GroupMetrics]
    rates: dict[str, GroupRates] = Field(
        default_factory=dict, description="Every group's own selection rates, by k."
    )
    omnibus: dict[str, OmnibusTest] = Field(
        default_factory=dict, description="By k: do the groups' selection rates differ at all?"
    )
    subtasks: dict[str, SubtaskMetrics] = Field(default_factory=dict)
    impact: list[ImpactRatio] = Field(
        default_factory=list,
        description="Impact ratios per category (and group) and k: from the simulated "
        "selection (pointwise runs), or at k = 1 in the pools compared (pairwise runs).",
    )
    pairwise: PairwiseSummary | None = None
    verdicts: list[FigureVerdict] = Field(
        default_factory=list,
        description="The verdict on every RABBI, ΔDP and ΔEO (schema 5; an older run's are "
        "made on reading, as a run makes them now).",
    )
    notes: list[str] = Field(default_factory=list)

    qualified_rule: str | None = Field(
        None, description="Who counts as qualified (for ΔEO and the '_qualified' figures)."
    )
    conventions: str = Field(
        "biasaudit",
        description="'biasaudit' or 'paper': which definitions the departing figures follow "
        "(docs: Where biasaudit departs from the papers).",
    )

    @model_validator(mode="after")
    def _verdicts_made(self) -> AllocationMetrics:
        """A run's verdicts, made with its figures (and an older run's on reading)."""
        if not self.verdicts:
            self.verdicts = figure_verdicts(self)
        return self

    def interval_text(self) -> str:
        """How the intervals were made, in one phrase for every table and report."""
        level = f"{100 * self.confidence:g}%"
        if self.intervals is None:
            return f"{level} bootstrap over candidates"
        over = self.intervals.units
        bootstrap = "pigeonhole bootstrap" if over == "names x items" else "bootstrap"
        return (
            f"{level}, over {over} ({bootstrap}, Student t on the fewer {unit_noun(over)} of a "
            f"group and its reference); p: permutation of the {unit_noun(over)}' groups; "
            "headline: candidate-weighted mean of the subtasks"
        )


@dataclass(frozen=True)
class MetricOptions:
    """Everything :func:`allocation_results` needs besides the scores."""

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
    conventions: str = "biasaudit"
    categories: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class AllocationResults:
    """Everything :func:`allocation_results` finds, for ``metrics.json``."""

    groups: dict[str, GroupMetrics]
    rates: dict[str, GroupRates]
    omnibus: dict[str, OmnibusTest]
    subtasks: dict[str, SubtaskMetrics]
    selection: SelectionSummary | None
    intervals: IntervalSummary | None
    impact: list[ImpactRatio] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        """These as the fields of :class:`AllocationMetrics` of the same names."""
        return {found.name: getattr(self, found.name) for found in fields(self)}


# Pairwise intervals of ΔDP and ΔEO resample the pools compared: fewer than this say nothing.
MIN_POOLS = 5
_HEADLINE = (
    "mean of the per-subtask figures, weighted by the subtask's candidates of the group "
    "and the reference (qualified ones for ΔEO and the '_qualified' figures)"
)
_METHOD = (
    "estimate ± t·SE (Student t on the fewer units), the SE from a bootstrap of the units "
    "(names within groups and items within subtasks, crossed: the pigeonhole bootstrap; "
    "n-1 of n units per stratum), "
    "clipped to the figure's range; p-values: permutation of the units' group labels"
)
_LITTLE = (
    "; with this many units, a bag of little bootstraps (Kleiner et al. 2014: subsets of "
    "n^0.8 units, resampled to full size) and p-values from the permutation law's exact "
    "mean and variance (normal law)"
)


def allocation_results(
    scores: pd.DataFrame,
    options: MetricOptions,
    notes: list[str],
    *,
    item_column: str = "item",
    comparisons: pd.DataFrame | None = None,
) -> AllocationResults:
    """Every figure of ``scores`` (one row per candidate), per group, subtask and k.

    Intervals and tests are taken over the units that vary (names within
    groups, items within subtasks: :func:`biasaudit.metrics.allocation_figures`);
    the headline of each figure aggregates its subtasks. ``comparisons``
    (pairwise runs) holds the prompts: ``first``, ``second``, ``choice``.
    Problems become ``notes``, not errors.
    """
    is_scored = scores["score"].notna().to_numpy()
    scored = _groups_in_every_subtask(scores[is_scored], options, notes)
    subtasks = list(dict.fromkeys(scores["subtask"]))
    counts = _counts(scores, options)
    if not (scored["group"] == options.reference).any():
        for group in counts:
            notes.append(f"{group}: no scored candidates of it or of {options.reference}")
        return AllocationResults(
            {g: GroupMetrics(**c) for g, c in counts.items()}, {}, {}, {}, None, None
        )
    names = scored["name"] if "name" in scored.columns and scored["name"].notna().all() else None
    items = scored[item_column] if item_column in scored.columns else None
    figures = allocation_figures(
        scored["score"], scored["group"], reference=options.reference,
        subtasks=scored["subtask"], qualified=scored["qualified"], names=names, items=items,
        k_max=options.k_max, pool=options.pool.kind, pool_size=options.pool.size,
        n_rounds=options.rounds, value_range=options.value_range,
        n_bootstrap=options.bootstrap, n_gap_bootstrap=options.gap_bootstrap or 200,
        n_permutations=options.bootstrap, confidence=options.confidence, seed=options.seed,
        selection=not options.pairwise, categories=options.categories,
    )  # fmt: skip
    table = figures.table
    groups = _groups_of(table[table["subtask"].isna()], counts, options)
    for group, found in counts.items():
        if found["n"] == 0:
            notes.append(f"{group}: no scored candidates of it or of {options.reference}")
    per_subtask = {}
    for subtask in subtasks:
        rows = table[table["subtask"] == subtask]
        own = _counts(scores[scores["subtask"] == subtask], options)
        per_subtask[subtask] = SubtaskMetrics(
            candidates=int((scores["subtask"] == subtask).sum()),
            groups=_groups_of(rows, own, options),
            rates=_rates_of(rows),
        )
    selection = None
    if options.conventions == "paper":
        _paper_conventions(scored, options, groups, per_subtask)
    if options.pairwise:  # selection within the pools given (compared, or imported)
        if comparisons is not None:
            _pairwise_deltas(scored, comparisons, options, groups, per_subtask)
        selection = _pairwise_selection(scored, options, notes, groups, per_subtask)
    elif not table[table["figure"] == "dp_gap"].empty:
        selection = _simulated_summary(scored, options, figures)
    _unit_notes(figures, options, notes)
    _sign_notes(groups, per_subtask, notes)
    impact = figures.impact
    if options.pairwise and "pool" in scored.columns:
        impact = _pools_impact(scored, options, names, items)
    return AllocationResults(
        groups=groups,
        rates=_rates_of(table[table["subtask"].isna()]),
        omnibus={
            str(int(row.k)): OmnibusTest(
                statistic=float(row.statistic), p=float(row.p), permutations=int(row.permutations)
            )
            for row in figures.omnibus.itertuples()
        },
        subtasks=per_subtask,
        selection=selection,
        impact=impact_verdicts(
            [
                ImpactRatio(
                    category=str(row.category),
                    value=str(row.value),
                    k=int(row.k),
                    rate=float(row.rate),
                    rate_ci=None
                    if pd.isna(row.rate_low)
                    else [float(row.rate_low), float(row.rate_high)],
                    ratio=float(row.ratio),
                    ci=None if pd.isna(row.low) else [float(row.low), float(row.high)],
                    n=int(row.n),
                    flagged=bool(row.flagged),
                    beyond_noise=False,
                )
                for row in impact.itertuples()
                if not pd.isna(row.ratio)
            ],
            fewest_units(groups),
            options.confidence,
        ),
        intervals=IntervalSummary(
            units=figures.unit_kind,
            method=_METHOD + (_LITTLE if figures.little_bootstrap else ""),
            bootstrap=options.bootstrap,
            gap_bootstrap=None if options.pairwise else options.gap_bootstrap,
            permutations=options.bootstrap,
            headline=_HEADLINE,
            few_units=FEW_UNITS,
        ),
    )


def too_few_units(figures: GroupMetrics) -> bool:
    """Whether the group or the reference has too few units (names) for an interval."""
    counts = [n for n in (figures.units, figures.units_reference) if n is not None]
    return bool(counts) and min(counts) < MIN_UNITS


def too_few_to_say(figures: GroupMetrics) -> bool:
    """Whether the group or the reference has fewer than :data:`FEW_UNITS` units: its
    intervals are shown, its figures never flagged."""
    counts = [n for n in (figures.units, figures.units_reference) if n is not None]
    return not counts or min(counts) < FEW_UNITS


def gap_too_few(metrics: AllocationMetrics, figures: GroupMetrics) -> bool:
    """No gap interval for want of units, or of pools compared (pairwise)."""
    selection = metrics.selection
    few_pools = selection is not None and selection.pool == "given" and selection.rounds < MIN_POOLS
    return few_pools or too_few_units(figures)


def figure_verdicts(metrics: AllocationMetrics) -> list[FigureVerdict]:
    """The verdict on every RABBI, ΔDP and ΔEO of a run, each table its own family
    (Holm): RABBI reads its permutation p-value; a gap the p-value its interval implies
    (:func:`biasaudit.metrics.interval_p_value`), so it is flagged exactly when its
    interval, widened for the table, excludes 0. None is flagged where fewer than
    :data:`FEW_UNITS` units stand behind the group or its reference."""
    found: list[FigureVerdict] = []
    can_say = {group: not too_few_to_say(f) for group, f in metrics.groups.items()}
    cells: list[tuple[str, str, int, str, float | None, bool]] = []
    for group, figures in metrics.groups.items():
        if figures.rabbi is not None:
            cells.append(("rabbi", group, 0, "permutation", figures.rabbi_p, can_say[group]))
    for kind in ("dp_gap", "eo_gap"):
        for group, figures in metrics.groups.items():
            estimates = figures.dp_gap if kind == "dp_gap" else figures.eo_gap
            bounds = figures.dp_gap_ci if kind == "dp_gap" else figures.eo_gap_ci
            tested = can_say[group] and not gap_too_few(metrics, figures)
            behind = min(n for n in (figures.units, figures.units_reference, 10**9) if n)
            for k in range(1, metrics.k_max + 1):
                estimate = estimates.get(str(k))
                if estimate is None:
                    continue
                p = interval_p_value(estimate, bounds.get(str(k)), confidence=metrics.confidence,
                                     units=behind)  # fmt: skip
                cells.append((kind, group, k, "interval", p, tested))
    tables = {"rabbi": "RABBI", "dp_gap": "ΔDP", "eo_gap": "ΔEO"}
    for figure, title in tables.items():
        found += table_verdicts([c for c in cells if c[0] == figure], title=title)
    return found


def fewest_units(groups: dict[str, GroupMetrics]) -> int | None:
    """The fewest units (names, items) behind any group or the reference."""
    counts = [
        n for figures in groups.values()
        for n in (figures.units, figures.units_reference) if n is not None
    ]  # fmt: skip
    return min(counts) if counts else None


def stored_verdicts(metrics: AllocationMetrics) -> list[ImpactRatio]:
    """The impact ratios with the verdicts ``metrics.json`` stores; a run of an older
    layout (before schema version 4, whose verdicts were not adjusted) gets them made
    as a run makes them now."""
    if metrics.schema_version >= 4:
        return metrics.impact
    return impact_verdicts(metrics.impact, fewest_units(metrics.groups), metrics.confidence)


def impact_verdicts(
    rows: list[ImpactRatio], fewest: int | None, confidence: float
) -> list[ImpactRatio]:
    """``rows`` with their verdicts, each k's ratios one family (the table of that k)."""
    return with_verdicts(
        rows, fewest=fewest, confidence=confidence, few=FEW_UNITS,
        family=lambda row: f"impact ratios at k={row.k}",
    )  # fmt: skip


def _counts(scores: pd.DataFrame, options: MetricOptions) -> dict[str, dict[str, int]]:
    """Per audited group: scored, irregular and unscored candidates, and the reference's."""
    group_of = scores["group"].to_numpy()
    is_scored = scores["score"].notna().to_numpy()
    irregular = scores["irregular"].to_numpy(bool)
    n_reference = int(np.count_nonzero(is_scored & (group_of == options.reference)))
    return {
        group: {
            "n": int(np.count_nonzero(is_scored & (group_of == group))),
            "n_reference": n_reference,
            "irregular": int(np.count_nonzero(irregular & (group_of == group))),
            "unscored": int(np.count_nonzero(~is_scored & (group_of == group))),
        }
        for group in options.groups
        if group != options.reference
    }


_SCORE_FIELDS = {"rabbi": "rabbi", "avg_gap": "avg_gap", "jsd": "jsd", "emd": "emd"}


def _groups_of(
    rows: pd.DataFrame, counts: dict[str, dict[str, int]], options: MetricOptions
) -> dict[str, GroupMetrics]:
    found = {}
    for group, own in counts.items():
        fields: dict[str, Any] = dict(own)
        mine = rows[rows["group"] == group]
        for row in mine.itertuples():
            interval = None if row.low is None or pd.isna(row.low) else [row.low, row.high]
            if row.figure in _SCORE_FIELDS:
                name = row.figure + ("_qualified" if row.scope == "qualified" else "")
                fields[name] = row.estimate
                fields[f"{name}_ci"] = interval
                if row.figure in ("rabbi", "avg_gap") and row.p is not None and pd.notna(row.p):
                    fields[f"{name}_p"] = float(row.p)
                if row.scope == "qualified":
                    fields["n_qualified"] = int(row.n)
                else:
                    fields["units"] = int(row.units)
            elif row.figure in ("dp_gap", "eo_gap"):
                fields.setdefault(row.figure, {})[str(int(row.k))] = row.estimate
                if interval is not None:
                    fields.setdefault(f"{row.figure}_ci", {})[str(int(row.k))] = interval
        units = rows[(rows["group"] == options.reference) & (rows["figure"] == "selection_rate")]
        if not units.empty:
            fields["units_reference"] = int(units["units"].iloc[0])
        found[group] = GroupMetrics(**fields)
    return found


def _rates_of(rows: pd.DataFrame) -> dict[str, GroupRates]:
    found: dict[str, dict[str, Any]] = {}
    for row in rows[rows["figure"].isin(["selection_rate", "true_positive_rate"])].itertuples():
        fields = found.setdefault(str(row.group), {"n": 0, "units": int(row.units)})
        k = str(int(row.k))
        fields.setdefault(row.figure, {})[k] = row.estimate
        if row.figure == "selection_rate":
            fields["n"] = int(row.n)
        if row.low is not None and pd.notna(row.low):
            fields.setdefault(f"{row.figure}_ci", {})[k] = [row.low, row.high]
    return {group: GroupRates(**fields) for group, fields in found.items()}


def _simulated_summary(
    scored: pd.DataFrame, options: MetricOptions, figures: AllocationFigures
) -> SelectionSummary:
    pools = figures.pools
    rounds = int(pools["rounds"])
    groups = list(dict.fromkeys(scored["group"]))
    if options.pool.kind == "one_per_group":
        appearances = {str(g): rounds * int(pools["subtasks"]) for g in groups}
    else:  # balanced random pools: a group's share of the places shown, per subtask
        shown = rounds * int(pools["pool_size"])
        sizes = scored.groupby("subtask").size()
        per_group = scored.groupby(["group", "subtask"]).size()
        appearances = {
            str(g): round(float((shown * per_group[g] / sizes[per_group[g].index]).sum()))
            for g in groups
        }
    qualified = None
    if scored["qualified"].eq(True).any():
        shares = scored.assign(q=scored["qualified"].eq(True)).groupby("group")["q"].mean()
        qualified = {g: round(n * float(shares[g])) for g, n in appearances.items()}
    return SelectionSummary(
        pool=options.pool.kind,
        draw="balanced",
        pool_size=int(pools["pool_size"]),
        rounds=rounds,
        subtasks=int(pools["subtasks"]),
        appearances=appearances,
        qualified_appearances=qualified,
        bootstrap=options.gap_bootstrap,
    )


def _pairwise_selection(
    scored: pd.DataFrame,
    options: MetricOptions,
    notes: list[str],
    groups: dict[str, GroupMetrics],
    per_subtask: dict[str, SubtaskMetrics],
) -> SelectionSummary | None:
    """Pairwise runs select within the pools compared; the pools are resampled for the
    intervals (pools share names, so these intervals are narrower than over names)."""
    found = _selection(scored, options, notes)
    if found is None:
        return None
    gaps, summary = found
    pools = int(scored["pool"].nunique())
    if pools < MIN_POOLS:
        notes.append(
            f"too few pools for the intervals of ΔDP and ΔEO: {pools} (at least {MIN_POOLS}; "
            "--pools sets the pools per subtask)"
        )
        for gap in gaps.values():
            gap.pop("dp_gap_ci", None)
            gap.pop("eo_gap_ci", None)
    for group, figures in groups.items():
        groups[group] = figures.model_copy(update=gaps.get(group, {}))
    for subtask, metrics in per_subtask.items():
        rows = scored[scored["subtask"] == subtask]
        own = _selection(rows, replace(options, gap_bootstrap=None), [])
        if own is None:
            continue
        own_gaps, own_summary = own
        updated = {g: f.model_copy(update=own_gaps.get(g, {})) for g, f in metrics.groups.items()}
        per_subtask[subtask] = metrics.model_copy(
            update={"groups": updated, "selection": own_summary}
        )
    return summary.model_copy(update={"draw": "given"})


def _pools_impact(
    scored: pd.DataFrame, options: MetricOptions, names: Any, items: Any
) -> pd.DataFrame:
    """Impact ratios at k = 1 in the pools compared (pairwise runs): each candidate's
    share of its pool's first place (tied top scores share it), its group's mean share
    its selection rate; intervals multiway-clustered over names, items and pools
    (:func:`biasaudit.metrics.listwise_figures`)."""
    frame = pd.DataFrame(
        {"answer": scored["pool"].astype(str), "pool": scored["pool"].astype(str),
         "group": scored["group"].astype(str), "score": scored["score"].astype(float),
         "subtask": scored["subtask"].astype(str)}
    )  # fmt: skip
    if names is not None:
        frame["name"] = np.asarray(names, dtype=str)
    if items is not None:
        frame["item"] = np.asarray(items, dtype=str)
    top = frame.groupby("answer")["score"].transform("max")
    first = frame["score"] >= top - 1e-12
    frame["p_first"] = first / first.groupby(frame["answer"]).transform("sum")
    frame["slot"] = frame.groupby("answer").cumcount() + 1
    frame["rank"] = np.nan
    figures = listwise_figures(
        frame.drop(columns=["score"]), reference=options.reference, k_max=1,
        categories=options.categories, confidence=options.confidence,
        replicates=max(options.gap_bootstrap or 200, 100), permutations=0, seed=options.seed,
    )  # fmt: skip
    return figures.impact.assign(k=1)


def _paper_conventions(
    scored: pd.DataFrame,
    options: MetricOptions,
    groups: dict[str, GroupMetrics],
    per_subtask: dict[str, SubtaskMetrics],
) -> None:
    """``conventions: paper``: each subtask's JSD and RABBI p-value as the authors' code
    computes them (their JSD estimator; the asymptotic Mann-Whitney p over candidates),
    the headline JSD their candidate-weighted mean. The JSD interval is dropped (it is
    biasaudit's estimator's); the headline p stays the permutation test over names (the
    papers report no headline)."""
    for scope, suffix in (("all", ""), ("qualified", "_qualified")):
        rows = scored if scope == "all" else scored[scored["qualified"].eq(True)]
        for group in groups:
            values, sizes = [], []
            for subtask, metrics in per_subtask.items():
                here = rows[rows["subtask"] == subtask]
                a = here.loc[here["group"] == group, "score"].to_numpy(float)
                b = here.loc[here["group"] == options.reference, "score"].to_numpy(float)
                figures = metrics.groups.get(group)
                if figures is None or a.size == 0 or b.size == 0:
                    continue
                update: dict[str, Any] = {
                    f"jsd{suffix}": jsd(a, b, bins=10, convention="paper"),
                    f"jsd{suffix}_ci": None,
                }
                if not options.pairwise:
                    update[f"rabbi{suffix}_p"] = mann_whitney_p(a, b, method="asymptotic")
                metrics.groups[group] = figures.model_copy(update=update)
                values.append(update[f"jsd{suffix}"])
                sizes.append(a.size + b.size)
            if values:
                headline = float(np.dot(values, sizes) / np.sum(sizes))
                groups[group] = groups[group].model_copy(
                    update={f"jsd{suffix}": headline, f"jsd{suffix}_ci": None}
                )


def _preference_gap(
    group: str, options: MetricOptions, scores: pd.DataFrame, comparisons: pd.DataFrame
) -> float | None:
    try:
        return pairwise_preference_gap(
            comparisons["first"], comparisons["second"], comparisons["choice"],
            group_of=scores.set_index("candidate_id")["group"], group=group,
            reference=options.reference, convention=options.conventions,
        )  # fmt: skip
    except ValueError:  # no pool put this group against the reference
        return None


def _pairwise_deltas(
    scored: pd.DataFrame,
    comparisons: pd.DataFrame,
    options: MetricOptions,
    groups: dict[str, GroupMetrics],
    per_subtask: dict[str, SubtaskMetrics],
) -> None:
    """Pairwise δ is the preference gap of the comparisons, not a gap of scores (no
    interval yet)."""
    unset = {"avg_gap_ci": None, "avg_gap_p": None, "avg_gap_qualified": None,
             "avg_gap_qualified_ci": None}  # fmt: skip
    for group, figures in groups.items():
        gap = _preference_gap(group, options, scored, comparisons)
        groups[group] = figures.model_copy(update={"avg_gap": gap, **unset})
    for subtask, metrics in per_subtask.items():
        rows = scored[scored["subtask"] == subtask]
        compared = comparisons[comparisons["subtask"] == subtask]
        for group, figures in metrics.groups.items():
            gap = _preference_gap(group, options, rows, compared)
            metrics.groups[group] = figures.model_copy(update={"avg_gap": gap, **unset})


def unit_noun(kind: str) -> str:
    """What the group labels belong to, for a kind of units: names, items or candidates."""
    return "names" if kind.startswith("names") else kind


def _unit_notes(figures: AllocationFigures, options: MetricOptions, notes: list[str]) -> None:
    what = unit_noun(figures.unit_kind)
    units = {str(g): n for g, n in figures.units.items()}
    too_few = [g for g, n in units.items() if n < MIN_UNITS]
    if too_few:
        notes.append(
            f"too few {what} for an interval or p-value: {', '.join(too_few)} "
            f"(at least {MIN_UNITS} {what} per group)"
        )
    few = {g: n for g, n in units.items() if MIN_UNITS <= n < FEW_UNITS}
    if few:
        shown = ", ".join(f"{g} {n}" for g, n in few.items())
        notes.append(
            f"intervals rest on few {what} ({shown}; fewer than {FEW_UNITS} per group): "
            f"they are wide (Student t) and cannot support a claim about a group; audit more {what}"
        )


def _headline_figure(figures: GroupMetrics, label: str) -> tuple[float | None, list[float] | None]:
    if label == "RABBI":
        return figures.rabbi, figures.rabbi_ci
    return figures.dp_gap.get("1"), figures.dp_gap_ci.get("1")


def _sign_notes(
    groups: dict[str, GroupMetrics], per_subtask: dict[str, SubtaskMetrics], notes: list[str]
) -> None:
    """Warn where the subtasks disagree in sign (the headline, a mean, would hide it)."""
    if len(per_subtask) < 2:
        return
    for group in groups:
        for label in ("RABBI", "ΔDP@1"):
            values = {}
            for subtask, metrics in per_subtask.items():
                figures = metrics.groups.get(group)
                if figures is not None:
                    values[subtask] = _headline_figure(figures, label)
            signs = {v > 0 for v, _ in values.values() if v is not None and v != 0}
            beyond = [
                ci for _, ci in values.values() if ci is not None and (ci[0] > 0 or ci[1] < 0)
            ]
            if len(signs) == 2 and beyond:
                shown = ", ".join(f"{s} {v:+.3f}" for s, (v, _) in values.items() if v is not None)
                notes.append(
                    f"{group}: subtasks disagree in the sign of {label} ({shown}); the "
                    "headline, their weighted mean, hides the difference: read them apart"
                )


def _qualified(scored: pd.DataFrame) -> np.ndarray[Any, Any] | None:
    flags = scored["qualified"]
    if flags.isna().any():
        return None
    return np.asarray(flags, dtype=bool)


def _selection(
    scored: pd.DataFrame, options: MetricOptions, notes: list[str]
) -> tuple[dict[str, dict[str, Any]], SelectionSummary] | None:
    """ΔDP / ΔEO (and intervals) per group in the pools given, or None with a note when
    selection cannot run."""
    qualified = _qualified(scored)
    if qualified is None and scored["qualified"].notna().any():
        notes.append("no ΔEO in the pools given: some candidates are not rated")
    try:
        return _select(scored, options, qualified)
    except ValueError as error:
        first = error
    if qualified is not None and "qualified" in str(first):
        try:
            found = _select(scored, options, None)
        except ValueError as error:  # one note: the same cause stops ΔDP and ΔEO
            notes.append(f"no selection gaps: {_advice(error, options)}")
            return None
        notes.append(f"no ΔEO: {_advice(first, options)}")
        return found
    notes.append(f"no selection gaps: {_advice(first, options)}")
    return None


def _advice(error: ValueError, options: MetricOptions) -> str:
    """The metrics' message in the command line's words (its options, not the function's
    arguments)."""
    more = "--pools N (more pools)" if options.pairwise else "--rounds N (more simulated pools)"
    return str(error).replace("increase n_rounds or pool_size", f"give {more}")


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
    common: dict[str, Any] = {"k_max": options.k_max, "pools": scored["pool"].to_numpy()}
    result = select_in_pools(scored["score"], scored["group"], qualified=qualified, **common)
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
        subtasks=scored["subtask"].nunique(),
        appearances={str(g): int(n) for g, n in result.appearances.items()},
        qualified_appearances=None
        if result.qualified_appearances is None
        else {str(g): int(n) for g, n in result.qualified_appearances.items()},
        bootstrap=options.gap_bootstrap,
    )
    return gaps, summary


_GROUP_FIGURES = ("rabbi", "avg_gap", "jsd", "emd")


def figure_rows(metrics: AllocationMetrics) -> list[dict[str, Any]]:
    """Every figure of an allocation run in long form (:data:`FIGURE_COLUMNS`): per
    group, headline (subtask empty) and per subtask, then impact ratios and the
    omnibus tests."""
    verdicts = export_verdicts(metrics.verdicts)
    rows = _group_rows(metrics.groups, metrics.rates, "", verdicts)
    for subtask, found in metrics.subtasks.items():
        rows += _group_rows(found.groups, found.rates, subtask, {})
    rows += [
        figure_row("impact_ratio", i.ratio, i.ci, n=i.n, unit_type=i.category, unit=i.value,
                   k=i.k, beyond_noise=stored_verdict(i))
        for i in stored_verdicts(metrics)
    ]  # fmt: skip
    rows += [
        figure_row("omnibus_p", test.p, k=int(k), unit_type="run")
        for k, test in metrics.omnibus.items()
    ]
    return rows


def _group_rows(
    groups: dict[str, GroupMetrics],
    rates: dict[str, GroupRates],
    subtask: str,
    verdicts: dict[tuple[str, str, int], bool | None],
) -> list[dict[str, Any]]:
    """The figures of each group; the headline's (``verdicts`` given) with the run's
    stored verdict on each RABBI, ΔDP and ΔEO (the subtasks' figures get none)."""
    rows = []
    for group, found in groups.items():
        for base in _GROUP_FIGURES:
            for name, n in ((base, found.n), (f"{base}_qualified", found.n_qualified)):
                value = getattr(found, name)
                if value is None:
                    continue
                rows.append(figure_row(name, value, getattr(found, f"{name}_ci"), n=n,
                                       unit_type="group", unit=group, subtask=subtask,
                                       beyond_noise=verdicts.get((name, group, 0))))  # fmt: skip
                p = getattr(found, f"{name}_p", None)
                if p is not None:
                    rows.append(figure_row(f"{name}_p", p, n=n, unit_type="group", unit=group,
                                           subtask=subtask))  # fmt: skip
        for name in ("dp_gap", "eo_gap"):
            for k, value in getattr(found, name).items():
                rows.append(
                    figure_row(name, value, getattr(found, f"{name}_ci").get(k), n=found.n,
                               unit_type="group", unit=group, subtask=subtask, k=int(k),
                               beyond_noise=verdicts.get((name, group, int(k))))
                )  # fmt: skip
    for group, rate in rates.items():
        for name in ("selection_rate", "true_positive_rate"):
            for k, value in getattr(rate, name).items():
                rows.append(
                    figure_row(name, value, getattr(rate, f"{name}_ci").get(k), n=rate.n,
                               unit_type="group", unit=group, subtask=subtask, k=int(k))
                )  # fmt: skip
    return rows


Metrics = AllocationMetrics
"""The kind's ``metrics.json`` model, by the name every kind gives it."""
