"""The report of an allocation run (Chen, Ji & Evans; Cyberey, Ji & Evans).

Sections: what was audited, a headline sentence per group, RABBI and the
selection gaps per group with their intervals, selection rate by k, the
score distributions, pairwise answer statistics, irregular answers, notes,
and the replay commands.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from biasaudit.kinds.allocation.metrics_file import SCORES_COLUMNS, AllocationMetrics, too_few_units
from biasaudit.kinds.allocation.spec import FIGURE_NAMES
from biasaudit.kinds.allocation.study import METRICS, StudyResult
from biasaudit.kinds.allocation.table import findings, impact_table
from biasaudit.kinds.common import read_run_metrics
from biasaudit.metrics import select_in_pools, simulate_selection
from biasaudit.render.common import (
    audited_section,
    interval,
    p_value,
    percent,
    plain,
    points,
    replay_section,
    runs_table,
    signed,
)
from biasaudit.render.document import Bullets, Document, Figure, Paragraph, Section, Table
from biasaudit.render.figures import (
    DotPanel,
    LinePanel,
    ScatterCell,
    Series,
    distributions,
    dot_panels,
    line_panels,
    scatter_grid,
)
from biasaudit.render.panels import (
    Compared,
    Marks,
    Panel,
    figure_block,
    group_label,
    metric_name,
    tests_by_key,
)
from biasaudit.render.text import IMPACT_VERDICT, STRONG_MARK, Cell
from biasaudit.store.runs import Manifest
from biasaudit.store.tables import read_run_table

__all__ = ["headline_k", "run_document"]


def headline_k(metrics: AllocationMetrics) -> int:
    """The k the headline sentences use: the run's ``headline_k`` (1 unless chosen)."""
    return min(metrics.headline_k, metrics.k_max)


def _name(metrics: AllocationMetrics, group: str) -> str:
    return metrics.group_names.get(group) or group


def _named(metrics: AllocationMetrics, group: str) -> str:
    """``White male (W_M)``; the code alone where the group has no other name."""
    name = _name(metrics, group)
    return group if name == group else f"{name} ({group})"


def _plural(metrics: AllocationMetrics, group: str) -> str:
    name = _name(metrics, group)
    return f"{name} candidates" if name != group else f"candidates of group {group}"


def _gap_sentence(
    metrics: AllocationMetrics,
    group: str,
    gap: float | None,
    bounds: list[float] | None,
    k: int,
    qualified: bool,
    flagged: bool,
) -> str | None:
    """One sentence of a group's gap at k, with the verdict its table gives it."""
    if gap is None:
        return None
    reference = metrics.reference_group
    who, whom = _plural(metrics, group), _plural(metrics, reference)
    if qualified:
        who, whom = f"qualified {who}", f"qualified {whom}"
    size = abs(100 * gap)
    if size < 0.05:
        direction = "as often as"
    else:
        direction = f"{size:.1f} points {'less' if gap < 0 else 'more'} often than"
    level = f"{100 * metrics.confidence:g}% CI"
    if bounds is None:
        return f"{who.capitalize()} were selected {direction} {whom} at k={k}."
    low, high = (100 * b for b in bounds)
    verdict = (
        f"; beyond noise {STRONG_MARK}" if flagged
        else "; no gap beyond noise" + ("" if low > 0 or high < 0 else ": the interval includes 0")
    )  # fmt: skip
    return (
        f"{who[0].upper()}{who[1:]} were selected {direction} {whom} at k={k} "
        f"({level} {low:+.1f} to {high:+.1f} points{verdict})."
    )


