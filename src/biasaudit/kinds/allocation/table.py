"""Plain-text tables of allocation runs and studies, as the command line prints them.

Every figure is shown with its interval or with the number of candidates,
pools or points behind it; a simulated model is labelled as such on the
first line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from biasaudit.kinds.allocation.metrics_file import (
    AllocationMetrics,
    GroupMetrics,
    fewest_units,
    gap_too_few,
    stored_verdicts,
    too_few_to_say,
    too_few_units,
)
from biasaudit.kinds.allocation.study import StudyResult
from biasaudit.metrics import FEW_UNITS
from biasaudit.render.text import (
    SIGNIFICANT,
    SIMULATED,
    STRONG_MARK,
    TOO_FEW_TO_SAY,
    Block,
    Cell,
    PlainTable,
    block_lines,
    format_interval,
    format_p,
    format_percent,
    format_plain,
    format_share,
    format_signed,
    impact_table as shared_impact_table,
    smoke_test_lines,
)

__all__ = [
    "Findings",
    "allocation_blocks",
    "allocation_table",
    "findings",
    "impact_table",
    "study_blocks",
    "study_table",
]


@dataclass(frozen=True)
class Findings:
    """What a run's tables may flag: each flag read after Holm's adjustment over its
    table, and none for a group with fewer than :data:`~biasaudit.metrics.FEW_UNITS`
    units behind it or behind the reference (too few to say)."""

    fewest: int | None
    unit: str
    can_say: dict[str, bool]
    rabbi: dict[str, bool]
    gaps: dict[tuple[str, str, int], bool]
    impact: dict[tuple[str, str, int], bool]
    families: dict[str, int] = field(default_factory=dict)

    @property
    def smoke_test(self) -> bool:
        return self.fewest is not None and self.fewest < FEW_UNITS


def findings(metrics: AllocationMetrics) -> Findings:
    """The flags of :func:`allocation_blocks` and the HTML report: the verdicts
    ``metrics.json`` stores (:attr:`AllocationMetrics.verdicts`), read, never remade."""
    from biasaudit.kinds.allocation.metrics_file import unit_noun

    fewest = fewest_units(metrics.groups)
    can_say = {group: not too_few_to_say(f) for group, f in metrics.groups.items()}
    rabbi = {group: False for group in metrics.groups}
    gaps: dict[tuple[str, str, int], bool] = {}
    families = {"rabbi": 0, "dp_gap": 0, "eo_gap": 0}
    for verdict in metrics.verdicts:
        if verdict.figure == "rabbi":
            rabbi[verdict.unit] = verdict.beyond_noise
        else:
            gaps[(verdict.figure, verdict.unit, verdict.k)] = verdict.beyond_noise
        families[verdict.figure] = families.get(verdict.figure, 0) + (
            verdict.p_adjusted is not None
        )
    shown = [r for r in stored_verdicts(metrics) if r.k == metrics.headline_k]
    impact = {(r.category, r.value, r.k): r.beyond_noise for r in shown}
    families["impact"] = sum(r.p_adjusted is not None for r in shown)
    unit = unit_noun(metrics.intervals.units) if metrics.intervals is not None else "units"
    if unit == "items" and metrics.task == "essay-grading":
        unit = "essays"
    return Findings(fewest, unit, can_say, rabbi, gaps, impact, families)


def allocation_blocks(metrics: AllocationMetrics) -> list[Block]:
    """What ``biasaudit run`` prints for an allocation audit (without ``run:``): the
    header, RABBI, δ, JSD and EMD per group, the selection rates, ΔDP and ΔEO per
    group and k, the pairwise statistics and the notes."""
    found = findings(metrics)
    blocks: list[Block] = [*_header(metrics)]
    if found.smoke_test:
        assert found.fewest is not None
        blocks += smoke_test_lines(
            found.fewest, found.unit, _more_units(metrics), where=" behind a group"
        )
    blocks += ["", _scores_table(metrics, found)]
    blocks += _rate_lines(metrics, found)
    impact = impact_table(metrics, found)
    if impact is not None:
        blocks += ["", impact]
    if metrics.selection is not None:
        blocks += ["", _gap_table(metrics, "dp_gap", found)]
        if any(g.eo_gap for g in metrics.groups.values()):
            blocks += ["", _gap_table(metrics, "eo_gap", found)]
    blocks += _multiplicity_lines(metrics, found)
    if metrics.pairwise is not None:
        blocks += ["", _pairwise_line(metrics)]
    blocks += [f"note: {note}" for note in metrics.notes]
    return blocks


def _more_units(metrics: AllocationMetrics) -> str:
    if metrics.task == "resume-screening":
        return "--names-per-group 20"
    if metrics.task == "essay-grading":
        return "a corpus of at least 8 essays per group (examples/corpus.csv)"
    return "at least 8 candidates (names) per group"


def _multiplicity_lines(metrics: AllocationMetrics, found: Findings) -> list[str]:
    """How the flags allow for reading many figures at once, and why the per-group flags
    and the test of all groups together may differ."""
    if not any(found.families.values()):
        return []
    tested = ", ".join(
        f"{what} {n}" for what, n in (
            ("RABBI", found.families["rabbi"]),
            ("ΔDP", found.families["dp_gap"]),
            ("ΔEO", found.families["eo_gap"]),
            ("impact ratios", found.families["impact"]),
        ) if n
    )  # fmt: skip
    lines = [
        "",
        f"flags: each interval is {100 * metrics.confidence:g}% on its own; a figure is flagged "
        "(marked *, 'beyond noise') only after Holm's adjustment over the",
        f"figures of its table ({tested}), so that a model with no bias shows a false flag in at "
        "most 5% of tables",
        *(
            [
                "RABBI's flag reads its permutation p-value, the other figures' their intervals: "
                "near the edge, a RABBI interval and its p can disagree, and the flag follows the p"
            ]
            if found.families["rabbi"]
            else []
        ),
    ]
    k = metrics.headline_k
    test = metrics.omnibus.get(str(k))
    flagged = [f"ΔDP of {g}" for g in metrics.groups if found.gaps.get(("dp_gap", g, k))]
    flagged += [
        f"the impact ratio of {value}" for (_, value, at), beyond in found.impact.items()
        if beyond and at == k
    ]  # fmt: skip
    if test is not None and flagged and test.p >= SIGNIFICANT:
        lines.append(
            f"why they differ: at k={k}, {', '.join(flagged)} is flagged while the test of all "
            f"groups together finds no difference (p = {format_p(test.p)}): that test spreads its "
            "power over every group's distance from the mean rate, while a gap or a ratio "
            "concentrates it on one pair"
        )
    elif test is not None and not flagged and test.p < SIGNIFICANT and any(found.can_say.values()):
        lines.append(
            f"why they differ: at k={k} the groups' rates differ as a whole (p = "
            f"{format_p(test.p)}) but no single gap to {metrics.reference_group} is beyond "
            "noise after the adjustment: the difference lies among the other groups, or is "
            "spread too thin for any one pair"
        )
    return lines


def allocation_table(metrics: AllocationMetrics) -> list[str]:
    """The plain lines of :func:`allocation_blocks`."""
    return block_lines(allocation_blocks(metrics))


def _header(metrics: AllocationMetrics) -> list[str]:
    model = metrics.model + (f" ({SIMULATED})" if metrics.simulated else "")
    counts, requests = metrics.candidates, metrics.requests
    reference = metrics.reference_group
    reference_name = _display_name(metrics, reference)
    n_reference = next(iter(metrics.groups.values())).n_reference if metrics.groups else 0
    return [
        f"{metrics.task} audit of {model}",
        f"method: {metrics.scoring.describe()}",
        f"candidates: {counts.total} ({counts.scored} scored, {counts.irregular} with irregular "
        f"answers, {counts.unscored} unscored); requests: {requests.requests} "
        f"({requests.sent} sent, {requests.cache_hits} from cache, {requests.failures} failed, "
        f"{requests.refusals} refused)",
        f"reference: {reference}{' ' + reference_name if reference_name else ''} "
        f"(n = {n_reference}); "
        f"intervals: {metrics.interval_text()}"
        + ("; conventions: the papers'" if metrics.conventions == "paper" else ""),
        *([f"qualified: {metrics.qualified_rule}"] if metrics.qualified_rule else []),
    ]


def _rate_lines(metrics: AllocationMetrics, found: Findings) -> list[str]:
    """Every group's own selection rate at the headline k, and whether the groups differ."""
    k = str(metrics.headline_k)
    rates = [
        f"{group} {format_share(r.selection_rate.get(k), r.selection_rate_ci.get(k))}"
        for group, r in metrics.rates.items()
        if k in r.selection_rate
    ]
    if not rates:
        return []
    lines = ["", f"selection rate at k={k}: " + ", ".join(rates)]
    test = metrics.omnibus.get(k)
    if test is not None:
        lines.append(
            f"do the groups differ at k={k}? p = {format_p(test.p)} (permutation test of the "
            f"groups' selection rates, {test.permutations} relabellings)"
        )
    return lines


