"""``metrics.json`` of a listwise run, from :func:`biasaudit.metrics.listwise_figures`."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from pydantic import BaseModel, Field, model_validator

from biasaudit.kinds.common import (
    FigureVerdict,
    MetricsHeader,
    RatioVerdict,
    RequestCounts,
    export_verdicts,
    figure_row,
    interval_verdicts,
    stored_verdict,
    with_verdicts,
)
from biasaudit.metrics import ListwiseFigures

__all__ = ["ListwiseMetrics", "figure_rows", "metrics_fields"]

METRICS_SCHEMA_VERSION = 5


class Rate(BaseModel):
    group: str
    k: int
    rate: float
    ci: list[float] | None = None
    n: int = Field(description="Appearances in answers that ranked at least k.")
    units: int = Field(description="Names (else items) behind the rate.")


class Gap(BaseModel):
    group: str
    k: int
    dp_gap: float
    ci: list[float] | None = None
    n: int
    n_reference: int


class RankFigures(BaseModel):
    """A group in the full rankings: its mean rank, and its RABBI against the reference
    (P(ranked above the reference in the same answer) - P(below))."""

    group: str
    mean_rank: float
    mean_rank_ci: list[float] | None = None
    rabbi: float | None = None
    rabbi_ci: list[float] | None = None
    n: int


class FixedPosition(BaseModel):
    """A group's top-1 rate and ΔDP with the position held fixed (compared slot by slot)."""

    group: str
    rate: float
    ci: list[float] | None = None
    dp_gap: float | None = None
    dp_gap_ci: list[float] | None = None


class Impact(RatioVerdict):
    category: str
    value: str
    rate: float
    rate_ci: list[float] | None = Field(
        None, description="The rate's interval over the clusters that vary."
    )
    n: int
    flagged: bool


class SubtaskImpact(Impact):
    """An impact ratio within one subtask (a job), from its answers alone."""

    subtask: str


class SubtaskTest(BaseModel):
    """Within one subtask: do the groups' top-1 rates differ (permutation p)?"""

    subtask: str
    answers: int
    omnibus_p: float | None = None


class Slot(BaseModel):
    slot: int
    rate: float
    ci: list[float] | None = None
    n: int


class SlotTestResult(BaseModel):
    statistic: float
    df: int
    p: float
    n: int


class AnswerCounts(BaseModel):
    """What the answers held: rankings read, and their irregularities."""

    answers: int
    ranked: int
    unread: int = Field(description="Answers that named no shown candidate.")
    partial: int = Field(description="Full rankings asked, some candidates left out.")
    duplicates: int
    invented: int
    failed: int = Field(description="Requests that got no answer.")


class ListwiseMetrics(MetricsHeader):
    """``metrics.json`` of a listwise run."""

    schema_version: int = METRICS_SCHEMA_VERSION
    reference_group: str
    group_names: dict[str, str] = Field(default_factory=dict)
    listwise: str = Field(description="'full' rankings or the 'top1' choice only.")
    scoring: str = Field(
        "samples",
        description="'samples': answers read as rankings; 'logprobs': each candidate's "
        "chance of being put first, from the first answer token (top-1 figures only).",
    )
    orders: str
    pool_size: int
    pools: int
    orders_per_pool: int
    samples: int
    confidence: float
    k_max: int
    headline_k: int
    requests: RequestCounts
    counts: AnswerCounts
    rates: list[Rate] = Field(default_factory=list)
    gaps: list[Gap] = Field(default_factory=list)
    impact: list[Impact] = Field(default_factory=list)
    impact_by_subtask: list[SubtaskImpact] = Field(
        default_factory=list, description="Impact ratios of each subtask (job), where several."
    )
    subtask_tests: list[SubtaskTest] = Field(default_factory=list)
    ranks: list[RankFigures] = Field(default_factory=list)
    fixed: list[FixedPosition] = Field(
        default_factory=list, description="Top-1 rates and ΔDP with the position held fixed."
    )
    slots: list[Slot] = Field(default_factory=list)
    slot_entropy: float | None = None
    slot_entropy_ci: list[float] | None = None
    slot_test: SlotTestResult | None = None
    interval_units: int | None = Field(
        None,
        description="The clusters behind the Student t of the intervals (the fewest of one "
        "kind behind a group); None: a run before intervals took t.",
    )
    resampled: list[str] = Field(
        default_factory=list,
        description="The units the intervals resample: names, items (resumes), pools. A "
        "unit not listed was not given (an import without its column) and its variance is "
        "not in the intervals.",
    )
    omnibus_p: float | None = None
    concordance: float | None = None
    concordance_ci: list[float] | None = None
    concordance_pools: int = 0
    top_change: float | None = None
    top_change_ci: list[float] | None = None
    top_change_pools: int = 0
    verdicts: list[FigureVerdict] = Field(
        default_factory=list,
        description="The verdict on every ΔDP (by k), position-fixed ΔDP and RABBI, each "
        "table its own family (schema 5; an older run's are made on reading).",
    )
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _verdicts_made(self) -> ListwiseMetrics:
        """A run's verdicts, made with its figures (and an older run's on reading)."""
        if not self.verdicts:
            self.verdicts = figure_verdicts(self)
        return self


