"""The tables of listwise runs and studies, each described once (blocks of lines and
tables): the command line prints them plain or draws them with rich, the report
draws the same tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from biasaudit.kinds.common import verdicts_by_cell, with_verdicts
from biasaudit.kinds.listwise.metrics_file import ListwiseMetrics, fewest_units
from biasaudit.kinds.listwise.study import ListwiseStudy
from biasaudit.metrics import FEW_UNITS, holm_adjust
from biasaudit.render.text import (
    SIGNIFICANT,
    SIMULATED,
    STRONG_MARK,
    TOO_FEW_TO_SAY,
    Block,
    Cell,
    PlainTable,
    format_p,
    impact_table,
    smoke_test_lines,
)

__all__ = [
    "fewest_units",
    "headline",
    "impact_flags",
    "listwise_blocks",
    "resampled_phrase",
    "run_table",
    "study_blocks",
]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _share(value: float | None, ci: list[float] | None) -> str:
    """``26.9% [22.0%, 31.8%]``; the point alone where there is no interval."""
    bounds = f" [{_pct(ci[0])}, {_pct(ci[1])}]" if ci else ""
    return _pct(value) + bounds


def _interval(value: float, ci: list[float] | None, *, signed: bool = False) -> str:
    spec = "+.3f" if signed else ".3f"
    bounds = f" [{ci[0]:{spec}}, {ci[1]:{spec}}]" if ci else ""
    return f"{value:{spec}}{bounds}"


def listwise_blocks(metrics: ListwiseMetrics) -> list[Block]:
    """What ``biasaudit run ... --method listwise`` prints (without ``run:``)."""
    model = metrics.model + (f" ({SIMULATED})" if metrics.simulated else "")
    counts, requests = metrics.counts, metrics.requests
    asked = "a full ranking" if metrics.listwise == "full" else "the top choice only"
    if metrics.scoring == "logprobs":
        asked += ", each candidate's chance of being put first read from the first token's logprobs"
    blocks: list[Block] = [
        f"{metrics.task} listwise audit of {model}",
        f"asked: {asked}; {metrics.pools} pools of {metrics.pool_size} x "
        f"{metrics.orders_per_pool} orders ({metrics.orders}) x {metrics.samples} "
        f"answer{'s' if metrics.samples != 1 else ''}",
        f"requests: {requests.requests} ({requests.sent} sent, {requests.cache_hits} from "
        f"cache, {requests.failures} failed, {requests.refusals} refused); answers: "
        f"{counts.ranked} ranked, {counts.unread} unread, {counts.partial} partial, "
        f"{counts.duplicates} with duplicates, {counts.invented} naming no shown candidate",
        f"reference: {metrics.reference_group}; intervals: {100 * metrics.confidence:g}%, "
        f"{resampled_phrase(metrics)}",
    ]
    fewest = fewest_units(metrics)
    smoke = fewest is not None and fewest < FEW_UNITS
    if smoke:
        assert fewest is not None
        blocks += smoke_test_lines(
            fewest, "names (else items)", "more names, items or pools", where=" behind a group"
        )
    if metrics.rates:
        blocks += ["", _rates_table(metrics), "", _gaps_table(metrics, smoke)]
    if metrics.fixed:
        blocks += ["", _fixed_table(metrics, smoke)]
    if metrics.ranks:
        blocks += ["", _ranks_table(metrics, smoke)]
    impact = listwise_impact_table(metrics, smoke)
    if impact is not None:
        blocks += ["", impact]
    if metrics.subtask_tests:
        blocks += ["", _subtasks_table(metrics, smoke)]
    if not smoke and (metrics.gaps or metrics.impact):
        blocks += [
            "",
            "flags: a ΔDP or impact ratio is flagged (marked *, 'beyond noise') only after Holm's "
            "adjustment over the figures of its table",
        ]
    blocks += ["", *_position_lines(metrics), *_consistency_lines(metrics)]
    blocks += [f"note: {note}" for note in metrics.notes]
    return blocks


N_MEANS = "appearances in the answers (as in the selection-rate table)"
"""What n of a listwise impact ratio counts: a group's rows in the answers read."""