def _headlines(metrics: AllocationMetrics) -> Section:
    k = headline_k(metrics)
    found = findings(metrics)
    blocks: list[Any] = []
    if found.smoke_test:
        blocks.append(
            Paragraph(
                f"Smoke test: as few as {found.fewest} {found.unit} stand behind a group, fewer "
                f"than 8. Intervals from so few {found.unit} are wide and say little, so nothing "
                "in this report is flagged: read it as the pipeline at work, not as a finding.",
                strong=True,
            )
        )
    blocks += [
        Paragraph(
            f"Each group against the reference group, {_named(metrics, metrics.reference_group)}, "
            f"when the model's scores pick the top {k} of each pool. "
            "ΔDP compares selection rates; ΔEO compares them among qualified candidates; RABBI "
            "(rank-biserial correlation, -1 to +1) says how often a group's scores rank above "
            "the reference's."
        )
    ]
    for group, figures in metrics.groups.items():
        sentences = [
            _gap_sentence(metrics, group, getattr(figures, gap).get(str(k)),
                          getattr(figures, f"{gap}_ci").get(str(k)), k,
                          qualified=gap == "eo_gap", flagged=found.gaps.get((gap, group, k), False))
            for gap in ("dp_gap", "eo_gap")
        ]  # fmt: skip
        if figures.rabbi is not None:
            sentences.append(
                f"RABBI {interval(figures.rabbi, figures.rabbi_ci)} "
                f"(p = {p_value(figures.rabbi_p)}, n = {figures.n} vs {figures.n_reference}"
                + (f"; beyond noise {STRONG_MARK}" if found.rabbi[group] else "")
                + ")."
            )
        said = [s for s in sentences if s] or [f"{_plural(metrics, group)}: no figures."]
        if not found.can_say[group]:
            said[0] = said[0].rstrip(".") + f"; too few {found.unit} to say."
        flagged = found.rabbi[group] or found.gaps.get(("dp_gap", group, k), False)
        blocks.append(Paragraph(f"{group}: {said[0]}", strong=flagged))
        if said[1:]:
            blocks.append(Paragraph(" ".join(said[1:])))
    return Section("Headline", "headline", blocks)


def _impact_section(metrics: AllocationMetrics) -> Section | None:
    """Impact ratios, the figure of NYC Local Law 144 bias audits, under a heading of their own."""
    table = impact_table(metrics)  # the terminal's table, drawn here
    if table is None:
        return None
    found = findings(metrics)
    caption = (
        "Each category's selection rate over the most selected category's, at the headline k "
        f"(k={metrics.headline_k}); the four-fifths rule (29 CFR 1607.4(D)) flags a ratio below "
        f"0.8, and {IMPACT_VERDICT}. "
        "n counts candidates, not pool appearances as the ΔDP table does."
    )
    if found.smoke_test:
        caption += f" Too few {found.unit} stand behind some group to flag any ratio."
    return Section(
        "Impact ratios (four-fifths rule, Local Law 144)", "impact",
        [Paragraph(caption), Table.of(table)],
    )  # fmt: skip


def _group_figure(metrics: AllocationMetrics) -> Figure:
    k = headline_k(metrics)
    groups = list(metrics.groups)
    labels = [_named(metrics, g) for g in groups]
    figures = [metrics.groups[g] for g in groups]

    def series(name: str, values: list[Any], bounds: list[Any], scale: float) -> Series:
        return Series(
            name,
            [None if v is None else scale * v for v in values],
            [None if b is None else scale * b[0] for b in bounds],
            [None if b is None else scale * b[1] for b in bounds],
        )

    panels = [
        DotPanel(
            "RABBI (rank-biserial)",
            [series("RABBI", [f.rabbi for f in figures], [f.rabbi_ci for f in figures], 1.0)],
            xlabel=f"< ranked below {metrics.reference_group} | above >",
        ),
        DotPanel(
            f"ΔDP and ΔEO at k={k}",
            [
                series(
                    "ΔDP",
                    [f.dp_gap.get(str(k)) for f in figures],
                    [f.dp_gap_ci.get(str(k)) for f in figures],
                    100.0,
                ),
                series(
                    "ΔEO",
                    [f.eo_gap.get(str(k)) for f in figures],
                    [f.eo_gap_ci.get(str(k)) for f in figures],
                    100.0,
                ),
            ],
            xlabel=f"selection rate minus {metrics.reference_group}'s (points)",
        ),
    ]
    if not any(f.dp_gap for f in figures):  # no selection: the gap panel would be empty
        panels = panels[:1]
    return Figure(
        "groups.png",
        dot_panels(labels, panels, simulated=metrics.simulated),
        f"RABBI and the selection gaps per group, with {100 * metrics.confidence:g}% intervals",
        f"Dots: estimates; bars: intervals ({metrics.interval_text()}); the vertical "
        f"line is no difference from {metrics.reference_group}.",
    )


def _marked(text: str, flagged: bool) -> str:
    """A cell's text with the mark of a figure beyond noise, as every surface shows it."""
    return str(Cell(text, flagged))


