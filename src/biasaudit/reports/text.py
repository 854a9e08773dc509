"""The plain-text kit every kind's tables are made of: titled tables, blocks of lines,
and how a value, an interval, a share and a p-value are written.

Every figure is shown with its interval or with the number behind it; a
simulated model is labelled as such on the first line of every table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from biasaudit.kinds.common import TaskInfo

__all__ = [
    "SIMULATED",
    "Block",
    "PlainTable",
    "block_lines",
    "tasks_listing",
]

SIMULATED = "SIMULATED model with a planted bias, for demos and tests; not a real model"


@dataclass(frozen=True)
class PlainTable:
    """A titled table of a study: plain text pads each cell to its column's width.

    :func:`biasaudit.reports.rich_tables.blocks_view` draws the same cells as a rich
    table on a terminal, its first ``labels`` columns aligned left.
    """

    title: str
    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    widths: Sequence[int]
    labels: int = 1
    notes: Sequence[str] = ()

    def lines(self) -> list[str]:
        """The title, the header and the rows as padded lines, then the notes."""
        padded = [
            "".join(f"{cell:<{width}}" for cell, width in zip(row, self.widths, strict=True))
            for row in (self.header, *self.rows)
        ]
        return [self.title, *padded, *self.notes]


Block = str | PlainTable
"""A line of text, or a table: what a study's output is made of."""


def block_lines(blocks: Iterable[Block]) -> list[str]:
    """The plain lines of ``blocks``, trailing spaces stripped."""
    lines: list[str] = []
    for block in blocks:
        lines += [block] if isinstance(block, str) else block.lines()
    return [line.rstrip() for line in lines]


def _signed(value: float | None, digits: int = 3) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:+.{digits}f}"


def _plain(value: float | None, digits: int = 3) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.{digits}f}"


def _p_value(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.2g}"


def _interval(point: float | None, bounds: Sequence[float] | None, *, too_few: bool = False) -> str:
    """``+0.123 [-0.010, +0.250]``; ``+0.123 (too few)`` where the units support no interval."""
    if point is not None and bounds is None and too_few:
        return f"{_signed(point)} (too few)"
    if bounds is None or point is None:
        return _signed(point)
    return f"{_signed(point)} [{_signed(bounds[0])}, {_signed(bounds[1])}]"


def _share(point: float | None, bounds: Sequence[float] | None) -> str:
    if point is None:
        return "-"
    if bounds is None:
        return f"{point:.3f}"
    return f"{point:.3f} [{bounds[0]:.3f}, {bounds[1]:.3f}]"


def _percent(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{100 * value:.1f}%"


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
