"""The tables of the command line drawn with rich, for a terminal.

On a terminal, every command that prints a table prints it with these: the
audit tables of ``run``, ``replay`` and ``reaudit``, ``compare``, the three
kinds of ``study``, ``history``, ``tasks``, ``providers`` and ``cache stats``.
Anywhere else (a pipe, a file, a test) they print the plain lines of
:mod:`biasaudit.kinds.allocation.report` and its siblings, byte for byte as before, so scripts
that read them keep working. Both show the same cells with the same rounding:
in an audit or a comparison, a figure whose interval excludes 0 (or whose p is
below 0.05) is in bold here, which is all the rich tables add. Every cell is
plain text (never rich markup, so a ``[fp_1]`` stays as it is) and folds
rather than being cut short on a narrow terminal; rich leaves out colour
under ``NO_COLOR``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import pandas as pd
from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from biasaudit.kinds.allocation.metrics import AllocationMetrics
    from biasaudit.kinds.common import TaskInfo
    from biasaudit.kinds.grade_score.run import GradeScoreMetrics
    from biasaudit.kinds.ruted.metrics import RutedMetrics
    from biasaudit.reports.compare import ChangeTest, Comparison
    from biasaudit.reports.history import HistoryEntry
    from biasaudit.reports.text import Block

__all__ = [
    "allocation_view",
    "audit_view",
    "blocks_view",
    "comparison_view",
    "echo_blocks",
    "echo_table",
    "grade_score_view",
    "history_view",
    "listing_view",
    "ruted_view",
    "stdout_is_terminal",
    "tasks_view",
]

_SIGNIFICANT = 0.05


def stdout_is_terminal() -> bool:
    return sys.stdout is not None and sys.stdout.isatty()


def echo_table(lines: Sequence[str], view: Callable[[], RenderableType] | None) -> None:
    """Print ``view()`` with rich when stdout is a terminal, else ``lines`` exactly as before.

    The view is built only for a terminal; None always prints the lines.
    """
    if view is None or not stdout_is_terminal():
        for line in lines:
            click.echo(line)
        return
    Console(file=sys.stdout).print(view())


def echo_blocks(blocks: Sequence[Block]) -> None:
    """Print a study's lines and tables: :func:`blocks_view` on a terminal, else the plain lines."""
    from biasaudit.reports.text import block_lines

    echo_table(block_lines(blocks), lambda: blocks_view(blocks))


def _table(*headers: str, left: int = 1) -> Table:
    """A table whose first ``left`` columns are aligned left and the rest right.

    It starts in the first column, as the lines around it do; its title is one of
    those lines, since rich would wrap a title to the table's width. Cells fold onto
    more lines instead of being cut short when the terminal is too narrow.
    """
    table = Table(
        box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True, pad_edge=False, show_edge=False
    )
    for index, header in enumerate(headers):
        table.add_column(Text(header), justify="left" if index < left else "right", overflow="fold")
    return table


def _add_row(table: Table, cells: Iterable[str | Text], *, style: str = "") -> None:
    """Add a row of plain text: a ``str`` cell is never read as rich markup or highlighted."""
    table.add_row(*(Text(c) if isinstance(c, str) else c for c in cells), style=style or None)


def _excludes_zero(bounds: Sequence[float] | None) -> bool:
    return bounds is not None and len(bounds) == 2 and (bounds[0] > 0 or bounds[1] < 0)


def _cell(text: str, strong: bool) -> Text:
    return Text(text, style="bold" if strong else "")


def _lines(lines: Sequence[str], *, first_bold: bool = False) -> list[Text]:
    return [
        Text(line, style="bold" if first_bold and i == 0 else "") for i, line in enumerate(lines)
    ]