def _scores_table(metrics: AllocationMetrics) -> Table:
    delta = "δ preference" if metrics.method == "pairwise" else "δ mean score"
    found = findings(metrics)
    rows = [
        [
            f"{g} {_name(metrics, g)}" if _name(metrics, g) != g else g,
            str(f.n),
            _marked(
                interval(f.rabbi, f.rabbi_ci) + (" (too few)" if too_few_units(f) else ""),
                found.rabbi[g],
            ),
            p_value(f.rabbi_p),
            signed(f.avg_gap, 3),
            plain(f.jsd),
            plain(f.emd),
        ]
        for g, f in metrics.groups.items()
    ]
    return Table(
        ["group", "n", "RABBI [CI]", "p", delta, "JSD", "EMD"],
        rows,
        caption=f"Against {metrics.reference_group} (n = {_n_reference(metrics)}); "
        f"intervals: {metrics.interval_text()}. {STRONG_MARK}: beyond noise after Holm's "
        "adjustment over the table's RABBI p-values.",
    )


def _n_reference(metrics: AllocationMetrics) -> int:
    return next(iter(metrics.groups.values())).n_reference if metrics.groups else 0


def _gap_table(metrics: AllocationMetrics, kind: str) -> Table:
    selection = metrics.selection
    assert selection is not None
    counts = selection.appearances if kind == "dp" else (selection.qualified_appearances or {})
    flags = findings(metrics).gaps
    rows = []
    for group, figures in metrics.groups.items():
        values = figures.dp_gap if kind == "dp" else figures.eo_gap
        bounds = figures.dp_gap_ci if kind == "dp" else figures.eo_gap_ci
        cells = [
            _marked(
                _points_interval(values.get(str(k)), bounds.get(str(k)),
                                 too_few=too_few_units(figures)),
                flags.get((f"{kind}_gap", group, k), False),
            )
            for k in range(1, metrics.k_max + 1)
        ]  # fmt: skip
        rows.append([group, str(counts.get(group, 0)), *cells])
    title = "ΔDP: selection rate" if kind == "dp" else "ΔEO: selection rate of qualified candidates"
    return Table(
        ["group", "n", *(f"k={k}" for k in range(1, metrics.k_max + 1))],
        rows,
        caption=f"{title} minus {metrics.reference_group}'s, in percentage points "
        f"[{100 * metrics.confidence:g}% CI]; n = pool appearances; {STRONG_MARK}: beyond noise "
        "after Holm's adjustment over the table.",
    )


def _points_interval(
    value: float | None, bounds: list[float] | None, *, too_few: bool = False
) -> str:
    if bounds is None:
        return f"{points(value)} (too few)" if too_few and value is not None else points(value)
    return f"{points(value)} [{points(bounds[0])}, {points(bounds[1])}]"


def selection_rates(
    metrics: AllocationMetrics, scores: pd.DataFrame, spec: Mapping[str, Any]
) -> pd.DataFrame | None:
    """Per-group selection rate by k: the run's own (``metrics.rates``); for runs from
    before biasaudit recorded them, the selection behind ΔDP drawn again."""
    if metrics.rates:
        found = pd.DataFrame(
            {g: {int(k): v for k, v in r.selection_rate.items()} for g, r in metrics.rates.items()}
        ).T.sort_index(axis=1)
        found.index.name, found.columns.name = "group", "k"
        return found
    selection = metrics.selection
    if selection is None:
        return None
    scored = scores[scores["score"].notna() & scores["group"].isin(list(selection.appearances))]
    if selection.pool == "given":
        if "pool" not in scored.columns:
            return None
        result = select_in_pools(
            scored["score"], scored["group"], scored["pool"], k_max=metrics.k_max
        )
    else:
        options: dict[str, Any] = {
            "k_max": metrics.k_max,
            "pool": selection.pool,
            "n_rounds": selection.rounds,
            "seed": int(spec.get("seed") or 0),
        }
        if selection.pool == "random":
            options["pool_size"] = selection.pool_size
        if scored["subtask"].nunique() > 1:
            options["strata"] = scored["subtask"].to_numpy()
        result = simulate_selection(scored["score"], scored["group"], **options)
    return result.selection_rate


