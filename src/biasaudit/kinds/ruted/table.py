"""Plain-text tables of RUTEd audits and studies, as the command line prints them.

Every metric is shown with its 95% interval over the occupations (under the
paper's conventions, over the replicates only: a point, for probabilities
read from logprobs), with the occupations' spread and the replicates behind
it; a simulated model is labelled as such on the first line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from biasaudit.kinds.ruted.metrics_file import METRICS, ContextMetrics, RutedMetrics
from biasaudit.kinds.ruted.study import RutedStudyResult
from biasaudit.metrics import FEW_UNITS
from biasaudit.render.text import (
    SIMULATED,
    STRONG_MARK,
    Block,
    Cell,
    PlainTable,
    block_lines,
    format_p,
    format_plain,
    format_signed,
    smoke_test_lines,
)

__all__ = [
    "intervals_phrase",
    "ruted_blocks",
    "ruted_study_table",
    "ruted_table",
    "spread_lines",
    "study_blocks",
]

_WIDTH = 27


def _interval(metric: str, point: float | None, bounds: Sequence[float] | None) -> str:
    show = format_plain if metric == "neutrality" else format_signed
    if point is None or bounds is None:
        return show(point)
    return f"{show(point)} [{show(bounds[0])}, {show(bounds[1])}]"


def ruted_blocks(metrics: RutedMetrics) -> list[Block]:
    """What ``biasaudit run ruted`` prints (without ``run:``): what was asked, then
    neutrality, skew and stereotype with intervals per context, the bounds, the
    mode-collapse check and the notes."""
    model = metrics.model + (f" ({SIMULATED})" if metrics.simulated else "")
    requests = metrics.requests
    flags = table_flags(metrics)
    lines: list[Block] = [
        f"ruted audit of {model}",
        f"occupations: {metrics.occupations} ({metrics.male_majority} male-majority) "
        f"from {metrics.occupations_source}",
    ]
    standard = metrics.contexts.get("standard")
    imported = metrics.temperature is None
    if standard is not None and not imported:
        how = _how(standard, metrics.replicates)
        lines.append(f'standard: next word after "The {{occupation}} is", {how}')
    long_form = [c for c in metrics.contexts if c != "standard"]
    if imported:
        lines.append(
            f"{', '.join(metrics.contexts)}: outputs imported with biasaudit score "
            "(no request was sent)"
        )
    elif long_form:
        templates = ", ".join(map(str, metrics.templates))
        lines.append(
            f"{', '.join(long_form)}: {metrics.replicates} texts per occupation and template "
            f"(templates {templates}; temperature {metrics.temperature:g}), "
            "labelled by their he/she pronouns"
        )
    lines += [
        f"requests: {requests.requests} ({requests.sent} sent, {requests.cache_hits} from cache, "
        f"{requests.failures} failed, {requests.refusals} refused); intervals: "
        f"{100 * metrics.confidence:g}% {intervals_phrase(metrics)}"
        + (
            "; conventions: the paper's (ties counted female)"
            if metrics.conventions == "paper"
            else ""
        ),
        *(
            smoke_test_lines(metrics.occupations, "occupations", "at least 8 occupations (40 ship)")
            if metrics.occupations < FEW_UNITS
            else []
        ),
        "",
        PlainTable(
            None,
            ["context", "occ", "gendered", "dropped", *(f"{m} [CI]" for m in METRICS)],
            [_context_row(name, figures, flags) for name, figures in metrics.contexts.items()],
            widths=[9, 4, 9, 8, *(_WIDTH for _ in METRICS)],
            gaps=[0, 1, 1, 1, 2, *(0 for _ in METRICS[1:])],
            right=frozenset({1, 2, 3}),
        ),
    ]
    if any(flags.values()) or metrics.occupations >= FEW_UNITS:
        lines.append(
            f"{STRONG_MARK} beyond noise: skew or stereotype away from 0 after Holm's adjustment "
            f"over the table's {len(flags)} skew and stereotype figures"
        )
    lines += spread_lines(metrics)
    lines += _bounds_rows(metrics)
    lines += similarity_lines(metrics)
    lines += [f"note: {note}" for note in metrics.notes]
    return lines


def intervals_phrase(metrics: RutedMetrics) -> str:
    if metrics.intervals_over == "replicates":
        return (
            "normal over the replicates only (folded normal for neutrality; occupations "
            "fixed, as the paper does: none from logprobs)"
        )
    return "Student t over the occupations (their spread, replicates' noise included)"


def spread_lines(metrics: RutedMetrics) -> list[str]:
    """How far the occupations differ (d = 2p - 1), per context: the spread the intervals
    resample, which a mean alone hides."""
    cells = []
    for name, figures in metrics.contexts.items():
        if figures.d_range is None:
            continue
        sd = "" if figures.d_sd is None else f"SD {figures.d_sd:.2f}, "
        cells.append(
            f"{name} {sd}{format_signed(figures.d_range[0], 2)} to "
            f"{format_signed(figures.d_range[1], 2)}"
        )
    if not cells:
        return []
    return ["occupations' spread (d = male - female share): " + "; ".join(cells)]


def similarity_lines(metrics: RutedMetrics) -> list[str]:
    """The mode-collapse check (RUTEd §4.4), one line per long-form context, where it ran."""
    found = {name: f.similarity for name, f in metrics.contexts.items() if f.similarity}
    if not found:
        return []
    lines = [
        "",
        f"replicate similarity (mode-collapse check, {metrics.mode_collapse}): mean cosine "
        "similarity of one prompt's texts; 1 = every replicate the same text",
    ]
    for name, figures in found.items():
        low, high = figures.within_ci or (math.nan, math.nan)
        interval = f" [{low:.2f}, {high:.2f}]" if figures.within_ci else " (too few)"
        between = "-" if figures.between is None else f"{figures.between:.2f}"
        lines.append(
            f"{name:<9} {figures.occupations:>4}  within occupation {figures.within:.2f}"
            f"{interval}, between occupations {between} ({figures.texts} texts)"
        )
    return lines


def _how(standard: ContextMetrics, replicates: int) -> str:
    if standard.source == "sampled next words":
        return f"from {replicates} sampled first words per occupation (no logprobs: estimated)"
    if standard.source == "continuation logprobs":
        return "from continuation logprobs: every listed word scored whole, as the paper does"
    coverage = (
        ""
        if standard.coverage is None
        else (
            f"; listed words' mass seen: {100 * standard.coverage:.1f}% "
            f"(lowest occupation {100 * (standard.coverage_min or 0):.1f}%)"
        )
    )
    if standard.listed_mass is not None:
        coverage += f"; they carry {100 * standard.listed_mass:.2g}% of the next-word probability"
    return f"from {standard.source} (top {standard.top_logprobs}){coverage}"


def table_flags(metrics: RutedMetrics) -> dict[tuple[str, str], bool]:
    """Each context's skew and stereotype: the verdict ``metrics.json`` stores
    (:func:`~biasaudit.kinds.ruted.metrics_file.figure_verdicts`), by (context, metric)."""
    return {(v.unit, v.figure): v.beyond_noise for v in metrics.verdicts}


def _context_row(
    name: str, figures: ContextMetrics, flags: dict[tuple[str, str], bool]
) -> list[str | Cell]:
    logprobs = figures.source.endswith("logprobs")
    cells = [
        Cell(
            _interval(m, getattr(figures, m), getattr(figures, f"{m}_ci")),
            flags.get((name, m), False),
        )
        for m in METRICS
    ]
    counts = ["-", "-"] if logprobs else [str(figures.gendered), str(figures.dropped)]
    return [name, str(figures.occupations), *counts, *cells]


def ruted_table(metrics: RutedMetrics) -> list[str]:
    """The plain lines of :func:`ruted_blocks`."""
    return block_lines(ruted_blocks(metrics))


def _bounds_rows(metrics: RutedMetrics) -> list[str]:
    lines = []
    for name, figures in metrics.contexts.items():
        if not figures.partly_covered or figures.skew_bounds is None:
            continue
        cells = "".join(
            f"{_interval(m, getattr(figures, m), getattr(figures, f'{m}_bounds')):<{_WIDTH}}"
            for m in METRICS
        )
        lines.append(f"{name + ' bounds':<34}{cells}".rstrip())
    if lines:
        lines.insert(0, "bounds: what the probability unseen among the top-N alternatives allows")
    return lines


def ruted_study_table(result: RutedStudyResult) -> list[str]:
    """The lines ``biasaudit study`` prints for RUTEd runs."""
    return block_lines(study_blocks(result))


def study_blocks(study: RutedStudyResult) -> list[Block]:
    """What was studied, each metric by model and context, and the rank correlations."""
    labels = [run.label + (" (SIMULATED)" if run.metrics.simulated else "") for run in study.runs]
    models = len(study.runs)
    if models < 3:
        caveat = "; rank correlations need 3 or more models"
    elif models <= 8:
        caveat = "; p-values exact over every ordering of the models"
    else:
        caveat = ""
    blocks: list[Block] = [
        f"RUTEd study of {models} runs: {', '.join(labels)}",
        f"contexts: {', '.join(study.contexts)}{caveat}",
    ]
    width = max(12, *(len(str(label)) + 2 for label in study.values.index))
    for metric in METRICS:
        show = format_plain if metric == "neutrality" else format_signed
        rows = [
            [str(label), *(show(row[(metric, c)]) for c in study.contexts)]
            for label, row in study.values.iterrows()
        ]
        header = ["model", *study.contexts]
        widths = [width, *([12] * len(study.contexts))]
        blocks += ["", PlainTable(f"{metric} by model and context", header, rows, widths)]
    others = [c for c in study.contexts if c != "standard"]
    if "standard" in study.contexts and others:
        title = (
            "Spearman rank correlation with the standard test (Lum et al., Table 1); "
            f"rho (two-sided p), n = {models} models"
        )
        blocks += ["", _correlation_table(title, others, study.with_standard)]
    if len(others) > 1:
        pairs = study.between_contexts[study.between_contexts["metric"] == METRICS[0]]
        names = [f"{a}~{b}" for a, b in zip(pairs["first"], pairs["second"], strict=True)]
        title = (
            "Spearman rank correlation between contexts (Lum et al., Table 2); rho (two-sided p)"
        )
        blocks += ["", _correlation_table(title, names, study.between_contexts)]
    if "standard" in study.contexts and others:
        blocks += ["", _selection_table(study, others, models)]
    return blocks


def _correlation_table(title: str, names: list[str], frame: pd.DataFrame) -> PlainTable:
    """rho (two-sided p) of each metric in each column, as ``frame`` lists them, and a last
    row of their mean over the three metrics (the paper's Table 2 averages them)."""
    rows = []
    for metric in METRICS:
        found = frame[frame["metric"] == metric]
        cells = [
            "-" if math.isnan(r) else f"{format_signed(r, 2)} ({format_p(p)})"
            for r, p in zip(found["rho"], found["p_value"], strict=True)
        ]
        rows.append([metric, *cells])
    means = metric_means(frame)
    rows.append(["mean of 3", *("-" if math.isnan(r) else format_signed(r, 2) for r in means)])
    return PlainTable(title, ["metric", *names], rows, [12, *([18] * len(names))])


def metric_means(frame: pd.DataFrame) -> list[float]:
    """Per column (context, or context pair), the mean rho over the three metrics, as Lum et
    al. average them in their Table 2; NaN where no metric has a rho."""
    by_metric = [frame[frame["metric"] == m]["rho"].to_numpy(float) for m in METRICS]
    stacked = pd.DataFrame(by_metric)
    return [float(v) for v in stacked.mean(axis=0, skipna=True)]


def _selection_table(result: RutedStudyResult, others: list[str], models: int) -> PlainTable:
    table = result.least_biased
    grid: list[list[str]] = []
    agreed = total = 0
    for metric in METRICS:
        rows = table[table["metric"] == metric].set_index("context")
        cells = [metric, rows.loc["standard", "models"] or "-"]
        for context in others:
            agrees = rows.loc[context, "agrees"]
            total += 1
            agreed += bool(agrees)
            mark = "same" if agrees else "differs"
            cells.append(f"{rows.loc[context, 'models'] or '-'} ({mark})")
        grid.append(cells)
    heading = ["metric", "standard", *others]
    widths = [max(len(row[i]) for row in [heading, *grid]) + 2 for i in range(len(heading))]
    title = (
        "least biased model (lowest neutrality, |skew|, |stereotype|): the standard test's "
        "pick, and whether each context agrees"
    )
    summary = (
        f"the standard test's pick is the least biased in {agreed} of {total} "
        f"(metric, context) pairs; chance alone: 1 in {models}"
    )
    return PlainTable(title, heading, grid, widths, labels=len(heading), notes=[summary])


# --- the rich view of the same table, for a terminal ---------------------------------


def run_table(metrics: RutedMetrics, run_dir: Path) -> list[Block]:
    """What ``biasaudit run`` prints (:func:`ruted_blocks`)."""
    return ruted_blocks(metrics)


def headline(metrics: RutedMetrics) -> str:
    """One line of the figures that matter most, for ``biasaudit history``."""
    return "neutrality " + ", ".join(
        f"{name} {format_plain(figures.neutrality)}" for name, figures in metrics.contexts.items()
    )
