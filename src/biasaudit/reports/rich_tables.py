"""The tables of the command line drawn with rich, for a terminal.

On a terminal, every command that prints a table prints it with these: the
audit tables of ``run``, ``replay`` and ``reaudit``, ``compare``, the three
kinds of ``study``, ``history``, ``tasks``, ``providers`` and ``cache stats``.
Anywhere else (a pipe, a file, a test) they print the plain lines of
:mod:`biasaudit.kinds.allocation.table` and its siblings, byte for byte as before, so scripts
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
from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from biasaudit.kinds.common import TaskInfo
    from biasaudit.metrics import ChangeTest
    from biasaudit.render.text import Block
    from biasaudit.reports.compare import Comparison
    from biasaudit.reports.history import HistoryEntry

__all__ = [
    "audit_view",
    "blocks_view",
    "comparison_view",
    "echo_blocks",
    "echo_table",
    "history_view",
    "listing_view",
    "stdout_is_terminal",
    "tasks_view",
]


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
    from biasaudit.render.text import block_lines

    echo_table(block_lines(blocks), lambda: blocks_view(blocks, width=terminal_width()))


def new_table(*headers: str, left: int = 1) -> Table:
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


def add_row(table: Table, cells: Iterable[str | Text], *, style: str = "") -> None:
    """Add a row of plain text: a ``str`` cell is never read as rich markup or highlighted."""
    table.add_row(*(Text(c) if isinstance(c, str) else c for c in cells), style=style or None)


def styled_cell(text: str, strong: bool) -> Text:
    return Text(text, style="bold" if strong else "")


def styled_lines(lines: Sequence[str], *, first_bold: bool = False) -> list[Text]:
    return [
        Text(line, style="bold" if first_bold and i == 0 else "") for i, line in enumerate(lines)
    ]


def audit_view(metrics: Any, run_dir: Path, kind: str) -> RenderableType:
    """The rich view of an audit's table, whatever its kind."""
    from biasaudit.kinds.registry import audit_kind

    return blocks_view(audit_kind(kind).run_blocks(metrics, run_dir), width=terminal_width())


def terminal_width() -> int:
    """The width rich draws at on standard output (``COLUMNS`` where set)."""
    return Console(file=sys.stdout).width


def comparison_view(comparison: Comparison, *, show_all: bool = False) -> RenderableType:
    """The versions, the changed (or every) figure with B - A and its interval, and the verdict."""
    from biasaudit.reports.compare import comparison_lines

    plain = comparison_lines(comparison, show_all=show_all)
    tests = comparison.tests if show_all else comparison.changed_tests
    table = new_table("figure", "A", "B", "B - A [95% CI]", "p (adj.)", "method")
    table.columns[-1].justify = "left"
    for test in tests:
        add_row(table, _test_cells(test, comparison.alpha))
    parts: list[RenderableType] = [*styled_lines(plain[:4], first_bold=True)]
    if tests:
        parts += [Text(), table]
    rest = plain[4 + (1 + len(tests) if tests else 0) :]  # below the plain table of tests
    style = "bold" if comparison.drift or comparison.versions.changed else ""
    parts += [Text(line, style=style if line.startswith("verdict:") else "") for line in rest]
    return Group(*parts)


def _test_cells(test: ChangeTest, alpha: float) -> list[Text]:
    from biasaudit.render.text import format_p

    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:+.3f}"

    changed = test.changed(alpha)
    interval = f"{test.difference:+.3f} [{test.ci[0]:+.3f}, {test.ci[1]:+.3f}]"
    return [
        Text(test.label),
        Text(number(test.before)),
        Text(number(test.after)),
        styled_cell(interval, changed),
        styled_cell(format_p(test.p_adjusted), changed),
        Text(test.method),
    ]


def blocks_view(blocks: Sequence[Block], *, width: int | None = None) -> RenderableType:
    """Lines (the first in bold) and tables, each with its notes under it: an audit's
    table, a study's. A table wider than ``width`` is drawn in parts, its label columns
    repeated in each (:meth:`~biasaudit.render.text.PlainTable.fitted`), so no interval
    folds onto two lines."""
    from biasaudit.render.text import Cell

    parts: list[RenderableType] = []
    for block in blocks:
        if isinstance(block, str):
            parts.append(Text(block, style="" if parts else "bold"))
            continue
        for piece in block.fitted(width) if width else [block]:
            table = new_table(*piece.header, left=piece.labels)
            for row in piece.rows:
                add_row(table, [styled_cell(str(c), c.strong) if isinstance(c, Cell) else c
                                for c in row])  # fmt: skip
            title = [] if piece.title is None else [Text(piece.title)]
            parts += [*title, table, *styled_lines(piece.notes)]
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
    table = new_table(*headers, left=left)
    for row in rows:
        add_row(table, row)
    if total is not None:
        table.add_section()
        add_row(table, total, style="bold")
    return Group(*styled_lines(above), table, *styled_lines(below))


def history_view(entries: Sequence[HistoryEntry]) -> RenderableType:
    """One run a row: when, kind, status, the model versions reported, the headline figures."""
    from biasaudit.reports.history import HISTORY_COLUMNS, _history_cells

    cells = map(_history_cells, entries)
    return listing_view(HISTORY_COLUMNS, cells, left=len(HISTORY_COLUMNS))


def tasks_view(tasks: Sequence[TaskInfo]) -> RenderableType:
    """Each task's name and summary in bold, its fields under it with long values folded."""
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


def tasks_listing(tasks: Iterable[TaskInfo]) -> list[str]:
    """The lines ``biasaudit tasks`` prints."""
    lines: list[str] = []
    for info in tasks:
        lines.append(f"{info.name}: {info.summary}")
        lines += [f"  {label + ':':<11} {value}" for label, value in _task_fields(info)]
        lines.append("")
    return lines[:-1]


def _task_fields(info: TaskInfo) -> list[tuple[str, str]]:
    """What a task is, field by field: its groups, pools, data, prompts and command."""
    return [
        ("groups", info.groups),
        ("pools", info.pools),
        *info.data,
        *(("prompt", prompt) for prompt in info.prompts),
        ("run", info.usage),
    ]
