"""The report's figures, drawn with matplotlib's Agg renderer into PNG bytes.

matplotlib is imported inside the drawing functions, never at module import,
so the command line starts as fast without it. Figures are built on
:class:`matplotlib.figure.Figure` directly (no pyplot, no global state).
Series differ by marker, line style and hatch as well as by colour (the
Okabe-Ito palette), so every figure reads in grey scale; a simulated model's
figures carry the label in their corner.
"""

from __future__ import annotations

import functools
import io
import math
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "Bars",
    "DotPanel",
    "LinePanel",
    "ScatterCell",
    "Series",
    "bar_panels",
    "distributions",
    "dot_panels",
    "line_panels",
    "plain_style",
    "scatter_grid",
]

COLOURS = ("#000000", "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#999999")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
LINES = ("-", "--", ":", "-.")
HATCHES = ("", "///", "...", "xx", "\\\\", "oo", "--", "++")
_DPI = 110

Number = float | None


@dataclass(frozen=True)
class Series:
    """One named series of values, with an interval per value when ``lows``/``highs`` are given."""

    name: str
    values: Sequence[Number]
    lows: Sequence[Number] | None = None
    highs: Sequence[Number] | None = None
    style: int | None = None  # index into the palettes; the series' position by default


@dataclass(frozen=True)
class DotPanel:
    """Values with intervals along x, one row per label, one mark per series."""

    title: str
    series: Sequence[Series]
    xlabel: str = ""
    reference: float | None = 0.0


@dataclass(frozen=True)
class LinePanel:
    """Series along a shared x axis (k, contexts ...); intervals drawn as error bars."""

    title: str
    x: Sequence[float]
    series: Sequence[Series]
    xlabel: str = ""
    ylabel: str = ""
    reference: float | None = None
    emphasise: str | None = None


@dataclass(frozen=True)
class Bars:
    """Grouped bars: one bar per series in each category; ``expected`` draws a dashed line."""

    title: str
    categories: Sequence[str]
    series: Sequence[Series]
    ylabel: str = ""
    expected: float | None = None


@dataclass(frozen=True)
class ScatterCell:
    """Points (x, y) with a label per point, and a note (the Pearson r) in the corner."""

    title: str
    x: Sequence[float]
    y: Sequence[float]
    xlabel: str
    ylabel: str
    note: str
    groups: Sequence[str] = ()


def _config_dir_writable(base: str) -> bool:
    target = os.path.join(base, "matplotlib")
    try:
        os.makedirs(target, exist_ok=True)
    except OSError:
        return False
    return os.access(target, os.W_OK)


def _settle_config_dir() -> None:
    """Give matplotlib a lasting place of its own when its usual one cannot be written.

    Without a writable ``~/.config/matplotlib`` and ``~/.cache/matplotlib`` (a
    container run as a user without a home, a read-only home on a cluster), matplotlib
    prints two lines of warning on every command that draws a figure and builds its font
    cache afresh in a new temporary folder each time. It is given, through its own
    ``MPLCONFIGDIR``, a folder of this user's in the temporary directory instead, made
    private, and kept between runs; one that exists but is not this user's own private
    folder is not used. A ``MPLCONFIGDIR`` already set is left as it is.
    """
    if "matplotlib" in sys.modules or os.environ.get("MPLCONFIGDIR"):
        return
    home = os.path.expanduser("~")  # "~" itself for a user without a home (no $HOME, no entry)
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    has_home = os.path.isabs(config) and os.path.isabs(cache)  # never a folder named "~" here
    if has_home and _config_dir_writable(config) and _config_dir_writable(cache):
        return
    uid = os.getuid() if hasattr(os, "getuid") else None
    own = os.path.join(
        tempfile.gettempdir(), f"biasaudit-matplotlib-{'user' if uid is None else uid}"
    )
    try:
        os.makedirs(own, mode=0o700, exist_ok=True)
        made = os.lstat(own)
    except OSError:
        return
    private = stat.S_ISDIR(made.st_mode) and not made.st_mode & 0o077
    if private and (uid is None or made.st_uid == uid):
        os.environ["MPLCONFIGDIR"] = own


