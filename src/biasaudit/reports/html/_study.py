"""Study reports: allocation (predictive validity, NDCG@N, rankings), Grade Score, RUTEd.

A study folder holds ``study.json`` (``kind``, ``runs``, ``ndcg_at``); the
report is computed afresh from the runs it names, by the same functions as
``biasaudit study``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from biasaudit.errors import UsageError
from biasaudit.kinds.allocation.study import METRICS, StudyResult, run_study
from biasaudit.kinds.grade_score.html import SCORE_NAMES, position_bars
from biasaudit.kinds.grade_score.study import SCORES, GradeStudyResult, run_grade_study
from biasaudit.kinds.ruted.html import metric_panels
from biasaudit.kinds.ruted.metrics import METRICS as RUTED_METRICS
from biasaudit.kinds.ruted.study import RutedStudyResult, run_ruted_study
from biasaudit.reports.html._common import interval, p_value, plain, signed
from biasaudit.reports.html._document import Document, Figure, Paragraph, Section, Table
from biasaudit.reports.html._figures import (
    DotPanel,
    LinePanel,
    ScatterCell,
    Series,
    bar_panels,
    dot_panels,
    line_panels,
    scatter_grid,
)

__all__ = ["study_document"]

METRIC_NAMES = {"rabbi": "RABBI", "avg_gap": "δ", "jsd": "JSD", "emd": "EMD"}
GAP_NAMES = {"dp": "ΔDP", "eo": "ΔEO"}


def _runs_table(rows: list[tuple[str, str, bool, Path]]) -> Section:
    table = Table(
        ["run", "what", "model", "path"],
        [
            [label, what, "SIMULATED model (not real)" if simulated else "real model", str(path)]
            for label, what, simulated, path in rows
        ],
        left=frozenset({0, 1, 2, 3}),
    )
    return Section("Runs compared", "runs", [table])


def _allocation(study: StudyResult, ndcg_at: int) -> list[Section]:
    simulated = any(run.metrics.simulated for run in study.runs)
    runs = _runs_table(
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
    from biasaudit.kinds.allocation.report import _curve_blocks, _group_blocks, _shape_blocks

    blocks: list[Any] = []
    for block in [*_curve_blocks(study), *_group_blocks(study), *_shape_blocks(study)]:
        if isinstance(block, str):
            continue
        blocks.append(Table(list(block.header), [list(r) for r in block.rows], caption=block.title))
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


def _grade(study: GradeStudyResult) -> list[Section]:
    simulated = any(run.metrics.simulated for run in study.runs)
    runs = _runs_table(
        [
            (
                r.label,
                f"prompt {r.metrics.prompt}, random option "
                f"{'on' if r.metrics.random_option else 'off'}",
                r.metrics.simulated,
                r.path,
            )
            for r in study.runs
        ]
    )
    tables = []
    table = study.table
    for score in SCORES:
        rows = []
        for model in dict.fromkeys(table["model"]):
            cells = [str(model)]
            for prompt, random in study.settings:
                found = table[
                    (table["model"] == model)
                    & (table["prompt"] == prompt)
                    & (table["random_option"] == random)
                ]
                if found.empty:
                    cells.append("-")
                    continue
                row = found.iloc[0]
                bounds = row[f"{score}_ci"]
                bounds = bounds if isinstance(bounds, list) else None
                cells.append(interval(row[score], bounds, 3, sign=False) + f" (n={row['items']})")
            rows.append(cells)
        tables.append(
            Table(
                ["model", *(f"prompt {p}{' +random' if r else ''}" for p, r in study.settings)],
                rows,
                caption=f"{SCORE_NAMES[score]}: mean over items [interval] (n = items).",
            )
        )
    labels = [
        f"{r.label} / prompt {r.metrics.prompt}{' +random' if r.metrics.random_option else ''}"
        for r in study.runs
    ]
    values = [r.metrics.grade_score for r in study.runs]
    bounds = [r.metrics.grade_score_ci for r in study.runs]
    figure = Figure(
        "grade_scores.png",
        dot_panels(labels, [_grade_panel(values, bounds)], simulated=simulated),
        "Grade Score of each run, with intervals",
        "Dots: mean over items; bars: t-intervals.",
    )
    panels = [
        position_bars(label, {"answers": r.metrics.position_histogram}, r.metrics.n_options)
        for label, r in zip(labels, study.runs, strict=True)
    ][:12]
    histograms = Figure(
        "positions.png",
        bar_panels(panels, simulated=simulated, columns=3),
        "Position histograms: share of answers naming each slot",
        "The dashed line is what a judge with no position bias gives.",
    )
    return [
        runs,
        Section("Grade Score tables", "tables", [figure, *tables]),
        Section("Position histograms", "positions", [histograms]),
    ]


def _grade_panel(values: list[float | None], bounds: list[list[float] | None]) -> DotPanel:
    lows = [None if b is None else b[0] for b in bounds]
    highs = [None if b is None else b[1] for b in bounds]
    return DotPanel(
        "Grade Score",
        [Series("Grade Score", values, lows, highs)],
        xlabel="0 (order decides) ... 1 (content decides)",
        reference=None,
    )


def _ruted(study: RutedStudyResult) -> list[Section]:
    simulated = any(run.metrics.simulated for run in study.runs)
    runs = _runs_table([(r.label, "RUTEd", r.metrics.simulated, r.path) for r in study.runs])
    rows = {r.label: {c: r.metrics.contexts[c] for c in study.contexts} for r in study.runs}
    figure = Figure(
        "metrics.png",
        dot_panels(study.contexts, metric_panels(rows), simulated=simulated),
        "Neutrality, skew and stereotype per context and model, with intervals",
        "One marker per model; bars: 95% intervals (none for logprob-read standard tests).",
    )
    values = Table(
        ["model", *(f"{m} {c}" for m in RUTED_METRICS for c in study.contexts)],
        [
            [str(label), *(plain(row[(m, c)]) for m in RUTED_METRICS for c in study.contexts)]
            for label, row in study.values.iterrows()
        ],
        caption="Each metric by model and context.",
    )
    blocks: list[Any] = [figure, values]
    if not study.with_standard.empty:
        blocks.append(
            _correlations(
                study.with_standard,
                "context",
                "Spearman rho with the standard test (Lum et al., Table 1)",
            )
        )
    if not study.between_contexts.empty:
        pairs = study.between_contexts.assign(
            pair=study.between_contexts["first"] + "~" + study.between_contexts["second"]
        )
        blocks.append(
            _correlations(pairs, "pair", "Spearman rho between contexts (Lum et al., Table 2)")
        )
    if not study.least_biased.empty:
        blocks.append(
            Table(
                ["metric", "context", "least biased model(s)", "agrees with the standard test"],
                [
                    [
                        str(r["metric"]),
                        str(r["context"]),
                        str(r["models"] or "-"),
                        "-" if r["agrees"] is None else ("yes" if r["agrees"] else "no"),
                    ]
                    for r in study.least_biased.to_dict("records")
                ],
                caption="Lowest neutrality, |skew|, |stereotype|.",
                left=frozenset({0, 1, 2, 3}),
            )
        )
    if len(study.runs) < 3:
        blocks.append(Paragraph("Rank correlations need three or more models: left blank."))
    return [runs, Section("Metrics and rank correlations", "correlations", blocks)]


def _correlations(frame: pd.DataFrame, column: str, caption: str) -> Table:
    names = list(dict.fromkeys(frame[column]))
    rows = []
    for metric in RUTED_METRICS:
        found = frame[frame["metric"] == metric].set_index(column)
        rows.append(
            [
                metric,
                *(
                    "-"
                    if math.isnan(found.loc[n, "rho"])
                    else f"{signed(found.loc[n, 'rho'])} (p {p_value(found.loc[n, 'p_value'])})"
                    for n in names
                ),
            ]
        )
    return Table(["metric", *names], rows, caption=caption)


def study_document(folder: Path) -> Document:
    """The report of the study described by ``folder/study.json``."""
    study = json.loads((folder / "study.json").read_text(encoding="utf-8"))
    kind, runs = study.get("kind"), [Path(p) for p in study.get("runs", [])]
    if kind == "grade-score":
        grade = run_grade_study(runs)
        simulated = any(r.metrics.simulated for r in grade.runs)
        title, sections = f"Grade Score study of {len(runs)} runs", _grade(grade)
    elif kind == "ruted":
        ruted = run_ruted_study(runs)
        simulated = any(r.metrics.simulated for r in ruted.runs)
        title, sections = f"RUTEd study of {len(runs)} runs", _ruted(ruted)
    elif kind == "allocation":
        ndcg_at = int(study.get("ndcg_at", 3))
        allocation = run_study(runs, ndcg_at=ndcg_at)
        simulated = any(r.metrics.simulated for r in allocation.runs)
        title, sections = f"Allocation study of {len(runs)} runs", _allocation(allocation, ndcg_at)
    else:
        raise UsageError(f"{folder}/study.json names an unknown kind of study: {kind!r}")
    document = Document(title, f"Study folder {folder.name}", simulated)
    document.sections = sections
    return document