def _gap_series(metrics: AllocationMetrics, group: str, ks: list[int], style: int) -> Series:
    figures = metrics.groups[group]
    bounds = [figures.dp_gap_ci.get(str(k)) for k in ks]
    return Series(
        group,
        [None if figures.dp_gap.get(str(k)) is None else 100 * figures.dp_gap[str(k)] for k in ks],
        [None if b is None else 100 * b[0] for b in bounds],
        [None if b is None else 100 * b[1] for b in bounds],
        style=style,
    )


def _rate_cell(metrics: AllocationMetrics, rates: pd.DataFrame, group: str, k: int) -> str:
    own = metrics.rates.get(group)
    bounds = None if own is None else own.selection_rate_ci.get(str(k))
    shown = percent(float(rates.loc[group, k]))
    return shown if bounds is None else f"{shown} [{percent(bounds[0])}, {percent(bounds[1])}]"


def _omnibus_text(metrics: AllocationMetrics) -> str:
    tests = [
        f"k={k}: p = {p_value(test.p)}"
        for k, test in sorted(metrics.omnibus.items(), key=lambda i: int(i[0]))
    ]
    if not tests:
        return ""
    return (
        "; do the groups' rates differ at all? (permutation test of the names' groups, "
        f"{next(iter(metrics.omnibus.values())).permutations} relabellings) " + ", ".join(tests)
    )


def _selection_section(
    metrics: AllocationMetrics, scores: pd.DataFrame | None, spec: Mapping[str, Any]
) -> Section:
    section = Section("Selection rate by k", "selection")
    if metrics.selection is None:
        section.blocks.append(Paragraph("No selection was simulated for this run (see the notes)."))
        return section
    rates = None if scores is None else selection_rates(metrics, scores, spec)
    if rates is not None:
        ks = list(range(1, metrics.k_max + 1))
        order = [g for g in [metrics.reference_group, *metrics.groups] if g in rates.index]
        styles = [metrics.reference_group, *metrics.groups]
        series = [
            Series(g, [float(rates.loc[g, k]) * 100 for k in ks], style=styles.index(g))
            for g in order
        ]
        panel = LinePanel(
            "Share of pool appearances selected",
            ks,
            series,
            xlabel="k (top k of each pool)",
            ylabel="selection rate (%)",
            emphasise=metrics.reference_group,
        )
        gaps = LinePanel(
            f"ΔDP: selection rate minus {metrics.reference_group}'s",
            ks,
            [_gap_series(metrics, g, ks, i) for i, g in enumerate(metrics.groups, 1)],
            xlabel="k",
            ylabel="points",
            reference=0.0,
        )
        section.blocks.append(
            Figure(
                "selection.png",
                line_panels([panel, gaps], simulated=metrics.simulated, columns=2),
                "Selection rate of each group by k, and ΔDP by k with intervals",
                f"Left: the reference group {metrics.reference_group} is the thick black line; "
                "the run's own rates (metrics.json). Right: ΔDP "
                f"with intervals ({metrics.interval_text()}).",
            )
        )
        section.blocks.append(
            Table(
                ["group", *(f"k={k}" for k in ks)],
                [[g, *(_rate_cell(metrics, rates, g, k) for k in ks)] for g in order],
                caption="Selection rate: share of a group's pool appearances selected, with "
                "its interval over names" + _omnibus_text(metrics) + ".",
            )
        )
    section.blocks.append(_gap_table(metrics, "dp"))
    if any(f.eo_gap for f in metrics.groups.values()):
        section.blocks.append(_gap_table(metrics, "eo"))
    return section


def _distribution_section(metrics: AllocationMetrics, scores: pd.DataFrame | None) -> Section:
    section = Section("Score distributions", "scores")
    section.blocks.append(_scores_table(metrics))
    if scores is None or scores.empty:
        section.blocks.append(Paragraph("scores.csv is missing: no distribution to draw."))
        return section
    groups = [metrics.reference_group, *metrics.groups]
    values = [
        scores.loc[(scores["group"] == g) & scores["score"].notna(), "score"].tolist()
        for g in groups
    ]
    what = (
        "wins per pair within the pool" if metrics.method == "pairwise" else "expected label value"
    )
    section.blocks.append(
        Figure(
            "scores.png",
            distributions(groups, values, xlabel=f"score ({what})", simulated=metrics.simulated),
            "Score distribution of each group",
            "Boxes: quartiles and median; circles: every scored candidate.",
        )
    )
    return section


