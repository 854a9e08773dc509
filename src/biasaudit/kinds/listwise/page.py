"""The report of a listwise run, its study page and its compare figures: the terminal's
tables (one description, :mod:`biasaudit.kinds.listwise.table`) with the sentences
that say what they mean."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biasaudit.kinds.common import read_run_metrics
from biasaudit.kinds.listwise.metrics_file import ListwiseMetrics
from biasaudit.kinds.listwise.spec import FIGURE_NAMES
from biasaudit.kinds.listwise.study import ListwiseStudy
from biasaudit.kinds.listwise.table import (
    N_MEANS,
    fewest_units,
    impact_flags,
    listwise_blocks,
    listwise_impact_table,
    resampled_phrase,
    study_blocks,
)
from biasaudit.metrics import FEW_UNITS
from biasaudit.render.common import audited_section, replay_section, runs_table
from biasaudit.render.document import Bullets, Document, Paragraph, Section, Table
from biasaudit.render.panels import (
    Compared,
    Marks,
    Panel,
    figure_block,
    group_label,
    metric_name,
    tests_by_key,
)
from biasaudit.render.text import IMPACT_VERDICT, Block, PlainTable, impact_table
from biasaudit.store.runs import Manifest

if TYPE_CHECKING:
    from biasaudit.render.document import Figure

__all__ = ["compare_figures", "run_document", "study_page"]

_DATA_FIELDS = ("jobs", "names", "names_per_group", "resumes", "essays", "topic", "pool_size")


def _drawn(blocks: list[Block]) -> list[Any]:
    """The terminal's blocks as the report's: lines as paragraphs, tables as tables."""
    drawn: list[Any] = []
    for block in blocks:
        if isinstance(block, PlainTable):
            drawn.append(Table.of(block))
        elif block:
            drawn.append(Paragraph(block))
    return drawn


def _headline(metrics: ListwiseMetrics) -> Section:
    fewest = fewest_units(metrics)
    smoke = fewest is not None and fewest < FEW_UNITS
    flags = {} if smoke else impact_flags(metrics)
    beyond = [i for i in metrics.impact if flags.get((i.category, i.value))]
    within = [i for i in metrics.impact if i.flagged and i not in beyond]
    sentences = []
    if smoke:
        sentences.append(
            f"Smoke test: as few as {fewest} names (else items) stand behind a group, fewer "
            "than 8; intervals from so few are wide and say little, so no ratio is flagged."
        )
    if beyond:
        sentences.append(
            "Below four-fifths beyond noise: "
            + ", ".join(f"{i.value} ({i.category}, ratio {i.ratio:.2f})" for i in beyond)
            + "."
        )
    if within:
        sentences.append(
            (
                "Below four-fifths, too few units to say: "
                if smoke
                else "Below four-fifths but within noise (the interval reaches 0.8 after Holm's "
                "adjustment over the ratios): "
            )
            + ", ".join(f"{i.value} ({i.category})" for i in within)
            + "."
        )
    if not sentences:
        sentences.append("No impact ratio is below four-fifths.")
    first = next((s for s in metrics.slots if s.slot == 1), None)
    if first is not None:
        sentences.append(
            f"The candidate shown first was chosen first in {100 * first.rate:.1f}% of "
            f"answers ({100 / len(metrics.slots):.1f}% without a position bias)."
        )
    return Section("Headline", "headline", [Bullets(sentences)])


def _subtasks_section(metrics: ListwiseMetrics) -> Section | None:
    """Each subtask's impact ratios in full, from its own answers and units."""
    if not metrics.subtask_tests:
        return None
    content: list[Any] = [
        Paragraph(
            "Each subtask (job) on its own: its answers alone, its own units behind the "
            "intervals. A regulator's audit reports impact ratios per use; a ratio below 0.8 "
            "whose interval reaches 0.8 is within noise."
        )
    ]
    for test in metrics.subtask_tests:
        rows = [i for i in metrics.impact_by_subtask if i.subtask == test.subtask]
        table = impact_table(rows, metrics.headline_k, n_means=N_MEANS)
        p = test.omnibus_p
        differ = "" if p is None else f"; do the groups differ at k=1? p = {p:.2g}"
        content.append(Paragraph(f"{test.subtask}: {test.answers} answers{differ}"))
        if table is not None:
            content.append(Table.of(dataclasses.replace(table, title=None)))
    return Section("By subtask", "subtasks", content)


