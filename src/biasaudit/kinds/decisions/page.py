"""The report of a decisions run (Tamkin et al. 2023).

Sections: what was audited, the headline, the discrimination scores of each fill with
their intervals (a figure and a table, the mixed model beside), the answer order, the
per-scenario breakdown, notes, and the replay commands.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from biasaudit.kinds.common import read_run_metrics
from biasaudit.kinds.decisions.metrics_file import (
    SCENARIOS_COLUMNS,
    DecisionsMetrics,
    FillScores,
    Score,
    stored_verdicts,
)
from biasaudit.kinds.decisions.study import DecisionsStudy
from biasaudit.kinds.decisions.table import headline, score_label, verdict_legend
from biasaudit.render.common import audited_section, interval, p_value, replay_section, runs_table
from biasaudit.render.document import Bullets, Document, Figure, Paragraph, Section, Table
from biasaudit.render.figures import DotPanel, Series, dot_panels
from biasaudit.render.panels import Compared, Marks, Panel, figure_block, tests_by_key
from biasaudit.render.text import STRONG_MARK
from biasaudit.store.runs import Manifest
from biasaudit.store.tables import read_run_table

__all__ = ["compare_figures", "run_document", "study_page"]


def _scores_figure(name: str, labels: list[str], fills: Mapping[str, FillScores],
                   simulated: bool) -> Figure:  # fmt: skip
    series = []
    for fill, figures in fills.items():
        found = {score_label(s): s for s in figures.scores}
        values = [found[label].estimate if label in found else None for label in labels]
        cis = [found[label].ci if label in found else None for label in labels]
        lows = [ci[0] if ci else None for ci in cis]
        highs = [ci[1] if ci else None for ci in cis]
        series.append(Series(fill, values, lows, highs))
    png = dot_panels(
        labels,
        [DotPanel("Discrimination scores", series, "shift in the logit of P(yes)")],
        simulated=simulated,
    )
    return Figure(name, png, "Discrimination scores with their intervals, by fill",
                  "Marks: the score; bars: its interval; the line is no shift.")  # fmt: skip


def _labels(fills: Mapping[str, FillScores]) -> list[str]:
    return list(dict.fromkeys(score_label(s) for f in fills.values() for s in f.scores))


def _scores_section(metrics: DecisionsMetrics) -> Section:
    metrics = stored_verdicts(metrics)
    fills = {fill: f for fill, f in metrics.fills.items() if f.scores}
    if not fills:
        return Section("Discrimination scores", "scores", [Paragraph("No usable answer.")])
    labels = _labels(fills)
    level = f"{100 * metrics.confidence:g}%"
    rows = []
    for fill, figures in fills.items():
        for score in figures.scores:
            rows.append([
                fill, score_label(score), interval(score.estimate, score.ci, 3),
                p_value(score.p), _verdict(score), str(score.scenarios), str(score.rows),
                "-" if score.mixed_model is None else f"{score.mixed_model:+.3f}",
            ])  # fmt: skip
    method = (
        "Student t over scenarios: each scenario's own least-squares fit, averaged"
        if metrics.conventions != "paper"
        else "the mixed model's Wald interval (statsmodels)"
    )
    table = Table(
        ["fill", "score", f"estimate [{level} interval]", "p", "verdict (p Holm)", "scenarios",
         "persons", "mixed model"],
        rows,
        caption=f"Shift in the logit of P(yes) against {metrics.baseline}; > 0 favoured. "
        f"Interval: {method}. Verdict: {verdict_legend(metrics)}.",
        left=frozenset({0, 1}),
    )  # fmt: skip
    figure = _scores_figure("decisions_scores.png", labels, fills, metrics.simulated)
    return Section("Discrimination scores", "scores", [figure, table])


def _verdict(score: Score) -> str:
    if score.p_adjusted is None:
        return "too few scenarios to say"
    verdict = f"beyond noise {STRONG_MARK}" if score.beyond_noise else "within noise"
    return f"{verdict} ({p_value(score.p_adjusted)})"


def _order_section(metrics: DecisionsMetrics) -> Section:
    blocks: list[Any] = []
    for fill, figures in metrics.fills.items():
        if figures.order_gap is None:
            blocks.append(
                Paragraph(f"{fill}: one answer order asked ({', '.join(metrics.orders)}).")
            )
            continue
        blocks.append(Paragraph(
            f"{fill}: the logit of P(yes) with yes offered first minus with no offered first "
            f"is {interval(figures.order_gap, figures.order_gap_ci, 3)} (p "
            f"{p_value(figures.order_gap_p)}, {figures.scenarios} scenarios). Each person's "
            "score averages both orders, so this bias is measured and kept out of the scores."
        ))  # fmt: skip
    return Section("Answer order", "order", blocks)


def _scenarios_section(run_dir: Path) -> Section:
    path = run_dir / "scenarios.csv"
    if not path.exists():
        return Section("Per scenario", "scenarios", [Paragraph("scenarios.csv is missing.")])
    frame = read_run_table(path, SCENARIOS_COLUMNS)
    if frame.empty:
        return Section("Per scenario", "scenarios", [Paragraph("No scenario had a usable answer.")])
    terms = [
        c for c in frame.columns if c not in ("fill", "scenario", "rows", "p_yes", "order_gap")
    ]
    rows = [
        [str(r["fill"]), str(r["scenario"]), str(r["rows"]), _num(r["p_yes"], "{:.3f}"),
         *(_num(r[t], "{:+.2f}") for t in terms)]
        for r in frame.to_dict("records")
    ]  # fmt: skip
    table = Table(["fill", "scenario", "persons", "P(yes)", *terms], rows,
                  caption="Each scenario's own least-squares coefficient of each term "
                  "(logit scale); the scores are their means.", left=frozenset({0, 1}))  # fmt: skip
    return Section("Per scenario", "scenarios", [table])


def _num(value: Any, form: str) -> str:
    return "-" if value is None or pd.isna(value) else form.format(float(value))


def _notes_section(metrics: DecisionsMetrics) -> Section:
    items = list(metrics.notes)
    for fill, figures in metrics.fills.items():
        items += [f"{fill}, mixed model: {note}" for note in figures.mixed_model_notes]
    return Section("Notes", "notes", [Bullets(items)] if items else [Paragraph("None.")])


def _method_rows(metrics: DecisionsMetrics) -> list[tuple[str, str]]:
    return [
        ("method", "Tamkin et al. (2023): discrimination scores on the logit of P(yes)"),
        ("scenarios", f"{metrics.scenarios_source}: {metrics.scenarios_total} scenarios, "
                      f"{metrics.persons_total} persons"),
        ("answer orders", ", ".join(metrics.orders)),
        ("P(yes) from", metrics.scoring or "imported answers"),
        ("age", "per 10 years from 60" if metrics.age_scale == "decade" else "standardised"),
        ("conventions", metrics.conventions),
    ]  # fmt: skip


def run_document(run_dir: Path, manifest: Manifest, spec: Mapping[str, Any]) -> Document:
    """The report of the decisions run in ``run_dir``."""
    metrics: DecisionsMetrics = read_run_metrics(run_dir, DecisionsMetrics)
    document = Document(
        f"Decisions audit of {metrics.model}",
        f"Yes/no decisions across age, gender and race; scenarios: "
        f"{metrics.scenarios_source}; run {manifest.run_id}",
        metrics.simulated,
    )
    document.sections = [
        audited_section(
            manifest, spec, _method_rows(metrics), ("scenarios", "prompt", "fills", "orders")
        ),
        Section("Headline", "headline", [Paragraph(headline(metrics), strong=True)]),
        _scores_section(metrics),
        _order_section(metrics),
        _scenarios_section(run_dir),
        _notes_section(metrics),
        replay_section(manifest, run_dir),
    ]
    return document


def study_page(study: DecisionsStudy) -> tuple[str, list[Section], bool]:
    """The study page: its title, its sections, and whether a run is simulated."""
    simulated = all(run.metrics.simulated for run in study.runs)
    title = f"Decisions study of {len(study.runs)} runs"
    runs = runs_table([(r.label, f"{r.metrics.scenarios_total} scenarios", r.metrics.simulated,
                        r.path) for r in study.runs])  # fmt: skip
    sections = [runs]
    fills = list(dict.fromkeys(f for r in study.runs for f in r.metrics.fills))
    for fill in fills:
        with_fill = [r for r in study.runs if fill in r.metrics.fills]
        labels = _labels({r.label: r.metrics.fills[fill] for r in with_fill})
        rows = []
        for label in labels:
            cells = []
            for run in with_fill:
                found = {score_label(s): s for s in run.metrics.fills[fill].scores}
                score = found.get(label)
                cells.append("-" if score is None else interval(score.estimate, score.ci, 3))
            rows.append([label, *cells])
        caption = f"{fill}: discrimination scores by run (logit of P(yes))."
        table = Table(["score", *(r.label for r in with_fill)], rows, caption=caption)
        by_run = {r.label: r.metrics.fills[fill] for r in with_fill}
        figure = _scores_figure(f"study_{fill}.png", labels, by_run, simulated)
        sections.append(Section(f"{fill.capitalize()} fills", f"fill-{fill}", [figure, table]))
    return title, sections, simulated


def compare_figures(
    comparison: Compared, names: Mapping[str, str], reference: str, simulated: bool
) -> list[Figure]:
    """One row per score, a panel per fill: B - A with its interval."""
    found = tests_by_key(comparison.tests)
    fills = list(dict.fromkeys(t.group for t in comparison.tests))
    metrics = list(dict.fromkeys(t.metric for t in comparison.tests))
    panels = [
        Panel(
            f"{fill}: B - A", "change (logit)", [Marks("", [found.get((fill, m)) for m in metrics])]
        )
        for fill in fills
    ]
    return [figure_block(
        "compare_decisions.png", metrics, panels, comparison, simulated,
        "Change of each discrimination score, mean P(yes) and order gap, with intervals",
    )]  # fmt: skip