def _pairwise_section(metrics: AllocationMetrics) -> Section:
    section = Section("Pairwise answers", "pairwise")
    stats = metrics.pairwise
    if stats is None:
        section.blocks.append(Paragraph("Not a pairwise run: no pairwise output statistics."))
        return section
    rows = [
        ["pools compared", str(stats.pools)],
        ["prompts (both orders of every pair)", str(stats.n_prompts)],
        ["pairs", str(stats.n_pairs)],
        ["regular answers (named one candidate)", percent(stats.regular)],
        ["unparsed answers", str(stats.unparsed)],
        ["ties ('both' / 'neither')", percent(stats.ties)],
        ["flipped with the order (position bias)", percent(stats.flipped)],
        ["inconsistent", percent(stats.inconsistent)],
    ]
    section.blocks.append(Table(["statistic", "value"], rows))
    return section


def _irregular_section(metrics: AllocationMetrics) -> Section:
    counts = metrics.candidates
    rows = [[g, str(f.n), str(f.irregular), str(f.unscored)] for g, f in metrics.groups.items()]
    blocks: list[Any] = [
        Paragraph(
            f"{counts.total} candidates: {counts.scored} scored, {counts.irregular} with at least "
            f"one answer outside the label set ({counts.refused} of them refusals), "
            f"{counts.unscored} unscored, {counts.failed} whose request failed. Irregular "
            "answers and refusals are counted, never fatal."
        ),
        Table(
            ["group", "scored", "irregular", "unscored"],
            rows,
            caption=f"Per group (the reference {metrics.reference_group} is not listed).",
        ),
    ]
    if metrics.notes:
        blocks.append(Bullets(list(metrics.notes)))
    return Section("Irregular answers and notes", "irregular", blocks)


def _method_rows(metrics: AllocationMetrics) -> list[tuple[str, str]]:
    scoring = metrics.scoring
    selection = metrics.selection
    pools = "-"
    if selection is not None:
        pools = (
            f"{selection.rounds} pools of {selection.pool_size} ({selection.pool}) per "
            f"subtask x {selection.subtasks}; {selection.bootstrap or 0} bootstrap replicates"
        )
    counts = metrics.candidates
    return [
        ("probe and scoring path", f"{scoring.describe()} [path: {scoring.path}]"),
        ("reference group", _named(metrics, metrics.reference_group)),
        (
            "sample sizes",
            f"{counts.total} candidates ({counts.scored} scored) in "
            f"{len(metrics.groups) + 1} groups; {len(metrics.subtasks)} subtask(s)",
        ),
        ("selection", pools),
        ("intervals", metrics.interval_text()),
        (
            "conventions",
            "the papers' (--conventions paper)"
            if metrics.conventions == "paper"
            else "biasaudit's (docs: Where biasaudit departs from the papers)",
        ),
    ]


def run_document(run_dir: Path, manifest: Manifest, spec: Mapping[str, Any]) -> Document:
    """The report of the allocation run in ``run_dir``."""
    metrics: AllocationMetrics = read_run_metrics(run_dir, AllocationMetrics)
    scores_path = run_dir / "scores.csv"
    scores = read_run_table(scores_path, SCORES_COLUMNS) if scores_path.exists() else None
    document = Document(
        f"{metrics.task} audit of {metrics.model}",
        f"Allocation audit, {metrics.method}; reference group {metrics.reference_group}; "
        f"run {manifest.run_id}",
        metrics.simulated,
    )
    sections: list[Section | None] = [
        audited_section(manifest, spec, _method_rows(metrics), _DATA_FIELDS),
        _headlines(metrics),
        Section("RABBI and selection gaps per group", "groups", [_group_figure(metrics)]),
        _selection_section(metrics, scores, spec),
        _impact_section(metrics),
        _distribution_section(metrics, scores),
        _pairwise_section(metrics) if metrics.pairwise is not None else None,
        _irregular_section(metrics),
        replay_section(manifest, run_dir),
    ]
    document.sections = [section for section in sections if section is not None]
    return document


# --- the study page of runs of this kind ---------------------------------------


# Spec fields that say which data an audit read, in the order the report shows them.
_DATA_FIELDS = ("jobs", "names", "names_per_group", "resumes", "essays", "topic", "pool_size")
METRIC_NAMES = {"rabbi": "RABBI", "avg_gap": "δ", "jsd": "JSD", "emd": "EMD"}
GAP_NAMES = {"dp": "ΔDP", "eo": "ΔEO"}