def fewest_units(metrics: ListwiseMetrics) -> int | None:
    """The fewest names (else items) behind any group's rates; None without rates."""
    return min((r.units for r in metrics.rates), default=None)


def figure_verdicts(metrics: ListwiseMetrics) -> list[FigureVerdict]:
    """The verdict on every ΔDP, position-fixed ΔDP and RABBI against 0, each table
    adjusted over its own figures (Holm), read off their intervals; none tested where
    fewer than :data:`~biasaudit.metrics.FEW_UNITS` units stand behind a group."""
    from biasaudit.metrics import FEW_UNITS

    fewest = fewest_units(metrics)
    tested = fewest is None or fewest >= FEW_UNITS

    def table(cells: list[tuple[str, str, int, float | None, list[float] | None]],
              title: str) -> list[FigureVerdict]:  # fmt: skip
        return interval_verdicts(cells, title=title, confidence=metrics.confidence,
                                 units=fewest, tested=tested)  # fmt: skip

    return [
        *table([("dp_gap", g.group, g.k, g.dp_gap, g.ci) for g in metrics.gaps], "ΔDP"),
        *table([("fixed_position_dp_gap", f.group, 1, f.dp_gap, f.dp_gap_ci)
                for f in metrics.fixed], "position-fixed ΔDP"),
        *table([("rabbi_of_ranks", r.group, 0, r.rabbi, r.rabbi_ci) for r in metrics.ranks],
               "RABBI"),
    ]  # fmt: skip


def _ci(row: Any) -> list[float] | None:
    low, high = row.low, row.high
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return None
    return [float(low), float(high)]


def _rate_ci(row: Any) -> list[float] | None:
    low, high = getattr(row, "rate_low", None), getattr(row, "rate_high", None)
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return None
    return [float(low), float(high)]


def _pair(bounds: tuple[float, float] | None) -> list[float] | None:
    return None if bounds is None else [float(bounds[0]), float(bounds[1])]


def _pair_of(low: float, high: float) -> list[float] | None:
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return None
    return [float(low), float(high)]


def _rows(frame: pd.DataFrame) -> list[Any]:
    return [] if frame.empty else list(frame.itertuples())


def metrics_fields(figures: ListwiseFigures) -> dict[str, Any]:
    """The figures as :class:`ListwiseMetrics` fields, each impact ratio with its verdict
    (Holm over its table: the headline k's, and the subtasks')."""
    from biasaudit.metrics import FEW_UNITS

    fields = _fields(figures)
    fewest = min((r.units for r in fields["rates"]), default=None)
    families = {
        "impact": f"impact ratios at k={figures.impact_k}",
        "impact_by_subtask": "impact ratios of the subtasks' table",
    }
    for name, family in families.items():

        def named(_: Impact, family: str = family) -> str:
            return family

        fields[name] = with_verdicts(
            fields[name], fewest=fewest, confidence=figures.confidence, few=FEW_UNITS,
            family=named,
        )  # fmt: skip
    return fields


def _fields(figures: ListwiseFigures) -> dict[str, Any]:
    test = figures.slot_test
    return {
        "rates": [
            Rate(group=str(r.group), k=int(r.k), rate=float(r.rate), ci=_ci(r), n=int(r.n),
                 units=int(r.units))
            for r in _rows(figures.rates)
        ],
        "gaps": [
            Gap(group=str(r.group), k=int(r.k), dp_gap=float(r.dp_gap), ci=_ci(r), n=int(r.n),
                n_reference=int(r.n_reference))
            for r in _rows(figures.gaps)
        ],
        "impact": [
            Impact(category=str(r.category), value=str(r.value), rate=float(r.rate),
                   rate_ci=_rate_ci(r), ratio=float(r.ratio), ci=_ci(r), n=int(r.n),
                   flagged=bool(r.flagged), beyond_noise=False)
            for r in _rows(figures.impact)
            if not math.isnan(r.ratio)
        ],
        "impact_by_subtask": [
            SubtaskImpact(subtask=str(r.subtask), category=str(r.category), value=str(r.value),
                          rate=float(r.rate), rate_ci=_rate_ci(r), ratio=float(r.ratio),
                          ci=_ci(r), n=int(r.n),
                          flagged=bool(r.flagged), beyond_noise=False)
            for r in _rows(figures.by_subtask)
            if not math.isnan(r.ratio)
        ],
        "subtask_tests": [
            SubtaskTest(subtask=str(r.subtask), answers=int(r.answers),
                        omnibus_p=None if r.omnibus_p is None or math.isnan(r.omnibus_p)
                        else float(r.omnibus_p))
            for r in _rows(figures.subtask_tests)
        ],
        "ranks": [
            RankFigures(
                group=str(r.group), mean_rank=float(r.mean_rank),
                mean_rank_ci=_pair_of(r.mean_rank_low, r.mean_rank_high),
                rabbi=None if math.isnan(r.rabbi) else float(r.rabbi),
                rabbi_ci=_pair_of(r.rabbi_low, r.rabbi_high), n=int(r.n),
            )
            for r in _rows(figures.ranks)
        ],
        "fixed": [
            FixedPosition(
                group=str(r.group), rate=float(r.rate), ci=_pair_of(r.low, r.high),
                dp_gap=None if math.isnan(r.dp_gap) else float(r.dp_gap),
                dp_gap_ci=_pair_of(r.gap_low, r.gap_high),
            )
            for r in _rows(figures.fixed)
        ],
        "slots": [
            Slot(slot=int(r.slot), rate=float(r.rate), ci=_ci(r), n=int(r.n))
            for r in _rows(figures.slots)
        ],
        "slot_entropy": figures.slot_entropy,
        "slot_entropy_ci": _pair(figures.slot_entropy_ci),
        "slot_test": None if test is None else SlotTestResult(
            statistic=test.statistic, df=test.df, p=test.p, n=test.n
        ),
        "omnibus_p": figures.omnibus_p,
        "concordance": figures.concordance,
        "concordance_ci": _pair(figures.concordance_ci),
        "concordance_pools": figures.concordance_pools,
        "top_change": figures.top_change,
        "top_change_ci": _pair(figures.top_change_ci),
        "top_change_pools": figures.top_change_pools,
        "resampled": list(figures.resampled),
        "interval_units": figures.interval_units or None,
    }  # fmt: skip