def allocation_view(metrics: AllocationMetrics) -> RenderableType:
    """RABBI, δ, JSD and EMD per group; ΔDP and ΔEO per group and k; pairwise statistics."""
    from biasaudit.kinds.allocation.report import (
        _display_name,
        _gap,
        _gap_ci,
        _header,
        _pairwise_line,
        _pools,
        _rate_lines,
        too_few_units,
    )
    from biasaudit.reports.text import _interval, _p_value, _plain, _signed

    delta = "δ pref" if metrics.method == "pairwise" else "δ mean"
    scores = _table("group", "", "n", "RABBI [CI]", "p", delta, "JSD", "EMD", "irreg", left=2)
    for group, figures in metrics.groups.items():
        strong = figures.rabbi_p is not None and figures.rabbi_p < _SIGNIFICANT
        cells: list[str | Text] = [
            group,
            _display_name(metrics, group),
            str(figures.n),
            _cell(
                _interval(figures.rabbi, figures.rabbi_ci, too_few=too_few_units(figures)), strong
            ),
            _cell(_p_value(figures.rabbi_p), strong),
            _signed(figures.avg_gap),
            _plain(figures.jsd),
            _plain(figures.emd),
            str(figures.irregular),
        ]
        _add_row(scores, cells)
    parts: list[RenderableType] = [*_lines(_header(metrics), first_bold=True), Text(), scores]
    parts += _lines(_rate_lines(metrics))
    selection = metrics.selection
    if selection is not None:
        reference = metrics.reference_group
        gaps = [("dp_gap", f"ΔDP: selection rate minus {reference}'s", selection.appearances)]
        if any(g.eo_gap for g in metrics.groups.values()):
            title = f"ΔEO: selection rate of qualified candidates minus {reference}'s"
            gaps.append(("eo_gap", title, selection.qualified_appearances or {}))
        ks = range(1, metrics.k_max + 1)
        for kind, title, appearances in gaps:
            table = _table("group", "n", *(f"k={k} [CI]" for k in ks))
            for group, figures in metrics.groups.items():
                intervals = [
                    _cell(
                        _interval(
                            _gap(figures, kind, k),
                            _gap_ci(figures, kind, k),
                            too_few=too_few_units(figures),
                        ),
                        _excludes_zero(_gap_ci(figures, kind, k)),
                    )
                    for k in ks
                ]
                _add_row(table, [group, str(appearances.get(group, 0)), *intervals])
            parts += [Text(), Text(f"{title}; {_pools(metrics)}"), table]
    if metrics.pairwise is not None:
        parts.append(Text(_pairwise_line(metrics)))
    parts += _lines([f"note: {note}" for note in metrics.notes])
    return Group(*parts)


def grade_score_view(metrics: GradeScoreMetrics, items: pd.DataFrame) -> RenderableType:
    """The mean scores with intervals, the slots chosen, and the items (lowest first if many)."""
    from biasaudit.kinds.grade_score.report import (
        _LOWEST_SHOWN,
        _SCORE_NAMES,
        MAX_ITEM_ROWS,
        _agreement_lines,
        _bounds,
        _header,
        _number,
        _slots_line,
    )
    from biasaudit.kinds.grade_score.study import SCORES

    means = _table("score", "mean", f"{100 * metrics.confidence:g}% interval")
    for score in SCORES:
        mean, bounds = getattr(metrics, score), getattr(metrics, f"{score}_ci")
        _add_row(means, [_SCORE_NAMES[score], _number(mean), _bounds(bounds)])
    shown, title = items, "per item (slots: answers naming slot 1..n; options by index)"
    if len(items) > MAX_ITEM_ROWS:
        shown = items.sort_values("grade", na_position="first").head(_LOWEST_SHOWN)
        title = (
            f"the {_LOWEST_SHOWN} items of lowest Grade Score of {len(items)} (all in items.csv)"
        )
    rows = _table(
        "item", "grade", "entropy", "choice", "unparsed", "slots", "most chosen", "preferred"
    )  # fmt: skip
    for row in shown.itertuples(index=False):
        slots = " ".join(str(getattr(row, f"pos_{s}")) for s in range(1, metrics.n_options + 1))
        cells = [
            str(row.item_id),
            _number(row.grade),
            _number(row.entropy),
            _number(row.choice),
            str(row.unparsed),
            slots,
            "-" if pd.isna(row.most_chosen) else str(row.most_chosen),
            "-" if pd.isna(row.preferred) else str(row.preferred),
        ]
        _add_row(rows, cells)
    return Group(
        *_lines(_header(metrics), first_bold=True),
        Text(),
        means,
        *_lines([_slots_line(metrics), *_agreement_lines(metrics)]),
        Text(),
        Text(title),
        rows,
        *_lines([f"note: {note}" for note in metrics.notes]),
    )


def ruted_view(metrics: RutedMetrics) -> RenderableType:
    """Neutrality, skew and stereotype with intervals per context, then the bounds and notes."""
    from biasaudit.kinds.ruted.metrics import METRICS
    from biasaudit.kinds.ruted.report import _bounds_rows, _interval, ruted_table, similarity_lines

    plain = ruted_table(metrics)
    header = plain[: plain.index("")]  # the lines above the table say what was asked
    table = _table("context", "occ", "gendered", "dropped", *(f"{m} [CI]" for m in METRICS))
    for name, figures in metrics.contexts.items():
        logprobs = figures.source.endswith("logprobs")
        cells = [
            _cell(
                _interval(m, getattr(figures, m), getattr(figures, f"{m}_ci")),
                m != "neutrality" and _excludes_zero(getattr(figures, f"{m}_ci")),
            )
            for m in METRICS
        ]
        counts = [
            name,
            str(figures.occupations),
            "-" if logprobs else str(figures.gendered),
            "-" if logprobs else str(figures.dropped),
        ]
        _add_row(table, [*counts, *cells])
    return Group(
        *_lines(header, first_bold=True),
        Text(),
        table,
        *_lines(_bounds_rows(metrics)),
        *_lines(similarity_lines(metrics)),
        *_lines([f"note: {note}" for note in metrics.notes]),
    )