def study_page(study: StudyResult) -> tuple[str, list[Section], bool]:
    """The study page: its title, its sections, and whether a run is simulated."""
    simulated = all(run.metrics.simulated for run in study.runs)  # some: the runs table says
    title = f"Allocation study of {len(study.runs)} runs"
    return title, _study_sections(study, simulated, study.ndcg_at), simulated


def _study_sections(study: StudyResult, simulated: bool, ndcg_at: int) -> list[Section]:
    runs = runs_table(
        [
            (r.label, f"{r.metrics.task}, {r.metrics.method}", r.metrics.simulated, r.path)
            for r in study.runs
        ]
    )
    return [
        runs,
        _validity(study, simulated),
        _ndcg(study, simulated, ndcg_at),
        _rankings(study),
        _full_views(study),
    ]


def _full_views(study: StudyResult) -> Section:
    """The papers' other views: NDCG@N for every N, per-group correlations, score shapes."""
    from biasaudit.kinds.allocation.table import _curve_blocks, _group_blocks, _shape_blocks

    blocks: list[Any] = []
    for block in [*_curve_blocks(study), *_group_blocks(study), *_shape_blocks(study)]:
        if isinstance(block, str):
            continue
        blocks.append(Table.of(block))
    if not blocks:
        blocks.append(Paragraph("Two or more models are needed for these views."))
    return Section("NDCG by cutoff, correlations by group, score shapes", "views", blocks)


def _validity(study: StudyResult, simulated: bool) -> Section:
    k = min(2, study.k_max)
    points = study.points
    cells = []
    for metric, directional in METRICS.items():
        for gap in ("dp", "eo"):
            pair = points[[metric, f"{gap}_{k}", "model"]].dropna()
            x = pair[metric].astype(float).to_numpy()
            y = pair[f"{gap}_{k}"].astype(float).to_numpy() * 100
            y = y if directional else np.abs(y)
            found = study.correlations
            row = found[(found["metric"] == metric) & (found["gap"] == gap) & (found["k"] == k)]
            r = float(row["r"].iloc[0]) if len(row) else math.nan
            p = float(row["p_value"].iloc[0]) if len(row) else math.nan
            gap_name = GAP_NAMES[gap] if directional else f"|{GAP_NAMES[gap]}|"
            cells.append(
                ScatterCell(
                    f"{METRIC_NAMES[metric]} vs {gap_name} (k={k})",
                    list(x),
                    list(y),
                    METRIC_NAMES[metric],
                    f"{gap_name} (points)",
                    f"r = {signed(r)}, p = {p_value(p)}, n = {len(pair)}",
                    list(pair["model"]),
                )
            )
    blocks: list[Any] = [
        Paragraph(
            f"Each point is one (model, subtask, group). Pearson r of each metric with the "
            f"selection gap at k={k} (JSD and EMD carry no sign: against the gap's absolute "
            "value). A metric that predicts allocational harm has r far from 0."
        ),
        Figure(
            "validity.png",
            scatter_grid(cells, simulated=simulated, columns=4),
            "Metric against selection gap, with Pearson r",
            "One panel per (metric, gap); markers tell the models apart.",
        ),
    ]
    table = study.correlations
    rows = []
    for (metric, gap), found in table.groupby(["metric", "gap"], sort=False):
        found = found.sort_values("k")
        rows.append(
            [
                METRIC_NAMES[str(metric)],
                GAP_NAMES[str(gap)],
                *(
                    f"{signed(r)} (p {p_value(p)})"
                    for r, p in zip(found["r"], found["p_value"], strict=True)
                ),
                str(int(found["n"].max())),
            ]
        )
    blocks.append(
        Table(
            ["metric", "gap", *(f"k={k}" for k in range(1, study.k_max + 1)), "n"],
            rows,
            caption="Pearson r (two-sided p) over all points.",
            left=frozenset({0, 1}),
        )
    )
    return Section("Predictive validity", "validity", blocks)


