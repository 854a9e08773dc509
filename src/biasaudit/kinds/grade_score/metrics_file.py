"""``metrics.json`` of a Grade Score run (:class:`GradeScoreMetrics`) and its figures in
long form (:func:`figure_rows`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from biasaudit.kinds.common import (
    SIGNIFICANT,
    FigureVerdict,
    MetricsHeader,
    RequestCounts,
    figure_row,
)

__all__ = [
    "GRADE_METRICS_SCHEMA_VERSION",
    "ITEMS_COLUMNS",
    "Agreement",
    "GradeScoreMetrics",
    "Metrics",
    "SlotTestResult",
    "figure_rows",
    "slot_flags",
    "slot_verdicts",
]

ITEMS_COLUMNS = ("item_id", "grade", "entropy", "choice", "usable", "trials")
"""Columns every ``items.csv`` has (audit and import) that its readers need."""

GRADE_METRICS_SCHEMA_VERSION = 3


class Agreement(BaseModel):
    """How often the judge chose the option people prefer (items that name one)."""

    items: int = Field(description="Items with a preferred option and a usable answer.")
    rate: float = Field(description="Mean over items of the share of answers choosing it.")
    rate_ci: list[float] | None = Field(
        None, description="Bootstrap interval over items (None: too few items)."
    )
    most_chosen: float = Field(description="Share of items whose most chosen option it is.")


class SlotTestResult(BaseModel):
    """Pearson's χ² test that no slot is preferred (see ``metrics.SlotTest``)."""

    statistic: float
    df: int
    p: float
    n: int = Field(description="Usable answers tested.")


class GradeScoreMetrics(MetricsHeader):
    """``metrics.json`` of a Grade Score run (its top-level scores are a contract)."""

    schema_version: int = GRADE_METRICS_SCHEMA_VERSION
    task: str = "grade-score"
    items_source: str = Field(description="'demo' or the items file.")
    prompt: str = Field(description="'1'..'4' (shipped) or the prompt file.")
    prompt_description: str
    random_option: bool
    permutations: str = Field(description="'cyclic' or 'all'.")
    orders: int = Field(description="Orders asked per item.")
    replicates: int
    temperature: float | None = Field(description="None: imported answers (not known).")
    max_tokens: int | None = Field(description="None: imported answers (not known).")
    n_options: int = Field(description="Options per request, the random one included.")
    confidence: float
    grade_score: float | None = Field(description="Mean Grade Score over items.")
    grade_score_ci: list[float] | None = None
    entropy: float | None = Field(description="Mean entropy score (1: no position bias).")
    entropy_ci: list[float] | None = None
    choice: float | None = Field(description="Mean choice score (1: always the same option).")
    choice_ci: list[float] | None = None
    items: int = Field(
        description="Items in the means: every request of the item gave a usable answer."
    )
    partial: int = Field(
        0,
        description="Items with some usable answers but not all, left out of the means "
        "(their entropy is low by construction); their answers count in the slot shares.",
    )
    items_total: int
    trials: int = Field(description="Requests asked: items x orders x replicates.")
    usable: int = Field(description="Answers that named an option.")
    unparsed: int = Field(description="Answers that named none, refusals included (left out).")
    refused: int = Field(0, description="Answers that were refusals (counted as unparsed).")
    failed: int = Field(description="Requests that failed: no answer after all retries (left out).")
    position_histogram: list[float] = Field(description="Share of usable answers per slot.")
    position_counts: list[int] = Field(default_factory=list, description="Answers per slot.")
    position_ci: list[list[float]] | None = Field(
        None,
        description="Exact binomial (Clopper-Pearson) interval of each slot's share, "
        "simultaneous over the slots (Bonferroni); None without usable answers.",
    )
    slot_p: float | None = Field(
        None,
        description="Exact test that no slot is preferred: each slot's binomial test "
        "against 1/slots, Bonferroni over the slots. It agrees with position_ci: a slot's "
        "interval excludes 1/slots exactly when slot_p is below 1 - confidence.",
    )
    slot_test: SlotTestResult | None = Field(
        None,
        description="Pearson's χ² test that no slot is preferred, over every usable answer "
        "(for reference; the report reads slot_p, which its intervals agree with).",
    )
    verdicts: list[FigureVerdict] = Field(
        default_factory=list,
        description="Each slot's verdict: is its share away from 1/slots? Its exact "
        "binomial p, Bonferroni over the slots (so that a slot is beyond noise exactly "
        "when its position_ci excludes 1/slots at the default 95%); made on reading for "
        "a run written before schema version 3.",
    )
    agreement: Agreement | None = None
    random_option_share: float | None = Field(
        None, description="Share of usable answers choosing the unrelated option."
    )
    requests: RequestCounts
    notes: list[str] = Field(default_factory=list)
    conventions: str = Field(
        "biasaudit",
        description="'paper': every item in the means, one with no usable answer as 0 "
        "(GradeLab); 'biasaudit': complete items only.",
    )

    @model_validator(mode="after")
    def _verdicts_made(self) -> GradeScoreMetrics:
        """A run's slot verdicts, made with its figures (and an older run's on reading)."""
        if not self.verdicts:
            self.verdicts = slot_verdicts(self.position_counts)
        return self