def impact_table(metrics: AllocationMetrics, found: Findings | None = None) -> PlainTable | None:
    """Impact ratios at the headline k (:func:`biasaudit.render.text.impact_table`)."""
    found = found or findings(metrics)
    k = metrics.headline_k
    rows = [row for row in metrics.impact if row.k == k]
    beyond = {
        (r.category, r.value): found.impact.get((r.category, r.value, k), False) for r in rows
    }
    return shared_impact_table(rows, k, beyond=beyond, too_few=found.smoke_test)


def _display_name(metrics: AllocationMetrics, group: str) -> str:
    name = metrics.group_names.get(group, "")
    return "" if name == group else name


def _scores_table(metrics: AllocationMetrics, found: Findings) -> PlainTable:
    delta = "δ pref" if metrics.method == "pairwise" else "δ mean"
    rows: list[list[str | Cell]] = []
    for group, figures in metrics.groups.items():
        strong = found.rabbi[group]
        rabbi = format_interval(figures.rabbi, figures.rabbi_ci, too_few=too_few_units(figures))
        rows.append(
            [
                group,
                _display_name(metrics, group)[:24],
                str(figures.n),
                Cell(rabbi, strong),
                Cell(format_p(figures.rabbi_p), strong),
                format_signed(figures.avg_gap),
                format_plain(figures.jsd),
                format_plain(figures.emd),
                str(figures.irregular),
                "" if found.can_say[group] else TOO_FEW_TO_SAY,
            ]
        )
    return PlainTable(
        None,
        ["group", "", "n", "RABBI [CI]", "p", delta, "JSD", "EMD", "irreg", ""],
        rows,
        widths=[6, 24, 6, 25, 8, 7, 6, 6, 6, 0],
        gaps=[0, 1, 1, 2, 1, 2, 1, 1, 1, 2],
        right=frozenset({2, 4, 5, 6, 7, 8}),
        labels=2,
    )