def figure_rows(metrics: ListwiseMetrics) -> list[dict[str, Any]]:
    """Every figure of a listwise run in long form (:data:`FIGURE_COLUMNS`), each tested
    figure with its stored verdict."""
    verdicts = export_verdicts(metrics.verdicts)
    rows = [
        figure_row("selection_rate", r.rate, r.ci, n=r.n, unit_type="group", unit=r.group, k=r.k)
        for r in metrics.rates
    ]
    rows += [
        figure_row(
            "dp_gap",
            g.dp_gap,
            g.ci,
            n=g.n,
            unit_type="group",
            unit=g.group,
            k=g.k,
            beyond_noise=verdicts.get(("dp_gap", g.group, g.k)),
        )
        for g in metrics.gaps
    ]
    rows += [
        figure_row("impact_ratio", i.ratio, i.ci, n=i.n, unit_type=i.category, unit=i.value,
                   k=metrics.headline_k, beyond_noise=stored_verdict(i))
        for i in metrics.impact
    ]  # fmt: skip
    rows += [
        figure_row("impact_ratio", i.ratio, i.ci, n=i.n, unit_type=i.category, unit=i.value,
                   k=metrics.headline_k, subtask=i.subtask, beyond_noise=stored_verdict(i))
        for i in metrics.impact_by_subtask
    ]  # fmt: skip
    rows += [
        figure_row("omnibus_p", t.omnibus_p, n=t.answers, k=1, subtask=t.subtask)
        for t in metrics.subtask_tests
        if t.omnibus_p is not None
    ]
    for r in metrics.ranks:
        rows.append(figure_row("mean_rank", r.mean_rank, r.mean_rank_ci, n=r.n,
                               unit_type="group", unit=r.group))  # fmt: skip
        if r.rabbi is not None:
            verdict = verdicts.get(("rabbi_of_ranks", r.group, 0))
            rows.append(figure_row("rabbi_of_ranks", r.rabbi, r.rabbi_ci, n=r.n,
                                   unit_type="group", unit=r.group,
                                   beyond_noise=verdict))  # fmt: skip
    for f in metrics.fixed:
        rows.append(figure_row("fixed_position_rate", f.rate, f.ci, unit_type="group",
                               unit=f.group, k=1))  # fmt: skip
        if f.dp_gap is not None:
            rows.append(figure_row(
                "fixed_position_dp_gap", f.dp_gap, f.dp_gap_ci, unit_type="group",
                unit=f.group, k=1, beyond_noise=verdicts.get(("fixed_position_dp_gap", f.group, 1)),
            ))  # fmt: skip
    rows += [
        figure_row("first_choice_share", s.rate, s.ci, n=s.n, unit_type="slot", unit=str(s.slot))
        for s in metrics.slots
    ]
    answers = metrics.counts.ranked
    if metrics.slot_entropy is not None:
        rows.append(figure_row("slot_entropy", metrics.slot_entropy, metrics.slot_entropy_ci,
                               n=answers))  # fmt: skip
    if metrics.omnibus_p is not None:
        rows.append(figure_row("omnibus_p", metrics.omnibus_p, n=answers, k=1))
    if metrics.concordance is not None:
        rows.append(figure_row("kendall_w", metrics.concordance, metrics.concordance_ci,
                               n=metrics.concordance_pools))  # fmt: skip
    if metrics.top_change is not None:
        rows.append(figure_row("top_change", metrics.top_change, metrics.top_change_ci,
                               n=metrics.top_change_pools))  # fmt: skip
    return rows


Metrics = ListwiseMetrics
"""The kind's ``metrics.json`` model, by the name every kind gives it."""