def slot_verdicts(counts: list[int]) -> list[FigureVerdict]:
    """Each slot's share tested against 1/slots: the exact binomial p-value
    (:func:`~biasaudit.metrics.position_p_values`), Bonferroni-adjusted over the slots,
    the adjustment ``position_ci`` is simultaneous by, so the verdict and the interval
    printed beside it agree by construction. The smallest adjusted p is ``slot_p``."""
    from biasaudit.metrics import floor_p, position_p_values

    found = position_p_values(counts)
    family = f"the {len(found)} slots of the run (Bonferroni)"
    verdicts = []
    for slot, p in enumerate(found, 1):
        adjusted = floor_p(min(1.0, len(found) * p))
        verdicts.append(FigureVerdict(
            figure="slot_share", unit=str(slot), test="exact binomial", p=floor_p(p),
            p_adjusted=adjusted, beyond_noise=adjusted < SIGNIFICANT, family=family,
        ))  # fmt: skip
    return verdicts


def slot_flags(metrics: GradeScoreMetrics) -> dict[int, bool]:
    """Each slot's stored verdict by its index (0 first): what every surface marks."""
    return {int(v.unit) - 1: v.beyond_noise for v in metrics.verdicts}


Metrics = GradeScoreMetrics
"""The kind's ``metrics.json`` model, by the name every kind gives it."""


def figure_rows(metrics: GradeScoreMetrics) -> list[dict[str, Any]]:
    """Every figure of a Grade Score run in long form (:data:`FIGURE_COLUMNS`): the
    three scores (n: items in the means), each slot's share of answers, agreement with
    people's preferred option, and the random option's share."""
    rows = [
        figure_row(name, getattr(metrics, name), getattr(metrics, f"{name}_ci"),
                   n=metrics.items)
        for name in ("grade_score", "entropy", "choice")
        if getattr(metrics, name) is not None
    ]  # fmt: skip
    verdicts = {v.unit: v.beyond_noise for v in metrics.verdicts}
    for slot, share in enumerate(metrics.position_histogram):
        ci = metrics.position_ci[slot] if metrics.position_ci else None
        unit = str(slot + 1)
        rows.append(figure_row("slot_share", share, ci, n=metrics.usable, unit_type="slot",
                               unit=unit, beyond_noise=verdicts.get(unit)))  # fmt: skip
    if metrics.agreement is not None:
        rows.append(figure_row("agreement", metrics.agreement.rate, metrics.agreement.rate_ci,
                               n=metrics.agreement.items))  # fmt: skip
    if metrics.random_option_share is not None:
        rows.append(figure_row("random_option_share", metrics.random_option_share,
                               n=metrics.usable))  # fmt: skip
    if metrics.slot_p is not None:
        rows.append(figure_row("slot_test_p", metrics.slot_p, n=metrics.usable))
    return rows