def listwise_impact_table(metrics: ListwiseMetrics, smoke: bool) -> PlainTable | None:
    """The impact ratios at the headline k, flagged after Holm's adjustment."""
    return impact_table(
        metrics.impact, metrics.headline_k, beyond=impact_flags(metrics), too_few=smoke,
        n_means=N_MEANS,
    )  # fmt: skip


def resampled_phrase(metrics: ListwiseMetrics) -> str:
    """Which units the intervals resample, and which they could not (not given)."""
    kinds = metrics.resampled or ["names", "items", "pools"]  # a run before this was recorded
    phrase = "multiway-clustered over " + " x ".join(kinds) + " (Student t)"
    if not any("item" in kind for kind in kinds):
        phrase += (
            "; no item (resume) column, so the items' own variance is not in them: "
            "they are too narrow where items differ"
        )
    return phrase


def _gap_flags(metrics: ListwiseMetrics) -> dict[tuple[str, int], bool]:
    """Each ΔDP cell's stored verdict (Holm over the table)."""
    found = verdicts_by_cell(metrics.verdicts)
    return {(g.group, g.k): found.get(("dp_gap", g.group, g.k), False) for g in metrics.gaps}


def impact_flags(metrics: ListwiseMetrics) -> dict[tuple[str, str], bool]:
    """Each impact ratio at the headline k below 0.8 beyond noise: the verdict its
    ``metrics.json`` stores (Holm over the table); a run of an older layout gets it made
    as a run makes it now."""
    shown = metrics.impact
    if metrics.schema_version < 4:
        shown = with_verdicts(
            shown, fewest=fewest_units(metrics), confidence=metrics.confidence,
            family=lambda _: "impact ratios", few=FEW_UNITS,
        )  # fmt: skip
    return {(i.category, i.value): i.beyond_noise for i in shown}


def _stored_flags(metrics: ListwiseMetrics, figure: str, cells: list[tuple[str, int]],
                  smoke: bool) -> list[bool]:  # fmt: skip
    """The stored verdicts of one table's cells (group, k); none in a smoke test."""
    found = verdicts_by_cell(metrics.verdicts)
    return [not smoke and found.get((figure, group, k), False) for group, k in cells]


def _ratio(impact: Any) -> str:
    """``B_M 0.44 [0.31, 0.60]``: an impact ratio with its interval."""
    ci = f" [{impact.ci[0]:.2f}, {impact.ci[1]:.2f}]" if impact.ci else ""
    return f"{impact.value} {impact.ratio:.2f}{ci}"


def _subtasks_table(metrics: ListwiseMetrics, smoke: bool) -> PlainTable:
    """Each subtask (job) from its own answers: do its groups differ, and which of its
    impact ratios fall below four-fifths, beyond noise or within it."""
    rows: list[list[str | Cell]] = []
    widest = 12
    adjusted = holm_adjust([t.omnibus_p for t in metrics.subtask_tests])
    for test, p_adjusted in zip(metrics.subtask_tests, adjusted, strict=True):
        own = [i for i in metrics.impact_by_subtask if i.subtask == test.subtask]
        beyond = [] if smoke else [_ratio(i) for i in own if i.beyond_noise]
        within = [_ratio(i) for i in own if i.flagged and (smoke or not i.beyond_noise)]
        p = "-" if test.omnibus_p is None else format_p(test.omnibus_p)
        widest = max(widest, len(", ".join(beyond)))
        rows.append(
            [test.subtask, str(test.answers), Cell(p, not smoke and p_adjusted is not None
                                                   and p_adjusted < SIGNIFICANT),
             Cell(", ".join(beyond) or (TOO_FEW_TO_SAY if smoke else "none"), bool(beyond)),
             ", ".join(within) or "none"]
        )  # fmt: skip
    return PlainTable(
        f"by subtask, each from its own answers: do the groups differ at k=1 (permutation p, "
        f"marked {STRONG_MARK} after Holm's adjustment over the subtasks), and impact ratios at "
        f"k={metrics.headline_k} below 0.8 [interval], beyond noise after Holm's adjustment over "
        "the table (n: the subtask's answers)",
        ["subtask", "answers", "p", "beyond noise", "within noise"],
        rows,
        widths=[max(8, *(len(t.subtask) for t in metrics.subtask_tests)), 7, 6, widest, 0],
        gaps=[0, 1, 2, 2, 2],
        right=frozenset({1}),
    )


