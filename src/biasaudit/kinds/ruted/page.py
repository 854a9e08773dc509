"""The report of a RUTEd run (Lum et al., "Beyond Trick Tests and Towards RUTEd Evaluation").

Sections: what was audited, a headline per context, panels of neutrality,
skew and stereotype per context with their intervals, the per-context and
per-occupation tables, dropped replicates and notes, and the replay commands.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from biasaudit.kinds.common import read_run_metrics
from biasaudit.kinds.ruted.metrics_file import (
    METRICS,
    OCCUPATIONS_COLUMNS,
    ContextMetrics,
    RutedMetrics,
)
from biasaudit.kinds.ruted.study import RutedStudyResult
from biasaudit.kinds.ruted.table import intervals_phrase, spread_lines, table_flags
from biasaudit.render.common import (
    audited_section,
    interval,
    p_value,
    plain,
    replay_section,
    runs_table,
    signed,
)
from biasaudit.render.document import Bullets, Document, Figure, Paragraph, Section, Table
from biasaudit.render.figures import DotPanel, Series, dot_panels
from biasaudit.render.panels import Compared, Marks, Panel, figure_block, tests_by_key
from biasaudit.render.text import STRONG_MARK, Cell
from biasaudit.store.runs import Manifest
from biasaudit.store.tables import read_run_table

__all__ = ["CONTEXT_NAMES", "METRIC_AXES", "run_document"]

CONTEXT_NAMES = {
    "standard": 'standard test ("The {occupation} is")',
    "bedtime": "bedtime stories",
    "personas": "user personas",
    "esl": "ESL exercises",
}
METRIC_AXES = {
    "neutrality": "0 balanced ... 1 always one gender",
    "skew": "< leans female | leans male >",
    "stereotype": "< against | follows the majority gender >",
}


def _show(metric: str, value: float | None, bounds: list[float] | None) -> str:
    return interval(value, bounds, 3, sign=metric != "neutrality")


def _headline(metrics: RutedMetrics) -> Section:
    level = f"{100 * metrics.confidence:g}% CI"
    blocks: list[Any] = [
        Paragraph(
            "Neutrality is the mean over occupations of |2p - 1|, p the share of male references; "
            "skew its signed mean (positive: leans male); stereotype the mean signed towards each "
            "occupation's majority gender (positive: follows the stereotype)."
        )
    ]
    for context, figures in metrics.contexts.items():
        if figures.stereotype is None:
            blocks.append(Paragraph(f"{CONTEXT_NAMES.get(context, context)}: no figures.", True))
            continue
        lean = "male" if (figures.skew or 0) > 0 else "female"
        follows = "follows" if figures.stereotype > 0 else "runs against"
        stereotype = _show("stereotype", figures.stereotype, figures.stereotype_ci)
        blocks.append(
            Paragraph(
                f"In the {CONTEXT_NAMES.get(context, context)}, the model {follows} the "
                f"occupations' majority gender (stereotype {stereotype}, {level}) and leans "
                f"{lean} overall (skew "
                f"{_show('skew', figures.skew, figures.skew_ci)}); neutrality "
                f"{_show('neutrality', figures.neutrality, figures.neutrality_ci)}, over "
                f"{figures.occupations} occupations.",
                strong=True,
            )
        )
    return Section("Headline", "headline", blocks)


def metric_panels(rows: Mapping[str, Mapping[str, ContextMetrics]]) -> list[DotPanel]:
    """One panel per metric; ``rows`` maps a series name (model) to its contexts."""
    panels = []
    for metric in METRICS:
        series = []
        for name, contexts in rows.items():
            figures = list(contexts.values())
            bounds = [getattr(f, f"{metric}_ci") for f in figures]
            series.append(
                Series(
                    name,
                    [getattr(f, metric) for f in figures],
                    [b and b[0] for b in bounds],
                    [b and b[1] for b in bounds],
                )
            )
        panels.append(
            DotPanel(
                metric,
                series,
                xlabel=METRIC_AXES[metric],
                reference=None if metric == "neutrality" else 0.0,
            )
        )
    return panels


def _panels_section(metrics: RutedMetrics) -> Section:
    contexts = list(metrics.contexts)
    figure = Figure(
        "metrics.png",
        dot_panels(
            contexts, metric_panels({metrics.model: metrics.contexts}), simulated=metrics.simulated
        ),
        "Neutrality, skew and stereotype per context, with intervals",
        f"Dots: estimates; bars: {100 * metrics.confidence:g}% intervals, "
        f"{intervals_phrase(metrics)}.",
    )
    rows = []
    flags = table_flags(metrics)
    for context, figures in metrics.contexts.items():
        logprobs = figures.source.endswith("logprobs")
        rows.append(
            [
                context,
                figures.source,
                str(figures.occupations),
                "-" if logprobs else str(figures.gendered),
                "-" if logprobs else str(figures.dropped),
                *(
                    str(Cell(_show(m, getattr(figures, m), getattr(figures, f"{m}_ci")),
                             flags.get((context, m), False)))
                    for m in METRICS
                ),
            ]
        )  # fmt: skip
    table = Table(
        [
            "context",
            "source",
            "occupations",
            "gendered",
            "dropped",
            *(f"{m} [CI]" for m in METRICS),
        ],
        rows,
        left=frozenset({0, 1}),
        caption=f"{100 * metrics.confidence:g}% intervals; gendered / dropped: replicates; "
        f"{STRONG_MARK} beyond noise: skew or stereotype away from 0 after Holm's adjustment "
        f"over the table's {sum(v.p_adjusted is not None for v in metrics.verdicts)} skew and "
        "stereotype figures. " + " ".join(spread_lines(metrics)),
    )
    blocks: list[Any] = [figure, table]
    bounded = [(c, f) for c, f in metrics.contexts.items() if f.partly_covered and f.skew_bounds]
    if bounded:
        blocks.append(
            Table(
                ["context", *(f"{m} bounds" for m in METRICS)],
                [
                    [c, *(_show(m, getattr(f, m), getattr(f, f"{m}_bounds")) for m in METRICS)]
                    for c, f in bounded
                ],
                caption="What the probability unseen among the top-N alternatives allows.",
            )
        )
    return Section("Metrics per context", "metrics", blocks)


def _occupations_section(metrics: RutedMetrics, rows: pd.DataFrame | None) -> Section:
    if rows is None or rows.empty:
        return Section("Per occupation", "occupations", [Paragraph("occupations.csv is missing.")])
    contexts = list(metrics.contexts)
    majority = rows.drop_duplicates("occupation").set_index("occupation")["majority"]
    table = []
    for occupation in majority.index:
        cells = [str(occupation), str(majority[occupation])]
        for context in contexts:
            found = rows[(rows["context"] == context) & (rows["occupation"] == occupation)]
            cells.append(_share(found.iloc[0]) if len(found) else "-")
        table.append(cells)
    return Section(
        "Per occupation",
        "occupations",
        [
            Table(
                ["occupation", "majority", *contexts],
                table,
                left=frozenset({0, 1}),
                caption="Share of male references p (n: gendered replicates; from logprobs: the "
                "normalised next-word probability).",
            )
        ],
    )


def _share(row: pd.Series) -> str:
    p = row.get("p_male")
    if p is None or pd.isna(p):
        return "-"
    n = row.get("n")
    return f"{100 * float(p):.0f}%" + ("" if n is None or pd.isna(n) else f" (n={int(n)})")


def _dropped_section(metrics: RutedMetrics) -> Section:
    rows = []
    for context, figures in metrics.contexts.items():
        reasons = ", ".join(f"{k}: {v}" for k, v in figures.dropped_reasons.items()) or "-"
        rows.append(
            [
                context,
                str(figures.replicates),
                str(figures.gendered),
                str(figures.dropped),
                reasons,
                str(figures.failed),
                ", ".join(figures.excluded) or "-",
            ]
        )
    blocks: list[Any] = [
        Table(
            [
                "context",
                "replicates asked",
                "gendered",
                "dropped",
                "why dropped",
                "failed",
                "occupations excluded",
            ],
            rows,
            left=frozenset({0, 4, 6}),
            caption="Replicates with no gendered pronoun, or as many of each, are dropped.",
        )
    ]
    if metrics.notes:
        blocks.append(Bullets(list(metrics.notes)))
    return Section("Dropped replicates and notes", "dropped", blocks)


def _method_rows(metrics: RutedMetrics) -> list[tuple[str, str]]:
    sources = "; ".join(f"{c}: {f.source}" for c, f in metrics.contexts.items())
    templates = ", ".join(map(str, metrics.templates)) or "-"
    return [
        ("probe", f"next word and long-form generation; {sources}"),
        (
            "occupations",
            f"{metrics.occupations} ({metrics.male_majority} male-majority) from "
            f"{metrics.occupations_source}",
        ),
        (
            "sample sizes",
            "outputs imported with biasaudit score"
            if metrics.temperature is None
            else f"{metrics.replicates} replicates per occupation and template "
            f"(templates {templates}); temperature {metrics.temperature:g}",
        ),
        ("intervals", f"{100 * metrics.confidence:g}% {intervals_phrase(metrics)}"),
        ("mode-collapse check", metrics.mode_collapse or "-"),
    ]


def _similarity_section(metrics: RutedMetrics) -> Section | None:
    """The mode-collapse check (RUTEd §4.4), where it ran."""
    found = {c: f.similarity for c, f in metrics.contexts.items() if f.similarity}
    if not found:
        return None
    rows = [
        [
            CONTEXT_NAMES.get(context, context),
            str(figures.occupations),
            str(figures.texts),
            interval(figures.within, figures.within_ci, 2, sign=False),
            "-" if figures.between is None else f"{figures.between:.2f}",
        ]
        for context, figures in found.items()
    ]
    table = Table(
        ["context", "occupations", "texts", "within an occupation [CI]", "between occupations"],
        rows,
        left=frozenset({0}),
        caption=f"Mean cosine similarity of one prompt's replicate texts ({metrics.mode_collapse}"
        "); 1 = every replicate the same text. Far above the between-occupation value, the "
        "texts are near copies, and the long-form metrics rest on fewer independent texts "
        "than their n says. Per occupation: similarity.csv.",
    )
    return Section("Replicate similarity (mode collapse)", "similarity", [table])


def run_document(run_dir: Path, manifest: Manifest, spec: Mapping[str, Any]) -> Document:
    """The report of the RUTEd run in ``run_dir``."""
    metrics: RutedMetrics = read_run_metrics(run_dir, RutedMetrics)
    path = run_dir / "occupations.csv"
    rows = read_run_table(path, OCCUPATIONS_COLUMNS) if path.exists() else None
    document = Document(
        f"RUTEd audit of {metrics.model}",
        f"Gender-occupation bias in a trick test and in long-form text; run {manifest.run_id}",
        metrics.simulated,
    )
    document.sections = [
        audited_section(
            manifest,
            spec,
            _method_rows(metrics),
            ("replicates", "occupations", "contexts", "templates", "next_word"),
        ),
        _headline(metrics),
        _panels_section(metrics),
        _occupations_section(metrics, rows),
        _dropped_section(metrics),
        replay_section(manifest, run_dir),
    ]
    similarity = _similarity_section(metrics)
    if similarity is not None:
        document.sections.insert(4, similarity)
    return document


# --- the study page of runs of this kind ---------------------------------------


def study_page(study: RutedStudyResult) -> tuple[str, list[Section], bool]:
    """The study page: its title, its sections, and whether a run is simulated."""
    simulated = all(run.metrics.simulated for run in study.runs)  # some: the runs table says
    return f"RUTEd study of {len(study.runs)} runs", _study_sections(study, simulated), simulated


def _study_sections(study: RutedStudyResult, simulated: bool) -> list[Section]:
    runs = runs_table([(r.label, "RUTEd", r.metrics.simulated, r.path) for r in study.runs])
    rows = {r.label: {c: r.metrics.contexts[c] for c in study.contexts} for r in study.runs}
    figure = Figure(
        "metrics.png",
        dot_panels(study.contexts, metric_panels(rows), simulated=simulated),
        "Neutrality, skew and stereotype per context and model, with intervals",
        "One marker per model; bars: 95% intervals (over occupations; under the paper's "
        "conventions over replicates only, none for logprob-read standard tests).",
    )
    values = Table(
        ["model", *(f"{m} {c}" for m in METRICS for c in study.contexts)],
        [
            [str(label), *(plain(row[(m, c)]) for m in METRICS for c in study.contexts)]
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
    for metric in METRICS:
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


# --- the compare page: this kind's figures of B - A ----------------------------------


def compare_figures(
    comparison: Compared, names: Mapping[str, str], reference: str, simulated: bool
) -> list[Figure]:
    """One row per context, a panel per metric: B - A with its interval."""
    found = tests_by_key(comparison.tests)
    contexts = list(dict.fromkeys(t.group for t in comparison.tests if t.group is not None))
    metrics = list(dict.fromkeys(t.metric for t in comparison.tests))
    panels = [
        Panel(
            f"{metric}: B - A",
            "change",
            [Marks(metric, [found.get((c, metric)) for c in contexts])],
        )
        for metric in metrics
    ]
    return [figure_block(
        "compare_scores.png", [str(c) for c in contexts], panels, comparison, simulated,
        "Change of neutrality, skew and stereotype per context, with 95% intervals",
    )]  # fmt: skip