def _gap_table(metrics: AllocationMetrics, kind: str, found: Findings) -> PlainTable:
    selection = metrics.selection
    assert selection is not None
    reference = metrics.reference_group
    if kind == "dp_gap":
        title = f"ΔDP: selection rate minus {reference}'s"
        appearances = selection.appearances
    else:
        title = f"ΔEO: selection rate of qualified candidates minus {reference}'s"
        appearances = selection.qualified_appearances or {}
    ks = range(1, metrics.k_max + 1)
    rows: list[list[str | Cell]] = []
    for group, figures in metrics.groups.items():
        few = gap_too_few(metrics, figures)
        cells: list[str | Cell] = [
            Cell(
                format_interval(_gap(figures, kind, k), _gap_ci(figures, kind, k), too_few=few),
                found.gaps.get((kind, group, k), False),
            )
            for k in ks
        ]
        verdict = "" if found.can_say[group] else TOO_FEW_TO_SAY
        rows.append([group, str(appearances.get(group, 0)), *cells, verdict])
    return PlainTable(
        f"{title}, top k of each pool; {_pools(metrics)}",
        ["group", "n", *(f"k={k} [CI]" for k in ks), ""],
        rows,
        widths=[6, 6, *(24 for _ in ks), 0],
        gaps=[0, 1, *(2 for _ in ks), 2],
        right=frozenset({1}),
    )