def _rates_table(metrics: ListwiseMetrics) -> PlainTable:
    ks = range(1, metrics.k_max + 1)
    found = {(r.group, r.k): r for r in metrics.rates}
    groups = list(dict.fromkeys(r.group for r in metrics.rates))
    rows = []
    for group in groups:
        first = found.get((group, 1))
        cells = [
            _interval(found[(group, k)].rate, found[(group, k)].ci) if (group, k) in found
            else "-"
            for k in ks
        ]  # fmt: skip
        rows.append([group, str(first.n if first else 0), str(first.units if first else 0), *cells])
    return PlainTable(
        "selection rate: share of a group's appearances ranked in the top k",
        ["group", "n", "units", *(f"k={k} [CI]" for k in ks)],
        rows,
        widths=[6, 6, 6, *(22 for _ in ks)],
        gaps=[0, 1, 1, *(2 for _ in ks)],
        right=frozenset({1, 2}),
    )


def _gaps_table(metrics: ListwiseMetrics, smoke: bool) -> PlainTable:
    ks = range(1, metrics.k_max + 1)
    flags = {} if smoke else _gap_flags(metrics)
    found = {(g.group, g.k): g for g in metrics.gaps}
    groups = list(dict.fromkeys(g.group for g in metrics.gaps))
    rows: list[list[str | Cell]] = []
    for group in groups:
        cells: list[str | Cell] = []
        for k in ks:
            gap = found.get((group, k))
            cells.append(
                "-" if gap is None
                else Cell(_interval(gap.dp_gap, gap.ci, signed=True), flags.get((group, k), False))
            )  # fmt: skip
        rows.append([group, *cells])
    return PlainTable(
        f"ΔDP: selection rate minus {metrics.reference_group}'s, from the rankings",
        ["group", *(f"k={k} [CI]" for k in ks)],
        rows,
        widths=[6, *(24 for _ in ks)],
        gaps=[0, *(2 for _ in ks)],
    )


def _fixed_table(metrics: ListwiseMetrics, smoke: bool) -> PlainTable:
    rows: list[list[str | Cell]] = []
    flags = _stored_flags(metrics, "fixed_position_dp_gap", [(f.group, 1) for f in metrics.fixed],
                          smoke)  # fmt: skip
    for f, strong in zip(metrics.fixed, flags, strict=True):
        gap = "-" if f.dp_gap is None else _interval(f.dp_gap, f.dp_gap_ci, signed=True)
        rows.append([f.group, _interval(f.rate, f.ci), Cell(gap, strong)])
    return PlainTable(
        "top-1 with the position held fixed: rates slot by slot, averaged over the slots "
        f"(ΔDP: at the slots both it and {metrics.reference_group} were shown in)",
        ["group", "rate [CI]", "ΔDP [CI]"],
        rows,
        widths=[6, 22, 0],
        gaps=[0, 2, 2],
    )


def _ranks_table(metrics: ListwiseMetrics, smoke: bool) -> PlainTable:
    rows: list[list[str | Cell]] = []
    flags = _stored_flags(metrics, "rabbi_of_ranks", [(r.group, 0) for r in metrics.ranks], smoke)
    for r, strong in zip(metrics.ranks, flags, strict=True):
        rabbi = "-" if r.rabbi is None else _interval(r.rabbi, r.rabbi_ci, signed=True)
        rows.append(
            [r.group, str(r.n), _interval(r.mean_rank, r.mean_rank_ci), Cell(rabbi, strong)]
        )
    return PlainTable(
        f"full rankings: mean rank (1 = best), and RABBI: P(above {metrics.reference_group} "
        "in the same answer) - P(below)",
        ["group", "n", "mean rank [CI]", "RABBI [CI]"],
        rows,
        widths=[6, 6, 22, 0],
        gaps=[0, 1, 2, 2],
        right=frozenset({1}),
    )