def _method_rows(metrics: ListwiseMetrics) -> list[tuple[str, str]]:
    return [
        ("asked", "a full ranking" if metrics.listwise == "full" else "the top choice only"),
        ("pools", f"{metrics.pools} of {metrics.pool_size}, each in {metrics.orders_per_pool} "
                  f"orders ({metrics.orders}), {metrics.samples} answer(s) per order"),
        ("intervals", f"{100 * metrics.confidence:g}%, {resampled_phrase(metrics)} "
                      "(Cameron, Gelbach & Miller 2011)"),
    ]  # fmt: skip


def _impact_section(metrics: ListwiseMetrics) -> Section | None:
    """Impact ratios, the figure of NYC Local Law 144 bias audits, under a heading of their
    own (``biasaudit ll144 RUN`` writes the summary the rule asks for)."""
    fewest = fewest_units(metrics)
    table = listwise_impact_table(metrics, fewest is not None and fewest < FEW_UNITS)
    if table is None:
        return None
    caption = (
        "Each category's selection rate over the most selected category's, at the headline k "
        f"(k={metrics.headline_k}); the four-fifths rule (29 CFR 1607.4(D)) flags a ratio below "
        f"0.8, and {IMPACT_VERDICT}. "
        "n counts a category's appearances in the answers read, as the "
        "selection-rate table does. The summary Local Law 144 asks for: biasaudit ll144 RUN."
    )
    return Section(
        "Impact ratios (four-fifths rule, Local Law 144)", "impact",
        [Paragraph(caption), Table.of(table)],
    )  # fmt: skip


def run_document(run_dir: Path, manifest: Manifest, spec: Mapping[str, Any]) -> Document:
    """The report of the listwise run in ``run_dir``."""
    metrics: ListwiseMetrics = read_run_metrics(run_dir, ListwiseMetrics)
    impact = _impact_section(metrics)
    figures = listwise_blocks(metrics)[4:]
    drawn = impact.blocks[-1] if impact is not None else None
    if isinstance(drawn, Table):  # under a heading of its own, not among the figures
        figures = [
            b for b in figures if not (isinstance(b, PlainTable) and b.title == drawn.caption)
        ]
    document = Document(
        f"{metrics.task} listwise audit of {metrics.model}",
        f"Listwise audit; reference group {metrics.reference_group}; run {manifest.run_id}",
        metrics.simulated,
    )
    document.sections = [
        audited_section(manifest, spec, _method_rows(metrics), _DATA_FIELDS),
        _headline(metrics),
        Section("Rankings, position and consistency", "figures", _drawn(figures)),
        *([] if impact is None else [impact]),
        *([] if (by := _subtasks_section(metrics)) is None else [by]),
        replay_section(manifest, run_dir),
    ]  # fmt: skip
    return document


def study_page(study: ListwiseStudy) -> tuple[str, list[Section], bool]:
    """The study page: its title, its sections, and whether a run is simulated."""
    simulated = all(run.metrics.simulated for run in study.runs)  # some: the runs table says
    runs = runs_table(
        [(r.label, f"{r.metrics.task}, listwise", r.metrics.simulated, r.path) for r in study.runs]
    )
    side = Section("Side by side", "side", _drawn(study_blocks(study)[2:]))
    return f"Listwise study of {len(study.runs)} runs", [runs, side], simulated


def compare_figures(
    comparison: Compared, names: Mapping[str, str], reference: str, simulated: bool
) -> list[Figure]:
    """B - A with its interval: ΔDP per group, a panel per k (percentage points), and
    the share of first choices per slot shown."""
    found = tests_by_key(comparison.tests)
    gap_tests = [t for t in comparison.tests if t.metric.startswith("dp_gap")]
    groups = list(dict.fromkeys(t.group for t in gap_tests if t.group is not None))
    figures = []
    if groups:
        ks = list(dict.fromkeys(t.metric for t in gap_tests))
        panels = [
            Panel(
                f"{metric_name(metric, FIGURE_NAMES)}: B - A",
                "change (points)",
                [Marks(metric, [found.get((g, metric)) for g in groups], scale=100.0)],
            )
            for metric in ks
        ]
        labels = [group_label(g, names) for g in groups]
        figures.append(figure_block(
            "compare_gaps.png", labels, panels, comparison, simulated,
            f"Change of ΔDP against {reference} per group and k, with 95% intervals",
        ))  # fmt: skip
    slots = list(dict.fromkeys(t.group for t in comparison.tests if t.metric == "first choice"))
    if slots:
        panel = Panel(
            "first choices: B - A",
            "change (points)",
            [Marks("first choice", [found.get((s, "first choice")) for s in slots], scale=100.0)],
        )
        figures.append(figure_block(
            "compare_slots.png", [str(s) for s in slots], [panel], comparison, simulated,
            "Change of the share of first choices per slot shown, with 95% intervals",
        ))  # fmt: skip
    return figures
