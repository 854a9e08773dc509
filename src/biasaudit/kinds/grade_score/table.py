"""Plain-text tables of Grade Score audits and studies, as the command line prints them.

Every mean is shown with its interval and the number of items behind it; a
simulated model is labelled as such on the first line (Iourovitski, "Grade
Score: Quantifying LLM Performance in Option Selection", 2024).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from biasaudit.kinds.grade_score.metrics_file import ITEMS_COLUMNS, GradeScoreMetrics, slot_flags
from biasaudit.kinds.grade_score.run import judge_settings
from biasaudit.kinds.grade_score.study import SCORES, GradeStudyResult
from biasaudit.metrics import FEW_UNITS
from biasaudit.render.text import (
    SIMULATED,
    STRONG_MARK,
    Block,
    PlainTable,
    block_lines,
    format_p,
    smoke_test_lines,
)
from biasaudit.store.tables import read_run_table

__all__ = [
    "grade_score_blocks",
    "grade_score_table",
    "grade_study_table",
    "study_blocks",
    "unusable_warning",
]

_PAPER = "; conventions: the papers' (every item, none usable = 0)"
# Beyond this many items, the run's table shows the lowest Grade Scores only.
MAX_ITEM_ROWS = 20
_LOWEST_SHOWN = 10
_SCORE_NAMES = {
    "grade_score": "Grade Score",
    "entropy": "entropy",
    "choice": "choice",
}
_SCORE_TITLES = {
    "grade_score": "Grade Score: harmonic mean of the entropy and choice scores",
    "entropy": "entropy score: 1 = no favourite slot, 0 = always the same slot",
    "choice": "choice score: share of answers naming the item's most chosen option",
}


def _number(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def _bounds(bounds: Sequence[float] | None, digits: int = 3) -> str:
    if not bounds:
        return "-"
    return f"[{_number(bounds[0], digits)}, {_number(bounds[1], digits)}]"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def grade_score_blocks(metrics: GradeScoreMetrics, items: pd.DataFrame) -> list[Block]:
    """What ``biasaudit run grade-score`` prints (without ``run:``): the header, the
    mean scores with their intervals, the slots chosen, and the items (the lowest
    Grade Scores when there are many). ``items`` is the run's ``items.csv``."""
    header: list[Block] = list(_header(metrics))
    warning = unusable_warning(metrics)
    if warning is not None:
        header.insert(1, f"WARNING: {warning}")
    if 0 < metrics.items < FEW_UNITS:  # none: the warning above says why
        header += smoke_test_lines(metrics.items, "items", "at least 8 items (the demo has 16)")
    means = PlainTable(
        None,
        [
            "score",
            "mean",
            f"{100 * metrics.confidence:g}% interval (Student t over items; '-': too few)",
        ],
        [
            [
                _SCORE_NAMES[score],
                _number(getattr(metrics, score)),
                _bounds(getattr(metrics, f"{score}_ci")),
            ]
            for score in SCORES
        ],
        widths=[12, 6, 0],
        gaps=[0, 1, 2],
        right=frozenset({1}),
    )
    return [
        *header,
        "",
        means,
        "",
        _slots_line(metrics),
        *_agreement_lines(metrics),
        "",
        _items_table(metrics, items),
        *(f"note: {note}" for note in metrics.notes),
    ]


def grade_score_table(metrics: GradeScoreMetrics, items: pd.DataFrame) -> list[str]:
    """The plain lines of :func:`grade_score_blocks`."""
    return block_lines(grade_score_blocks(metrics, items))


def _header(metrics: GradeScoreMetrics) -> list[str]:
    model = metrics.model + (f" ({SIMULATED})" if metrics.simulated else "")
    options = f"{metrics.n_options} options"
    if metrics.random_option:
        options = f"{metrics.n_options - 1} options + 1 unrelated option from another item"
    orders = {"cyclic": "cyclic orders", "all": "orders (all)"}.get(
        metrics.permutations, "orders, as given"
    )
    replicates = f"{metrics.replicates} replicate{'s' if metrics.replicates != 1 else ''}"
    requests = metrics.requests
    return [
        f"grade-score audit of {model}",
        f"judge: {judge_settings(metrics)}",
        f"items: {metrics.items_source}: {metrics.items_total} items x {options}; "
        f"{metrics.orders} {orders} x {replicates} = {metrics.trials} requests",
        f"requests: {requests.requests} ({requests.sent} sent, {requests.cache_hits} from cache, "
        f"{requests.failures} failed, {requests.refusals} refused); answers: {metrics.usable} "
        f"usable, {metrics.unparsed} unparsed"
        f"{f' ({metrics.refused} refused)' if metrics.refused else ''}; "
        f"items scored: {metrics.items}"
        f"{f' ({metrics.partial} partial, left out)' if metrics.partial else ''}"
        f"{_PAPER if metrics.conventions == 'paper' else ''}",
    ]