def _pools(metrics: AllocationMetrics) -> str:
    selection = metrics.selection
    assert selection is not None
    if selection.pool == "given":
        where = f"the {selection.rounds} pools compared, {selection.pool_size} candidates each"
    else:
        design = (
            "one candidate per group" if selection.pool == "one_per_group" else "random candidates"
        )
        drawn = "balanced " if selection.draw == "balanced" else ""
        where = (
            f"{selection.rounds} {drawn}simulated pools of {selection.pool_size} ({design}) "
            f"per subtask x {selection.subtasks} subtask{'s' if selection.subtasks != 1 else ''}"
        )
    replicates = f"; {selection.bootstrap} bootstrap replicates" if selection.bootstrap else ""
    return f"{where}; n = pool appearances{replicates}"


def _gap(figures: GroupMetrics, kind: str, k: int) -> float | None:
    values = figures.dp_gap if kind == "dp_gap" else figures.eo_gap
    return values.get(str(k))


def _gap_ci(figures: GroupMetrics, kind: str, k: int) -> Sequence[float] | None:
    values = figures.dp_gap_ci if kind == "dp_gap" else figures.eo_gap_ci
    return values.get(str(k))


def _pairwise_line(metrics: AllocationMetrics) -> str:
    stats = metrics.pairwise
    assert stats is not None
    return (
        f"pairwise answers: {stats.n_prompts} prompts over {stats.n_pairs} pairs in "
        f"{stats.pools} pools; regular {format_percent(stats.regular)} ({stats.unparsed} unparsed"
        f"{f', {stats.refused} of them refused' if stats.refused else ''}), "
        f"ties {format_percent(stats.ties)}, "
        f"flipped with the order {format_percent(stats.flipped)}, "
        f"inconsistent {format_percent(stats.inconsistent)}"
    )


_METRIC_NAMES = {"rabbi": "RABBI", "avg_gap": "δ", "jsd": "JSD |gap|", "emd": "EMD |gap|"}
_GAP_NAMES = {"dp": "ΔDP", "eo": "ΔEO"}


def study_table(result: StudyResult) -> list[str]:
    """The lines ``biasaudit study`` prints."""
    return block_lines(study_blocks(result))


def study_blocks(study: StudyResult) -> list[Block]:
    """What was studied, then the tables of predictive validity and of model selection."""
    runs = study.runs
    labels = ", ".join(
        run.label + (" (SIMULATED)" if run.metrics.simulated else "") for run in runs
    )
    settings = study.points.groupby(["task", "method", "subtask"]).ngroups
    header = ["metric", "gap", *(f"k={k}" for k in range(1, study.k_max + 1)), ""]
    widths = [11, 5, *([17] * study.k_max), 0]
    validity = [
        _study_cells(
            rows,
            [_correlation(cell.r, cell.p_value) for cell in rows.itertuples()],
            f"n={int(rows['n'].max())}",
        )
        for rows in _by_metric_and_gap(study.correlations)
    ]
    selection = [
        _study_cells(
            rows,
            [format_plain(cell.ndcg, 2) for cell in rows.itertuples()],
            f"settings={int(rows['settings'].max())}",
        )
        for rows in _by_metric_and_gap(study.selection)
    ]
    title = (
        "predictive validity: Pearson r of each metric with the gap (two-sided p); n = points; "
        "ΔEO against the metrics on qualified candidates"
    )
    return [
        f"study of {len(runs)} runs: {labels}",
        f"points: {len(study.points)} (model x subtask x group) in {settings} settings "
        f"(task, method, subtask); k = 1..{study.k_max}",
        "",
        PlainTable(title, header, validity, widths, labels=2),
        "",
        PlainTable(_selection_title(study), header, selection, widths, labels=2),
        *_curve_blocks(study),
        *_group_blocks(study),
        *_shape_blocks(study),
    ]


def _curve_blocks(result: StudyResult) -> list[Block]:
    """NDCG@N for every cutoff the settings allow, at k = 1."""
    curve = result.ndcg_curve
    if curve.empty or int(curve["models"].max()) < 2:
        return []
    fewest = int(curve["models"].max())
    curve = curve[(curve["k"] == 1) & (curve["at"] <= fewest)]
    cutoffs = sorted(curve["at"].unique())
    rows = [
        [_METRIC_NAMES[metric], _GAP_NAMES[gap],
         *(format_plain(float(own.loc[own["at"] == at, "ndcg"].iloc[0]), 2) for at in cutoffs)]
        for (metric, gap), own in curve.groupby(["metric", "gap"], sort=False)
    ]  # fmt: skip
    header = ["metric", "gap", *(f"@{at}" for at in cutoffs)]
    title = f"model selection at k=1: NDCG@N for N = 1..{cutoffs[-1]}"
    return ["", PlainTable(title, header, rows, [11, 5, *([7] * len(cutoffs))], labels=2)]