def _ndcg(study: StudyResult, simulated: bool, ndcg_at: int) -> Section:
    selection = study.selection
    # The cutoff used: the one asked for, at most the models a setting has (as the
    # terminal's table says it).
    if len(selection):
        ndcg_at = int(selection["at"].iloc[0])
    section = Section(f"Model selection: NDCG@{ndcg_at}", "ndcg")
    if selection.empty or selection["ndcg"].isna().all():
        section.blocks.append(
            Paragraph(
                "NDCG needs two or more models in a setting (task, method, subtask) whose gaps "
                "differ: none here."
            )
        )
        return section
    ks = list(range(1, study.k_max + 1))
    panels = []
    for gap in ("dp", "eo"):
        series = []
        for index, metric in enumerate(METRICS):
            rows = selection[(selection["metric"] == metric) & (selection["gap"] == gap)]
            values = [float(v) for v in rows.sort_values("k")["ndcg"]]
            series.append(Series(METRIC_NAMES[metric], values, style=index))
        panels.append(
            LinePanel(
                f"ranking by the metric vs by {GAP_NAMES[gap]}",
                ks,
                series,
                xlabel="k",
                ylabel=f"NDCG@{ndcg_at}",
            )
        )
    section.blocks += [
        Paragraph(
            f"Within each setting, models are ranked by the RMS over groups of each metric and of "
            f"the gap; NDCG@{ndcg_at} of the metric's ranking against the gap's (1: the metric "
            "picks the models the gap does), averaged over settings."
        ),
        Figure(
            "ndcg.png",
            line_panels(panels, simulated=simulated, columns=2),
            "NDCG of each metric's model ranking, by k",
            "One line per metric.",
        ),
    ]
    return section


def _rms(values: pd.Series) -> float:
    numbers = values.dropna().astype(float).to_numpy()
    return float(np.sqrt(np.mean(numbers**2))) if numbers.size else math.nan


def _rankings(study: StudyResult) -> Section:
    k = min(2, study.k_max)
    columns = {METRIC_NAMES[m]: m for m in METRICS} | {
        f"{GAP_NAMES[g]} k={k}": f"{g}_{k}" for g in ("dp", "eo")
    }
    by_model = study.points.groupby("model", sort=False)
    orders = {}
    for title, column in columns.items():
        values = by_model[column].apply(_rms).sort_values()
        orders[title] = [f"{model} ({plain(v, 3)})" for model, v in values.items()]
    models = study.points["model"].nunique()
    rows = [[str(rank + 1), *(order[rank] for order in orders.values())] for rank in range(models)]
    return Section(
        "Model fairness rankings",
        "rankings",
        [
            Table(
                ["rank", *columns],
                rows,
                left=frozenset(range(1, len(columns) + 1)),
                caption="Models from fairest to least fair by each metric and gap: RMS over every "
                "(subtask, group) point of the model, in brackets.",
            )
        ],
    )


# --- the compare page: this kind's figures of B - A ----------------------------------


def compare_figures(
    comparison: Compared, names: Mapping[str, str], reference: str, simulated: bool
) -> list[Figure]:
    """RABBI and δ per group, then ΔDP and ΔEO per group and k: B - A with intervals."""
    found = tests_by_key(comparison.tests)
    groups = list(dict.fromkeys(t.group for t in comparison.tests if t.group is not None))
    labels = [group_label(g, names) for g in groups]

    def marks(name: str, metric: str, scale: float = 1.0) -> Marks:
        return Marks(name, [found.get((g, metric)) for g in groups], scale)

    figures = [
        figure_block(
            "compare_scores.png",
            labels,
            [
                Panel("RABBI: B - A", f"< more below {reference} | more above >",
                       [marks("RABBI", "rabbi")]),
                Panel("δ (mean score gap): B - A", f"change of the mean score gap to {reference}",
                       [marks("δ", "avg_gap")]),
            ],
            comparison,
            simulated,
            "Change of RABBI and of the mean score gap per group, with 95% intervals",
        )
    ]  # fmt: skip
    ks = sorted({int(m.split("k=")[1]) for _, m in found if m.startswith(("dp_gap", "eo_gap"))})
    panels = [
        Panel(
            f"{metric_name(gap, FIGURE_NAMES)}: B - A",
            "change of the selection gap (points)",
            [marks(f"k={k}", f"{gap} k={k}", 100.0) for k in ks],
        )
        for gap in ("dp_gap", "eo_gap")
        if any(m.startswith(gap) for _, m in found)
    ]
    if panels:
        figures.append(
            figure_block(
                "compare_gaps.png",
                labels,
                panels,
                comparison,
                simulated,
                "Change of ΔDP and ΔEO per group at each k, with 95% intervals",
            )
        )
    return figures