_Args = ParamSpec("_Args")


def plain_style(draw: Callable[_Args, bytes]) -> Callable[_Args, bytes]:
    """``draw`` with matplotlib's own defaults, whatever ``matplotlibrc`` this machine has.

    A user's style file (a dark theme, other fonts or line widths, a font family this
    machine lacks, which warns on every label) would otherwise change every report's
    figures: a report made on two machines draws the same."""

    @functools.wraps(draw)
    def drawn(*args: _Args.args, **kwargs: _Args.kwargs) -> bytes:
        _settle_config_dir()
        import matplotlib.style

        with matplotlib.style.context("default"):
            return draw(*args, **kwargs)

    return drawn


def _figure(width: float, height: float) -> Figure:  # inside a plain_style drawing
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _png(figure: Figure, simulated: bool) -> bytes:
    if simulated:
        figure.suptitle(
            "SIMULATED model: not a real model",
            x=0.99,
            ha="right",
            fontsize=8,
            fontweight="bold",
            bbox={"facecolor": "#eeeeee", "edgecolor": "black"},
        )
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI, metadata={"Software": None})
    return buffer.getvalue()


def _missing(value: Number) -> bool:
    return value is None or math.isnan(value)


def _style(axes: Axes) -> None:
    axes.grid(True, color="#dddddd", linewidth=0.6)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)


def _error(value: Number, low: Number, high: Number) -> tuple[float, float] | None:
    if _missing(value) or _missing(low) or _missing(high):
        return None
    assert value is not None and low is not None and high is not None
    return max(value - low, 0.0), max(high - value, 0.0)