def _group_blocks(result: StudyResult) -> list[Block]:
    """Each metric's correlation with ΔDP@1 within each group (the papers' per-group view)."""
    found = result.group_correlations
    if found.empty:
        return []
    at_one = found[(found["k"] == 1) & (found["gap"] == "dp")]
    metrics = list(dict.fromkeys(at_one["metric"]))
    rows = []
    for group, own in at_one.groupby("group", sort=False):
        cells = [
            _correlation(float(r.r), float(r.p_value))
            for r in own.set_index("metric").loc[metrics].itertuples()
        ]
        rows.append([str(group), *cells, f"n={int(own['n'].max())}"])
    header = ["group", *(_METRIC_NAMES[m] for m in metrics), ""]
    title = "per group: Pearson r of each metric with ΔDP at k=1 over that group's points (p)"
    return ["", PlainTable(title, header, rows, [8, *([17] * len(metrics)), 0])]


def _shape_blocks(result: StudyResult) -> list[Block]:
    shapes = result.shapes
    if shapes.empty:
        return []
    rows = [
        [str(r.model)[:28], str(r.group), str(int(r.n)), format_plain(r.mean),
         format_signed(r.skewness), format_signed(r.kurtosis)]
        for r in shapes.itertuples()
    ]  # fmt: skip
    header = ["model", "group", "n", "mean", "skewness", "kurtosis"]
    title = "score distributions: skewness and excess kurtosis per group"
    return ["", PlainTable(title, header, rows, [29, 8, 7, 8, 10, 10])]


def _correlation(r: float, p_value: float) -> str:
    return "-" if math.isnan(r) else f"{format_signed(r, 2)} ({format_p(p_value)})"


def _selection_title(result: StudyResult) -> str:
    at = int(result.selection["at"].iloc[0]) if len(result.selection) else 0
    models = int(result.selection["models"].max()) if len(result.selection) else 0
    if models < 2:
        return "model selection: needs two or more models in a setting (none here)"
    return (
        f"model selection: NDCG@{at} of the models ranked by the RMS over groups of each "
        f"metric, against the ranking by the gap; mean over settings of {models}+ models"
    )


def _by_metric_and_gap(frame: pd.DataFrame) -> list[pd.DataFrame]:
    return [rows.sort_values("k") for _, rows in frame.groupby(["metric", "gap"], sort=False)]


def _study_cells(rows: pd.DataFrame, cells: list[str], count: str) -> list[str]:
    first = rows.iloc[0]
    return [_METRIC_NAMES[first["metric"]], _GAP_NAMES[first["gap"]], *cells, count]


# --- the rich view of the same table, for a terminal ---------------------------------


def run_table(metrics: AllocationMetrics, run_dir: Path) -> list[Block]:
    """What ``biasaudit run`` prints (:func:`allocation_blocks`)."""
    return allocation_blocks(metrics)


def headline(metrics: AllocationMetrics) -> str:
    """One line of the figures that matter most, for ``biasaudit history``."""
    rabbis = {g: f.rabbi for g, f in metrics.groups.items() if f.rabbi is not None}
    if not rabbis:
        return "(no RABBI)"
    worst = min(rabbis, key=lambda g: rabbis[g])
    p_value = metrics.groups[worst].rabbi_p
    shown = "-" if p_value is None else f"{p_value:.2g}"
    found = findings(metrics)
    beyond = [f"{value} {STRONG_MARK}" for (_, value, _), v in found.impact.items() if v]
    impact = f"; impact ratios beyond noise: {', '.join(beyond) or 'none'}" if found.impact else ""
    mark = f" {STRONG_MARK}" if found.rabbi.get(worst) else ""
    return f"lowest RABBI {worst} {rabbis[worst]:+.3f}{mark} (p {shown}){impact}"