def _slots_line(metrics: GradeScoreMetrics) -> str:
    bounds: Sequence[Sequence[float] | None] = metrics.position_ci or [None] * len(
        metrics.position_histogram
    )
    flags = slot_flags(metrics)
    cells = "   ".join(
        f"{slot}: {_share(share)}{_share_bounds(bound)}"
        f"{f' {STRONG_MARK}' if flags.get(slot - 1) else ''}"
        for slot, (share, bound) in enumerate(
            zip(metrics.position_histogram, bounds, strict=True), 1
        )
    )
    line = f"slot chosen   {cells}   (no bias: {_share(1 / metrics.n_options)} each"
    if metrics.slot_p is None:
        return line + ")"
    return (
        f"{line}; is a slot preferred? p = {format_p(metrics.slot_p)}, exact binomial per slot, "
        f"intervals simultaneous over the {metrics.n_options} slots; n = {metrics.usable} answers"
        f"{f'; {STRONG_MARK} beyond noise' if any(flags.values()) else ''})"
    )


def _share_bounds(bounds: Sequence[float] | None) -> str:
    return "" if not bounds else f" [{_share(bounds[0])}, {_share(bounds[1])}]"


# A headline that rests on fewer of the answers than this says so first.
_USABLE_WARNING = 0.8


def unusable_warning(metrics: GradeScoreMetrics) -> str | None:
    """The line that leads a run's headline when many answers named no option."""
    answered = metrics.trials - metrics.failed
    if answered <= 0 or metrics.usable >= _USABLE_WARNING * answered:
        return None
    share = 1 - metrics.usable / answered
    return (
        f"{_share(share)} of the answers named no option (unparsed or refused): the scores "
        f"below rest on the {metrics.usable} that did, over {metrics.items} complete item(s) "
        f"of {metrics.items_total}; read them as a judge that mostly did not judge"
    )


def _agreement_lines(metrics: GradeScoreMetrics) -> list[str]:
    lines = []
    agreement = metrics.agreement
    if agreement is not None:
        bounds = agreement.rate_ci
        interval = f" [{_share(bounds[0])}, {_share(bounds[1])}]" if bounds else ""
        lines.append(
            f"preferred option (people's choice) chosen in {_share(agreement.rate)}{interval} "
            f"of answers, and most chosen in {_share(agreement.most_chosen)} of "
            f"{agreement.items} items"
        )
    if metrics.random_option_share is not None:
        lines.append(f"unrelated option chosen in {_share(metrics.random_option_share)} of answers")
    return lines


def is_left_out(metrics: GradeScoreMetrics, usable: int, trials: int) -> bool:
    """Whether an item is partial (some requests gave no usable answer), hence left out
    of the means: its own scores rest on fewer answers than orders, so they are not shown
    (one answer scores an entropy of 0 by construction). The paper's conventions keep it."""
    return metrics.conventions != "paper" and 0 < usable < trials


def _items_table(metrics: GradeScoreMetrics, items: pd.DataFrame) -> PlainTable:
    shown, title = (
        items,
        "per item (slots: answers naming slot 1..n, slot 1 shown first; options by index)",
    )
    if len(items) > MAX_ITEM_ROWS:
        shown = items.sort_values("grade", na_position="first").head(_LOWEST_SHOWN)
        title = (
            f"the {_LOWEST_SHOWN} items of lowest Grade Score of {len(items)} (all in items.csv)"
        )
    width = max(12, min(28, int(items["item_id"].astype(str).str.len().max())))
    rows = []
    for row in shown.itertuples(index=False):
        slots = " ".join(str(getattr(row, f"pos_{s}")) for s in range(1, metrics.n_options + 1))
        left_out = is_left_out(metrics, row.usable, row.trials)
        rows.append(
            [
                str(row.item_id)[:width],
                *(
                    ["partial"] * 3
                    if left_out
                    else [_number(row.grade), _number(row.entropy), _number(row.choice)]
                ),
                str(row.unparsed),
                slots,
                "-" if pd.isna(row.most_chosen) else str(row.most_chosen),
                "-" if pd.isna(row.preferred) else str(row.preferred),
            ]
        )
    return PlainTable(
        title,
        ["item", "grade", "entropy", "choice", "unparsed", "slots", "most chosen", "preferred"],
        rows,
        widths=[width, 7, 7, 7, 8, 2 * metrics.n_options + 2, 12, 0],
        gaps=[0, 1, 1, 1, 1, 2, 1, 1],
        right=frozenset({1, 2, 3, 4}),
    )


def grade_study_table(result: GradeStudyResult) -> list[str]:
    """The lines ``biasaudit study`` prints for Grade Score runs."""
    return block_lines(study_blocks(result))