def audit_view(metrics: Any, run_dir: Path) -> RenderableType:
    """The rich view of an audit's metrics, whatever its kind (reads a Grade Score run's items)."""
    from biasaudit.kinds.allocation.metrics import AllocationMetrics
    from biasaudit.kinds.grade_score.run import GradeScoreMetrics
    from biasaudit.kinds.ruted.metrics import RutedMetrics

    if isinstance(metrics, GradeScoreMetrics):
        return grade_score_view(metrics, pd.read_csv(run_dir / "items.csv"))
    if isinstance(metrics, RutedMetrics):
        return ruted_view(metrics)
    assert isinstance(metrics, AllocationMetrics)
    return allocation_view(metrics)


def comparison_view(comparison: Comparison, *, show_all: bool = False) -> RenderableType:
    """The versions, the changed (or every) figure with B - A and its interval, and the verdict."""
    from biasaudit.reports.compare import comparison_lines

    plain = comparison_lines(comparison, show_all=show_all)
    tests = comparison.tests if show_all else comparison.changed_tests
    table = _table("figure", "A", "B", "B - A [95% CI]", "p (adj.)", "method")
    table.columns[-1].justify = "left"
    for test in tests:
        _add_row(table, _test_cells(test, comparison.alpha))
    parts: list[RenderableType] = [*_lines(plain[:4], first_bold=True)]
    if tests:
        parts += [Text(), table]
    rest = plain[4 + (1 + len(tests) if tests else 0) :]  # below the plain table of tests
    style = "bold" if comparison.drift or comparison.versions.changed else ""
    parts += [Text(line, style=style if line.startswith("verdict:") else "") for line in rest]
    return Group(*parts)


def _test_cells(test: ChangeTest, alpha: float) -> list[Text]:
    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:+.3f}"

    changed = test.changed(alpha)
    interval = f"{test.difference:+.3f} [{test.ci[0]:+.3f}, {test.ci[1]:+.3f}]"
    return [
        Text(test.label),
        Text(number(test.before)),
        Text(number(test.after)),
        _cell(interval, changed),
        _cell(f"{test.p_adjusted:.2g}", changed),
        Text(test.method),
    ]


def blocks_view(blocks: Sequence[Block]) -> RenderableType:
    """A study's lines (the first in bold) and its tables, each with its notes under it."""
    parts: list[RenderableType] = []
    for block in blocks:
        if isinstance(block, str):
            parts.append(Text(block, style="" if parts else "bold"))
            continue
        table = _table(*block.header, left=block.labels)
        for row in block.rows:
            _add_row(table, row)
        parts += [Text(block.title), table, *_lines(block.notes)]
    return Group(*parts)


def listing_view(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    left: int = 1,
    total: Sequence[str] | None = None,
    above: Sequence[str] = (),
    below: Sequence[str] = (),
) -> RenderableType:
    """Rows under ``headers``, then a ``total`` row set apart in bold; lines above and below."""
    table = _table(*headers, left=left)
    for row in rows:
        _add_row(table, row)
    if total is not None:
        table.add_section()
        _add_row(table, total, style="bold")
    return Group(*_lines(above), table, *_lines(below))


def history_view(entries: Sequence[HistoryEntry]) -> RenderableType:
    """One run a row: when, kind, status, the model versions reported, the headline figures."""
    from biasaudit.reports.history import HISTORY_COLUMNS, _history_cells

    cells = map(_history_cells, entries)
    return listing_view(HISTORY_COLUMNS, cells, left=len(HISTORY_COLUMNS))


def tasks_view(tasks: Sequence[TaskInfo]) -> RenderableType:
    """Each task's name and summary in bold, its fields under it with long values folded."""
    from biasaudit.reports.text import _task_fields

    listed = [(info, _task_fields(info)) for info in tasks]
    width = max((len(label) for _, fields in listed for label, _ in fields), default=0) + 3
    parts: list[RenderableType] = []
    for info, fields in listed:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(min_width=width, no_wrap=True)  # labels are single short words
        grid.add_column(overflow="fold")
        for label, value in fields:
            grid.add_row(Text(f"  {label}:"), Text(value))
        parts += [Text(f"{info.name}: {info.summary}", style="bold"), grid, Text()]
    return Group(*parts[:-1])
