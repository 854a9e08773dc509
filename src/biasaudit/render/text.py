"""The plain-text kit every kind's tables are made of: titled tables, blocks of lines,
and how a value, an interval, a share and a p-value are written.

A kind describes each of its tables once, as :data:`Block` s (lines and
:class:`PlainTable` s whose cells may be :class:`Cell` s marked strong); the
command line prints them as plain lines (:func:`block_lines`) or draws them
with rich on a terminal (:func:`biasaudit.reports.rich_tables.blocks_view`).
Every figure is shown with its interval or with the number behind it; a
simulated model is labelled as such on the first line of every table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "IMPACT_VERDICT",
    "SIGNIFICANT",
    "SIMULATED",
    "STRONG_MARK",
    "Block",
    "Cell",
    "PlainTable",
    "block_lines",
    "excludes_zero",
    "format_interval",
    "format_percent",
    "format_plain",
    "format_share",
    "format_signed",
    "impact_table",
]

SIMULATED = "SIMULATED model, for demos and tests; not a real model"
SIGNIFICANT = 0.05
"""A p-value below this makes a figure's cell strong."""

IMPACT_VERDICT = (
    "'beyond noise' means its interval lies below 0.8 after Holm's adjustment over the table"
)
"""What an impact ratio's verdict means, wherever a caption says it."""

TOO_FEW_TO_SAY = "too few units to say"
"""What a table shows in place of a flag where fewer than 8 units stand behind a group."""


def smoke_test_lines(fewest: int, unit: str, more: str, *, where: str = "") -> list[str]:
    """The lines above a run's tables when fewer than 8 units stand behind some group
    (``where``: " behind a group"), or behind the whole run."""
    return [
        "",
        f"SMOKE TEST: as few as {fewest} {unit}{where} (fewer than 8). Intervals from so few "
        f"{unit} are wide (Student t) and say little, so no figure below is flagged "
        f"('{TOO_FEW_TO_SAY}'):",
        f"read this run as the pipeline at work, not as a finding. An audit to sign: {more}.",
    ]


def excludes_zero(bounds: Sequence[float] | None) -> bool:
    """Whether an interval lies wholly above or below 0 (its figure's cell is strong)."""
    return bounds is not None and len(bounds) == 2 and (bounds[0] > 0 or bounds[1] < 0)


STRONG_MARK = "*"
"""What follows a strong cell's text on every surface (bold alone is lost when piped)."""


@dataclass(frozen=True)
class Cell:
    """A cell of a table; a ``strong`` one (a figure flagged beyond noise) reads with
    :data:`STRONG_MARK` after it wherever it is shown, and in bold on a terminal."""

    text: str
    strong: bool = False

    def __str__(self) -> str:
        return f"{self.text} {STRONG_MARK}" if self.strong else self.text


@dataclass(frozen=True)
class PlainTable:
    """A table, described once: plain text pads each cell to its column's width, after
    ``gaps`` spaces (none by default), aligned right in the ``right`` columns.

    :func:`biasaudit.reports.rich_tables.blocks_view` draws the same cells as a rich
    table on a terminal, its first ``labels`` columns aligned left. A title of None
    is no line.
    """

    title: str | None
    header: Sequence[str]
    rows: Sequence[Sequence[str | Cell]]
    widths: Sequence[int]
    labels: int = 1
    notes: Sequence[str] = ()
    right: frozenset[int] = frozenset()
    gaps: Sequence[int] = ()

    def fitted(self, width: int, *, padding: int = 2) -> list[PlainTable]:
        """This table in parts no wider than ``width`` (each column as wide as its widest
        cell, ``padding`` between columns): its label columns repeated in each, the other
        columns in turn; the title over the first part, the notes under the last. One part
        where it fits, or where even one column beside the labels would not."""
        cells = [self.header, *self.rows]
        need = [max(len(str(row[i])) for row in cells) + padding for i in range(len(self.header))]
        labels = list(range(min(self.labels, len(need))))
        rest = list(range(len(labels), len(need)))
        base = sum(need[i] for i in labels)
        if base + sum(need[i] for i in rest) <= width or not rest:
            return [self]
        chunks: list[list[int]] = [[]]
        used = base
        for index in rest:
            if chunks[-1] and used + need[index] > width:
                chunks.append([])
                used = base
            chunks[-1].append(index)
            used += need[index]
        if len(chunks) == 1:
            return [self]
        gaps = list(self.gaps) or [0] * len(self.widths)
        parts = []
        for number, chunk in enumerate(chunks):
            keep = labels + chunk
            parts.append(
                PlainTable(
                    self.title if number == 0 else None,
                    [self.header[i] for i in keep],
                    [[row[i] for i in keep] for row in self.rows],
                    [self.widths[i] for i in keep],
                    labels=len(labels),
                    notes=self.notes if number == len(chunks) - 1 else (),
                    right=frozenset(j for j, i in enumerate(keep) if i in self.right),
                    gaps=[gaps[i] for i in keep],
                )
            )
        return parts

    def lines(self) -> list[str]:
        """The title, the header and the rows as padded lines, then the notes."""
        gaps = self.gaps or [0] * len(self.widths)
        # a width is a least width: a longer cell (a flagged one, with its mark) widens
        # its whole column, so that the columns after it stay aligned
        widths = [
            max(width, *(len(str(row[i])) for row in self.rows)) if self.rows else width
            for i, width in enumerate(self.widths)
        ]
        padded = [
            "".join(
                " " * gap + f"{cell!s:{'>' if i in self.right else '<'}{width}}"
                for i, (cell, width, gap) in enumerate(zip(row, widths, gaps, strict=True))
            )
            for row in (self.header, *self.rows)
        ]
        title = [] if self.title is None else [self.title]
        return [*title, *padded, *self.notes]