def study_blocks(study: GradeStudyResult) -> list[Block]:
    """What was studied, then a table of each score by model and setting."""
    runs = study.runs
    labels = ", ".join(
        dict.fromkeys(run.label + (" (SIMULATED)" if run.metrics.simulated else "") for run in runs)
    )
    blocks: list[Block] = [f"Grade Score study of {len(runs)} runs: {labels}"]
    blocks += _settings_lines(study)
    header = ["model", *(_setting_name(prompt, random) for prompt, random in study.settings)]
    models = list(dict.fromkeys(study.table["model"]))
    tables: list[tuple[str, list[list[str]]]] = []
    for score in SCORES:
        title = f"{_SCORE_TITLES[score]}; mean ± half the {_level(study)} interval"
        rows = [
            [model, *(_cell(study.table, model, setting, score) for setting in study.settings)]
            for model in models
        ]
        tables.append((title, rows))
    for column, title in _SHARES.items():
        if study.table[column].isna().all():
            continue
        rows = [
            [model, *(_share_cell(study.table, model, setting, column)
                      for setting in study.settings)]
            for model in models
        ]  # fmt: skip
        tables.append((title, rows))
    # One width per column over every table, so the tables line up under each other.
    widths = [
        max(len(header[i]), *(len(row[i]) for _, rows in tables for row in rows)) + 2
        for i in range(len(header))
    ]
    for title, rows in tables:
        blocks += ["", PlainTable(title, header, rows, widths)]
    return blocks


_SHARES = {
    "agreement": "agreement with people's preferred option: mean over items of the share of "
    "answers choosing it ± half its interval (items that name one)",
    "unparsed_share": "answers naming no option, of all asked (refusals included)",
    "random_share": "the unrelated (random) option chosen, of usable answers",
}


def _run_row(
    table: pd.DataFrame, model: str, setting: tuple[str, bool], column: str
) -> pd.Series | None:
    """The study row of ``model`` in ``setting``, where it has a value in ``column``."""
    prompt, random = setting
    rows = table[
        (table["model"] == model) & (table["prompt"] == prompt) & (table["random_option"] == random)
    ]
    if rows.empty or rows.iloc[0][column] is None or pd.isna(rows.iloc[0][column]):
        return None
    found: pd.Series = rows.iloc[0]
    return found


def _share_cell(table: pd.DataFrame, model: str, setting: tuple[str, bool], column: str) -> str:
    row = _run_row(table, model, setting, column)
    if row is None:
        return "-"
    if column == "agreement":
        bounds = row["agreement_ci"]
        if isinstance(bounds, list):
            return f"{row[column]:.3f} ±{(bounds[1] - bounds[0]) / 2:.3f}"
        return f"{row[column]:.3f} (n={row['agreement_items']})"
    total = row["trials"] if column == "unparsed_share" else row["usable"]
    return f"{100 * row[column]:.1f}% of {total}"


def _level(result: GradeStudyResult) -> str:
    levels = {run.metrics.confidence for run in result.runs}
    return "/".join(f"{100 * level:g}%" for level in sorted(levels))


def _settings_lines(result: GradeStudyResult) -> list[str]:
    lines = []
    for name, values in _described(result).items():
        lines.append(f"{name}: {'; '.join(values)}")
    return lines


def _described(result: GradeStudyResult) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {"items": [], "asked": []}
    for run in result.runs:
        m = run.metrics
        items = f"{m.items_source} ({m.items_total} items)"
        temperature = "imported" if m.temperature is None else f"{m.temperature:g}"
        asked = f"{m.permutations} orders x {m.replicates} replicate(s), temperature {temperature}"
        for key, value in (("items", items), ("asked", asked)):
            if value not in found[key]:
                found[key].append(value)
    return found


def _setting_name(prompt: str, random: bool) -> str:
    return f"prompt {prompt}" + (" +random" if random else "")


def _cell(table: pd.DataFrame, model: str, setting: tuple[str, bool], score: str) -> str:
    row = _run_row(table, model, setting, score)
    if row is None:
        return "-"
    bounds = row[f"{score}_ci"]
    if bounds is None or (isinstance(bounds, float) and math.isnan(bounds)):
        return f"{row[score]:.3f} (too few: n={row['items']})"
    half = (bounds[1] - bounds[0]) / 2
    return f"{row[score]:.3f} ±{half:.3f}"


def run_table(metrics: GradeScoreMetrics, run_dir: Path) -> list[Block]:
    """What ``biasaudit run`` prints (it reads the run's ``items.csv``)."""
    return grade_score_blocks(metrics, read_run_table(run_dir / "items.csv", ITEMS_COLUMNS))


def headline(metrics: GradeScoreMetrics) -> str:
    """One line of the figures that matter most, for ``biasaudit history``."""
    return f"Grade Score {_number(metrics.grade_score)}, entropy {_number(metrics.entropy)}"