def _position_lines(metrics: ListwiseMetrics) -> list[str]:
    if not metrics.slots:
        return []
    slots = "; ".join(f"{s.slot}: {_share(s.rate, s.ci)}" for s in metrics.slots)
    expected = _pct(1 / len(metrics.slots))
    n = metrics.slots[0].n
    lines = [
        f"first choice by slot shown (n = {n} answers; no position bias: {expected} each): " + slots
    ]
    entropy = metrics.slot_entropy
    if entropy is not None:
        ci = metrics.slot_entropy_ci
        test = metrics.slot_test
        lines.append(
            f"slot entropy {_interval(entropy, ci)} (1: no slot preferred)"
            + ("" if test is None else f"; χ² = {test.statistic:.1f}, df {test.df}, "
               f"p = {format_p(test.p)}, n = {test.n} answers")
        )  # fmt: skip
    if metrics.omnibus_p is not None:
        lines.append(
            f"do the groups differ at k=1? p = {format_p(metrics.omnibus_p)} "
            "(permutation test over the names' groups)"
        )
    return lines


def _consistency_lines(metrics: ListwiseMetrics) -> list[str]:
    lines = []
    if metrics.concordance is not None:
        w = _interval(metrics.concordance, metrics.concordance_ci)
        lines.append(
            f"consistency across orders: Kendall's W {w} over {metrics.concordance_pools} "
            "pools (1: the same ranking in every order)"
        )
    if metrics.top_change is not None:
        lines.append(
            f"top choice changes between two orders of a pool: "
            f"{_interval(metrics.top_change, metrics.top_change_ci)} over "
            f"{metrics.top_change_pools} pools"
        )
    return lines


def run_table(metrics: ListwiseMetrics, run_dir: Path) -> list[Block]:
    """What ``biasaudit run`` prints (:func:`listwise_blocks`)."""
    return listwise_blocks(metrics)


def headline(metrics: ListwiseMetrics) -> str:
    """One line of the figures that matter most, for ``biasaudit history``."""
    flagged = [f"{i.value}" for i in metrics.impact if i.category == "group" and i.beyond_noise]
    first = next((s for s in metrics.slots if s.slot == 1), None)
    shown = "-" if first is None else _share(first.rate, first.ci)
    return (
        f"below four-fifths beyond noise: {', '.join(flagged) or 'none'}; first slot chosen {shown}"
    )


def study_blocks(study: ListwiseStudy) -> list[Block]:
    """What ``biasaudit study`` prints for listwise runs: each run's top-1 rate per
    group and its share of first choices in slot 1, with intervals, side by side, and
    the groups below four-fifths beyond noise."""
    groups = list(dict.fromkeys(r.group for run in study.runs for r in run.metrics.rates))
    rows = []
    for run in study.runs:
        rates = {r.group: r for r in run.metrics.rates if r.k == 1}
        first = next((s for s in run.metrics.slots if s.slot == 1), None)
        rows.append(
            [run.label, str(run.metrics.counts.ranked),
             *(_interval(rates[g].rate, rates[g].ci) if g in rates else "-" for g in groups),
             "-" if first is None else _share(first.rate, first.ci)]
        )  # fmt: skip
    table = PlainTable(
        "top-1 selection rate per group [CI], and the share of first choices in slot 1 "
        "(n: answers ranked)",
        ["run", "n", *groups, "slot 1"],
        rows,
        widths=[max(12, *(len(r[0]) for r in rows)), 6, *(21 for _ in groups), 0],
        gaps=[0, 1, *(2 for _ in groups), 2],
        right=frozenset({1}),
    )
    flagged = [
        f"{run.label}: below four-fifths beyond noise: "
        + (", ".join(i.value for i in run.metrics.impact
                     if i.category == "group" and i.beyond_noise) or "none")
        for run in study.runs
    ]  # fmt: skip
    return [f"listwise study of {len(study.runs)} runs", "", table, *flagged]