def _legend(axes: Axes, count: int, *, outside_from: int | None = None) -> None:
    """The panel's legend: inside where matplotlib finds room, or beside the panel from
    ``outside_from`` series on (eight lines leave no corner free of data)."""
    if count > 1 and axes.get_legend_handles_labels()[1]:
        if outside_from is not None and count >= outside_from:
            axes.legend(fontsize=7, frameon=False, loc="upper left",
                        bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # fmt: skip
            return
        axes.legend(fontsize=8, frameon=True, framealpha=0.9)


@plain_style
def dot_panels(labels: Sequence[str], panels: Sequence[DotPanel], *, simulated: bool) -> bytes:
    """Side-by-side panels of values with intervals, rows labelled by ``labels`` (top down).

    The figure widens for long labels (about 0.075 inch a character at 9 points), so
    constrained layout can fit them beside the panels rather than cut them off."""
    room = 0.075 * max((len(label) for label in labels), default=0)
    width = min(4.2 * len(panels) + 1.6, 13.0) + max(0.0, room - 1.2)
    figure = _figure(width, 0.42 * len(labels) + 1.5)
    axes_list = figure.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    for axes, panel in zip(axes_list, panels, strict=True):
        count = len(panel.series)
        for index, series in enumerate(panel.series):
            offset = (index - (count - 1) / 2) * min(0.6 / count, 0.22)
            _dot_series(axes, series, len(labels), offset, index)
        if panel.reference is not None:
            axes.axvline(panel.reference, color="black", linewidth=0.8)
        axes.set_title(panel.title, fontsize=10)
        axes.set_xlabel(panel.xlabel, fontsize=9)
        _style(axes)
        _legend(axes, count)
    first = axes_list[0]
    first.set_yticks(range(len(labels)), list(labels), fontsize=9)
    first.set_ylim(len(labels) - 0.5, -0.5)
    return _png(figure, simulated)


def _dot_series(axes: Axes, series: Series, rows: int, offset: float, index: int) -> None:
    index = index if series.style is None else series.style
    colour, marker = COLOURS[index % len(COLOURS)], MARKERS[index % len(MARKERS)]
    labelled = False
    for row in range(rows):
        value = series.values[row]
        if _missing(value):
            continue
        interval = None
        if series.lows is not None and series.highs is not None:
            interval = _error(value, series.lows[row], series.highs[row])
        assert value is not None
        axes.errorbar(
            [value],
            [row + offset],
            xerr=None if interval is None else [[interval[0]], [interval[1]]],
            linestyle="none",
            markersize=6,
            capsize=3,
            elinewidth=1.2,
            label=None if labelled else series.name,
            color=colour,
            marker=marker,
        )
        labelled = True


_P = TypeVar("_P")


def line_panels(panels: Sequence[LinePanel], *, simulated: bool, columns: int = 2) -> bytes:
    """Panels of series along x (k = 1..K, say), markers and line styles per series."""
    return _panel_grid(panels, _line_panel, simulated=simulated, columns=columns, height=3.6)


@plain_style
def _panel_grid(
    panels: Sequence[_P],
    draw: Callable[[Axes, _P], None],
    *,
    simulated: bool,
    columns: int,
    height: float,
) -> bytes:
    """Draw each panel in a grid of ``columns``; cells left over are hidden."""
    columns = min(columns, len(panels))
    rows = math.ceil(len(panels) / columns)
    figure = _figure(5.4 * columns + 0.5, height * rows + 0.3)
    grid = figure.subplots(rows, columns, squeeze=False)
    for index, axes in enumerate(grid.flat):
        if index >= len(panels):
            axes.set_visible(False)
            continue
        draw(axes, panels[index])
    return _png(figure, simulated)


def _line_panel(axes: Axes, panel: LinePanel) -> None:
    count = len(panel.series)
    for position, series in enumerate(panel.series):
        index = position if series.style is None else series.style
        strong = series.name == panel.emphasise
        dodge = series.lows is not None and count > 1  # keep overlapping intervals apart
        span = max(panel.x) - min(panel.x) or 1
        offset = (position - (count - 1) / 2) * 0.012 * span if dodge else 0.0
        points = [
            (x + offset, v, i)
            for i, (x, v) in enumerate(zip(panel.x, series.values, strict=True))
            if not _missing(v)
        ]
        if not points:
            continue
        xs, ys = [p[0] for p in points], [float(p[1] or 0.0) for p in points]
        errors = None
        if series.lows is not None and series.highs is not None:
            pairs = [
                _error(p[1], series.lows[p[2]], series.highs[p[2]]) or (0.0, 0.0) for p in points
            ]
            errors = [[e[0] for e in pairs], [e[1] for e in pairs]]
        axes.errorbar(
            xs,
            ys,
            yerr=errors,
            color="black" if strong else COLOURS[index % len(COLOURS)],
            marker=MARKERS[index % len(MARKERS)],
            linestyle=LINES[index % len(LINES)],
            linewidth=2.6 if strong else 1.3,
            markersize=5,
            capsize=2,
            elinewidth=0.7,
            label=series.name,
        )
    if panel.reference is not None:
        axes.axhline(panel.reference, color="black", linewidth=0.8)
    axes.set_xticks(list(panel.x))
    axes.set_title(panel.title, fontsize=10)
    axes.set_xlabel(panel.xlabel, fontsize=9)
    axes.set_ylabel(panel.ylabel, fontsize=9)
    _style(axes)
    _legend(axes, count, outside_from=5)


@plain_style
def distributions(
    labels: Sequence[str], values: Sequence[Sequence[float]], *, xlabel: str, simulated: bool
) -> bytes:
    """Box plots of each group's scores, every score drawn as a point over its box."""
    import numpy as np

    figure = _figure(8.0, 0.32 * len(labels) + 1.2)
    axes = figure.subplots()
    present = [i for i, v in enumerate(values) if len(v)]
    axes.boxplot(
        [list(values[i]) for i in present],
        positions=present,
        orientation="horizontal",
        widths=0.5,
        patch_artist=True,
        showfliers=False,
        boxprops={"facecolor": "#e4e4e4", "edgecolor": "black"},
        medianprops={"color": "black", "linewidth": 2},
    )
    rng = np.random.default_rng(0)
    for row in present:
        jitter = rng.uniform(-0.18, 0.18, len(values[row]))
        axes.plot(
            list(values[row]),
            row + jitter,
            linestyle="none",
            marker="o",
            markersize=3,
            markerfacecolor="none",
            markeredgecolor="#333333",
            alpha=0.6,
        )
    axes.set_yticks(range(len(labels)), list(labels), fontsize=9)
    axes.set_ylim(len(labels) - 0.5, -0.5)
    axes.set_xlabel(xlabel, fontsize=9)
    _style(axes)
    return _png(figure, simulated)


def bar_panels(panels: Sequence[Bars], *, simulated: bool, columns: int = 2) -> bytes:
    """Grouped bars, told apart by hatch as well as colour."""
    return _panel_grid(panels, _bars, simulated=simulated, columns=columns, height=3.4)


def _bars(axes: Axes, panel: Bars) -> None:
    count = len(panel.series)
    width = 0.8 / count
    for index, series in enumerate(panel.series):
        xs = [c + (index - (count - 1) / 2) * width for c in range(len(panel.categories))]
        heights = [0.0 if _missing(v) else float(v or 0.0) for v in series.values]
        errors: Any = None
        if series.lows is not None and series.highs is not None:
            pairs = [
                _error(v, lo, hi) or (0.0, 0.0)
                for v, lo, hi in zip(series.values, series.lows, series.highs, strict=True)
            ]
            errors = [[p[0] for p in pairs], [p[1] for p in pairs]]
        axes.bar(
            xs,
            heights,
            width=width * 0.92,
            yerr=errors,
            capsize=3,
            label=series.name,
            color=COLOURS[(index + 1) % len(COLOURS)] if count > 1 else "#bbbbbb",
            edgecolor="black",
            hatch=HATCHES[index % len(HATCHES)],
        )
    if panel.expected is not None:
        axes.axhline(
            panel.expected, color="black", linestyle="--", linewidth=1.2, label="no position bias"
        )
    axes.set_xticks(range(len(panel.categories)), list(panel.categories), fontsize=9)
    axes.set_title(panel.title, fontsize=10)
    axes.set_ylabel(panel.ylabel, fontsize=9)
    _style(axes)
    _legend(axes, count + (panel.expected is not None))


@plain_style
def scatter_grid(cells: Sequence[ScatterCell], *, simulated: bool, columns: int = 4) -> bytes:
    """Small scatter plots, one per (metric, gap), each with its note (Pearson r)."""
    columns = min(columns, len(cells))
    rows = math.ceil(len(cells) / columns)
    figure = _figure(3.3 * columns + 0.4, 3.0 * rows + 0.3)
    grid = figure.subplots(rows, columns, squeeze=False)
    for index, axes in enumerate(grid.flat):
        if index >= len(cells):
            axes.set_visible(False)
            continue
        cell = cells[index]
        names = list(dict.fromkeys(cell.groups)) or [""]
        for number, name in enumerate(names):
            chosen = [i for i in range(len(cell.x)) if not cell.groups or cell.groups[i] == name]
            axes.plot(
                [cell.x[i] for i in chosen],
                [cell.y[i] for i in chosen],
                linestyle="none",
                marker=MARKERS[number % len(MARKERS)],
                color=COLOURS[number % len(COLOURS)],
                markersize=5,
                markerfacecolor="none" if number % 2 else None,
                label=name or None,
            )
        axes.text(
            0.03,
            0.97,
            cell.note,
            transform=axes.transAxes,
            va="top",
            fontsize=8,
            bbox={"facecolor": "white", "edgecolor": "#999999"},
        )
        axes.set_title(cell.title, fontsize=9)
        axes.set_xlabel(cell.xlabel, fontsize=8)
        axes.set_ylabel(cell.ylabel, fontsize=8)
        _style(axes)
        if index == 0 and len(names) > 1:
            axes.legend(fontsize=6, loc="lower right")
    return _png(figure, simulated)
