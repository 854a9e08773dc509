"""The report of a Grade Score run (Iourovitski, "Grade Score", 2024).

Sections: what was audited, the headline, the three scores with their
intervals, the position histogram, agreement with people's choice, the
per-item table, unparsed and failed answers, and the replay commands.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from biasaudit.kinds.common import read_run_metrics
from biasaudit.kinds.grade_score.metrics_file import ITEMS_COLUMNS, GradeScoreMetrics, slot_flags
from biasaudit.kinds.grade_score.run import judge_settings
from biasaudit.kinds.grade_score.spec import FIGURE_NAMES
from biasaudit.kinds.grade_score.study import SCORES, GradeStudyResult, GradeStudyRun
from biasaudit.kinds.grade_score.table import is_left_out, unusable_warning
from biasaudit.render.common import (
    audited_section,
    interval,
    p_value,
    percent,
    plain,
    replay_section,
    runs_table,
)
from biasaudit.render.document import Bullets, Document, Figure, Paragraph, Section, Table
from biasaudit.render.figures import Bars, DotPanel, Series, bar_panels, dot_panels
from biasaudit.render.panels import Compared, Marks, Panel, figure_block, metric_name, tests_by_key
from biasaudit.render.text import STRONG_MARK
from biasaudit.store.runs import Manifest
from biasaudit.store.tables import read_run_table

__all__ = ["SCORE_NAMES", "position_bars", "run_document"]

SCORE_NAMES = {
    "grade_score": "Grade Score",
    "entropy": "entropy score",
    "choice": "choice score",
}
_MEANING = {
    "grade_score": "harmonic mean of the entropy and choice scores (1: no order bias, stable)",
    "entropy": "1: no favourite slot; 0: always the same slot",
    "choice": "share of answers naming the item's most chosen option",
}


def _headline(metrics: GradeScoreMetrics) -> Section:
    level = f"{100 * metrics.confidence:g}% CI"
    histogram = metrics.position_histogram
    expected = 1 / metrics.n_options
    top = max(range(len(histogram)), key=lambda i: histogram[i]) if histogram else 0
    blocks: list[Any] = []
    warning = unusable_warning(metrics)
    if warning is not None:
        blocks.append(Paragraph(f"Read first: {warning}.", strong=True))
    if metrics.grade_score is not None:
        blocks.append(
            Paragraph(
                f"The judge's Grade Score is {plain(metrics.grade_score, 2)}"
                f"{_ci(metrics, level)} over {metrics.items} items: 1 means it picks the same "
                "option whatever the order.",
                strong=True,
            )
        )
    if histogram:
        blocks.append(
            Paragraph(
                f"Slot {top + 1} was chosen in {percent(histogram[top])}"
                f"{_slot_ci(metrics, top)} of usable answers, against {percent(expected)} for "
                f"a judge with no position bias{_slot_test(metrics)}.",
                strong=True,
            )
        )
    if metrics.agreement is not None:
        bounds = metrics.agreement.rate_ci
        ci = f" ({level} {percent(bounds[0])} to {percent(bounds[1])})" if bounds else ""
        blocks.append(
            Paragraph(
                f"It chose the option people prefer in {percent(metrics.agreement.rate)} of answers"
                f"{ci}, over {metrics.agreement.items} items."
            )
        )
    return Section("Headline", "headline", blocks or [Paragraph("No usable answer.")])


def _ci(metrics: GradeScoreMetrics, level: str) -> str:
    bounds = metrics.grade_score_ci
    return "" if bounds is None else f" ({level} {plain(bounds[0], 2)} to {plain(bounds[1], 2)})"


def _scores_section(metrics: GradeScoreMetrics) -> Section:
    rows = [
        [
            SCORE_NAMES[name],
            plain(getattr(metrics, name), 3),
            interval(getattr(metrics, name), getattr(metrics, f"{name}_ci"), 3, sign=False),
            _MEANING[name],
        ]
        for name in SCORE_NAMES
    ]
    table = Table(
        ["score", "mean", f"{100 * metrics.confidence:g}% interval", "meaning"],
        rows,
        caption=f"Means over {metrics.items} items (t-intervals).",
        left=frozenset({0, 3}),
    )
    values = [getattr(metrics, name) for name in SCORE_NAMES]
    bounds = [getattr(metrics, f"{name}_ci") for name in SCORE_NAMES]
    panel = DotPanel(
        "Mean score over items",
        [Series("mean", values, [b and b[0] for b in bounds], [b and b[1] for b in bounds])],
        xlabel="0 (order decides) ... 1 (content decides)",
        reference=None,
    )
    figure = Figure(
        "scores.png",
        dot_panels(list(SCORE_NAMES.values()), [panel], simulated=metrics.simulated),
        "Grade Score, entropy and choice scores with intervals",
        f"Dots: means over items; bars: {100 * metrics.confidence:g}% t-intervals.",
    )
    return Section("Scores", "scores", [table, figure])


def position_bars(title: str, histograms: Mapping[str, list[float]], n_options: int) -> Bars:
    """Bars of the share of answers naming each slot, one series per run."""
    return Bars(
        title,
        [f"slot {i}" for i in range(1, n_options + 1)],
        [Series(name, [100 * v for v in values]) for name, values in histograms.items()],
        ylabel="share of usable answers (%)",
        expected=100 / n_options,
    )


def _position_section(metrics: GradeScoreMetrics) -> Section:
    bars = position_bars(
        "Slot chosen (slot 1 shown first)",
        {"answers": metrics.position_histogram},
        metrics.n_options,
    )
    figure = Figure(
        "positions.png",
        bar_panels([bars], simulated=metrics.simulated, columns=1),
        "Position histogram: share of answers naming each slot",
        "The dashed line is what a judge with no position bias gives.",
    )
    counts: list[int | None] = list(metrics.position_counts) or [None] * len(
        metrics.position_histogram
    )
    table = Table(
        ["slot", "answers", "share of usable answers", f"{100 * metrics.confidence:g}% interval"],
        [
            [str(i + 1), "-" if n is None else str(n), percent(v), _slot_ci(metrics, i) or "-"]
            for i, (v, n) in enumerate(zip(metrics.position_histogram, counts, strict=True))
        ],
        caption="Exact binomial intervals, simultaneous over the slots; test that no slot "
        f"is preferred: {_slot_test(metrics).removeprefix('; ') or 'none'}; {STRONG_MARK} "
        "marks a slot beyond noise (its interval excludes the even share: its own exact "
        "p, Bonferroni over the slots, below 0.05).",
    )
    return Section("Position histogram", "positions", [figure, table])


def _slot_ci(metrics: GradeScoreMetrics, slot: int) -> str:
    if not metrics.position_ci:
        return ""
    low, high = metrics.position_ci[slot]
    mark = f" {STRONG_MARK}" if slot_flags(metrics).get(slot) else ""
    return f" [{percent(low)}, {percent(high)}]{mark}"


def _slot_test(metrics: GradeScoreMetrics) -> str:
    if metrics.slot_p is None:
        return ""
    return (
        f"; exact binomial per slot (Bonferroni over the slots), p = {p_value(metrics.slot_p)} "
        f"over {metrics.usable} answers"
    )


def _items_section(metrics: GradeScoreMetrics, items: pd.DataFrame | None) -> Section:
    if items is None:
        return Section("Per item", "items", [Paragraph("items.csv is missing.")])
    slots = [f"pos_{s}" for s in range(1, metrics.n_options + 1)]
    rows = []
    for row in items.sort_values("grade", na_position="first").to_dict("records"):
        preferred = row.get("preferred")
        left_out = is_left_out(metrics, int(row["usable"]), int(row["trials"]))
        scores = [plain(_number(row[name])) for name in ("grade", "entropy", "choice")]
        rows.append(
            [
                str(row["item_id"]),
                *(["partial"] * 3 if left_out else scores),
                " ".join(str(int(row.get(s, 0) or 0)) for s in slots),
                _text(row.get("most_chosen")),
                "-" if pd.isna(preferred) else str(int(preferred)),
                str(row["unparsed"]),
                str(row["failed"]),
            ]
        )
    return Section(
        "Per item",
        "items",
        [
            Table(
                [
                    "item",
                    "grade",
                    "entropy",
                    "choice",
                    "answers per slot",
                    "most chosen",
                    "preferred",
                    "unparsed",
                    "failed",
                ],
                rows,
                caption="Lowest Grade Score first; answers per slot 1..n; options by index into "
                "the item's options (random: the unrelated option); partial: some answers "
                "unusable, so the item is left out of the means and its scores not shown.",
                left=frozenset({0, 4, 5}),
            )
        ],
    )


def _number(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _text(value: Any) -> str:
    return "-" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def _answers_section(metrics: GradeScoreMetrics) -> Section:
    lines = [
        f"{metrics.trials} requests: {metrics.usable} usable answers, {metrics.unparsed} "
        f"unparsed (named no option, {metrics.refused} of them refusals; left out), "
        f"{metrics.failed} failed (left out).",
    ]
    if metrics.random_option_share is not None:
        lines.append(
            f"The unrelated option was chosen in {percent(metrics.random_option_share)} of answers."
        )
    blocks: list[Any] = [Paragraph(" ".join(lines))]
    if metrics.notes:
        blocks.append(Bullets(list(metrics.notes)))
    return Section("Unparsed answers and notes", "unparsed", blocks)


def _method_rows(metrics: GradeScoreMetrics) -> list[tuple[str, str]]:
    options = f"{metrics.n_options} options per request"
    if metrics.random_option:
        options += " (one unrelated option drawn from another item)"
    return [
        (
            "probe",
            f"multiple choice, {metrics.permutations} permutations: {metrics.orders} orders "
            f"x {metrics.replicates} replicate(s) per item; {options}",
        ),
        (
            "judge prompt",
            judge_settings(metrics),
        ),
        (
            "sample sizes",
            f"{metrics.items_total} items ({metrics.items} scored), {metrics.trials} requests",
        ),
        ("intervals", f"{100 * metrics.confidence:g}% t-intervals over items"),
    ]


def run_document(run_dir: Path, manifest: Manifest, spec: Mapping[str, Any]) -> Document:
    """The report of the Grade Score run in ``run_dir``."""
    metrics: GradeScoreMetrics = read_run_metrics(run_dir, GradeScoreMetrics)
    items_path = run_dir / "items.csv"
    items = read_run_table(items_path, ITEMS_COLUMNS) if items_path.exists() else None
    document = Document(
        f"Grade Score audit of {metrics.model}",
        f"Order bias and choice stability of an LLM judge; items: {metrics.items_source}; "
        f"run {manifest.run_id}",
        metrics.simulated,
    )
    document.sections = [
        audited_section(
            manifest,
            spec,
            _method_rows(metrics),
            ("items", "prompt", "random_option", "permutations", "replicates"),
        ),
        _headline(metrics),
        _scores_section(metrics),
        _position_section(metrics),
        _items_section(metrics, items),
        _answers_section(metrics),
        replay_section(manifest, run_dir),
    ]
    return document


# --- the study page of runs of this kind ---------------------------------------


def study_page(study: GradeStudyResult) -> tuple[str, list[Section], bool]:
    """The study page: its title, its sections, and whether a run is simulated."""
    simulated = all(run.metrics.simulated for run in study.runs)  # some: the runs table says
    title = f"Grade Score study of {len(study.runs)} runs"
    return title, _study_sections(study, simulated), simulated


def _study_sections(study: GradeStudyResult, simulated: bool) -> list[Section]:
    runs = runs_table(
        [
            (
                r.label,
                f"items {r.metrics.items_source}, prompt {r.metrics.prompt}, random option "
                f"{'on' if r.metrics.random_option else 'off'}",
                r.metrics.simulated,
                r.path,
            )
            for r in study.runs
        ]
    )
    table = study.table
    header = ["model", *(f"prompt {p}{' +random' if r else ''}" for p, r in study.settings)]
    tables = []
    for score in SCORES:
        rows = _study_rows(study, functools.partial(_score_cell, score=score))
        caption = f"{SCORE_NAMES[score]}: mean over items [interval] (n = items)."
        tables.append(Table(header, rows, caption=caption))
    shares: list[Any] = []
    if table["agreement"].notna().any():
        rows = _study_rows(study, _agreement_cell)
        caption = (
            "Agreement with people's preferred option: mean over items of the share of answers "
            "choosing it [interval] (n = items that name one)."
        )
        shares.append(Table(header, rows, caption=caption))
    rows = _study_rows(study, lambda row: f"{percent(row['unparsed_share'])} of {row['trials']}")
    shares.append(Table(header, rows, caption="Answers naming no option, of all asked."))
    if table["random_share"].notna().any():
        rows = _study_rows(
            study,
            lambda row: "-" if pd.isna(row["random_share"])
            else f"{percent(row['random_share'])} of {row['usable']}",
        )  # fmt: skip
        shares.append(
            Table(header, rows, caption="The unrelated (random) option chosen, of usable answers.")
        )
    # Where every run is simulated the page says so once; in a mixed study each says so.
    mark = not simulated
    labels = [_run_label(r, mark=mark) for r in study.runs]
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
    ]
    histograms = Figure(
        "positions.png",
        bar_panels(panels, simulated=simulated, columns=4),
        f"Position histograms of all {len(panels)} runs: share of answers naming each slot",
        "The dashed line is what a judge with no position bias gives.",
    )
    return [
        runs,
        Section("Grade Score tables", "tables", [figure, *tables]),
        Section("Agreement, unparsed answers and the random option", "shares", shares),
        Section("Position histograms", "positions", [histograms]),
    ]


def _run_label(run: GradeStudyRun, *, mark: bool) -> str:
    """A run as the figures name it: its row, its column, and (``mark``) SIMULATED where
    it is."""
    sim = " (SIMULATED)" if mark and run.metrics.simulated else ""
    random = " +random" if run.metrics.random_option else ""
    return f"{run.label}{sim} / prompt {run.prompt}{random}"


def _study_rows(study: GradeStudyResult, cell: Callable[[Any], str]) -> list[list[str]]:
    """One row per (model, item set), one cell per setting; "-" where no run is. In a study
    of real and simulated runs, a simulated row says so."""
    table = study.table
    mixed = bool(table["simulated"].any()) and not bool(table["simulated"].all())
    rows = []
    for model in dict.fromkeys(table["model"]):
        simulated = mixed and bool(table[table["model"] == model]["simulated"].any())
        cells = [f"{model} (SIMULATED)" if simulated else str(model)]
        for prompt, random in study.settings:
            found = table[
                (table["model"] == model)
                & (table["prompt"] == prompt)
                & (table["random_option"] == random)
            ]
            cells.append("-" if found.empty else cell(found.iloc[0]))
        rows.append(cells)
    return rows


def _score_cell(row: Any, score: str) -> str:
    bounds = row[f"{score}_ci"]
    bounds = bounds if isinstance(bounds, list) else None
    return interval(row[score], bounds, 3, sign=False) + f" (n={row['items']})"


def _agreement_cell(row: Any) -> str:
    if row["agreement"] is None or pd.isna(row["agreement"]):
        return "-"
    bounds = row["agreement_ci"] if isinstance(row["agreement_ci"], list) else None
    return interval(row["agreement"], bounds, 3, sign=False) + f" (n={row['agreement_items']})"


def _grade_panel(values: list[float | None], bounds: list[list[float] | None]) -> DotPanel:
    lows = [None if b is None else b[0] for b in bounds]
    highs = [None if b is None else b[1] for b in bounds]
    return DotPanel(
        "Grade Score",
        [Series("Grade Score", values, lows, highs)],
        xlabel="0 (order decides) ... 1 (content decides)",
        reference=None,
    )


# --- the compare page: this kind's figures of B - A ----------------------------------


def compare_figures(
    comparison: Compared, names: Mapping[str, str], reference: str, simulated: bool
) -> list[Figure]:
    """One row per score: B - A with its interval."""
    found = tests_by_key(comparison.tests)
    metrics = list(dict.fromkeys(t.metric for t in comparison.tests))
    labels = [metric_name(m, FIGURE_NAMES) for m in metrics]
    panel = Panel(
        "Scores: B - A", "change of the score", [Marks("", [found[None, m] for m in metrics])]
    )
    return [figure_block(
        "compare_scores.png", labels, [panel], comparison, simulated,
        "Change of the Grade Score, entropy and choice scores, with 95% intervals",
    )]  # fmt: skip