Block = str | PlainTable
"""A line of text, or a table: what a study's output is made of."""


def block_lines(blocks: Iterable[Block]) -> list[str]:
    """The plain lines of ``blocks``, trailing spaces stripped."""
    lines: list[str] = []
    for block in blocks:
        lines += [block] if isinstance(block, str) else block.lines()
    return [line.rstrip() for line in lines]


def format_signed(value: float | None, digits: int = 3) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:+.{digits}f}"


def format_plain(value: float | None, digits: int = 3) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.{digits}f}"


# p-values at or below this print as "< 1e-300" (metrics.P_FLOOR: never 0).
_P_FLOOR = 1e-300


def format_p(value: float | None) -> str:
    """A p-value in two significant digits: ``0.034``, ``2.1e-12``, ``< 1e-300``; ``-``
    where there is none. No p-value prints as 0."""
    if value is None or math.isnan(value):
        return "-"
    if value <= _P_FLOOR:
        return "< 1e-300"
    return f"{value:.2g}"


def format_interval(
    point: float | None, bounds: Sequence[float] | None, *, too_few: bool = False
) -> str:
    """``+0.123 [-0.010, +0.250]``; ``+0.123 (too few)`` where the units support no interval."""
    if point is not None and bounds is None and too_few:
        return f"{format_signed(point)} (too few)"
    if bounds is None or point is None:
        return format_signed(point)
    return f"{format_signed(point)} [{format_signed(bounds[0])}, {format_signed(bounds[1])}]"


def format_share(point: float | None, bounds: Sequence[float] | None) -> str:
    if point is None:
        return "-"
    if bounds is None:
        return f"{point:.3f}"
    return f"{point:.3f} [{bounds[0]:.3f}, {bounds[1]:.3f}]"


def format_percent(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{100 * value:.1f}%"


class ImpactRow(Protocol):
    category: str
    value: str
    n: int
    rate: float
    ratio: float
    ci: list[float] | None
    flagged: bool
    beyond_noise: bool


def impact_table(
    rows: Sequence[ImpactRow],
    k: int,
    *,
    beyond: Mapping[tuple[str, str], bool] | None = None,
    too_few: bool = False,
    n_means: str = "candidates",
) -> PlainTable | None:
    """Impact ratios (each value's selection rate over the most selected value's, the
    four-fifths rule), flagged below 0.8, beyond noise or within it; None if none.
    ``n_means``: what n counts, as the rates table beside it counts it.

    ``beyond`` says, per (category, value), whether a ratio below 0.8 is beyond
    noise after the table's multiplicity adjustment (without it, each row's own
    ``beyond_noise``); ``too_few``: the run has too few units behind a group to
    flag anything, and every flag reads "too few units to say".
    """
    cells: list[list[str | Cell]] = []
    for row in rows:
        ci = f"{row.ratio:.3f}" + (f" [{row.ci[0]:.3f}, {row.ci[1]:.3f}]" if row.ci else "")
        strong = False
        verdict = ""
        if row.flagged and too_few:
            verdict = TOO_FEW_TO_SAY
        elif row.flagged:
            key = (row.category, row.value)
            strong = beyond.get(key, False) if beyond is not None else row.beyond_noise
            verdict = "beyond noise" if strong else "within noise"
        cells.append(
            [row.category, row.value, str(row.n), f"{row.rate:.3f}",
             ci, Cell(verdict, strong)]
        )  # fmt: skip
    if not cells:
        return None
    width = max(6, *(len(str(r[1])) for r in cells))
    return PlainTable(
        f"impact ratios at k={k} (Local Law 144, four-fifths rule): each value's selection "
        f"rate over the most selected value's, flagged below 0.8; n = {n_means}",
        ["category", "value", "n", "rate", "ratio [CI]", "below 0.8"],
        cells,
        widths=[8, width, 6, 6, 22, 0],
        gaps=[0, 1, 1, 1, 2, 1],
        right=frozenset({2, 3}),
        labels=2,
    )
