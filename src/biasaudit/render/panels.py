"""The compare page's kit, which every kind draws its differences with: a figure of
differences B - A with their intervals (:func:`figure_block`, from :class:`Panel` s of
:class:`Marks`), and how figures and groups are named."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from biasaudit.metrics import ChangeTest
from biasaudit.render.document import Figure
from biasaudit.render.figures import COLOURS, MARKERS, _error, _figure, _png, _style, plain_style

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "Compared",
    "Marks",
    "Panel",
    "figure_block",
    "group_label",
    "metric_name",
    "tests_by_key",
]


class Compared(Protocol):
    """What a kind's compare figures read of a comparison
    (:class:`biasaudit.reports.compare.Comparison`, which stands above the kinds)."""

    @property
    def tests(self) -> Sequence[ChangeTest]: ...

    @property
    def alpha(self) -> float: ...


@dataclass(frozen=True)
class Marks:
    """One series of differences along the rows, each with its interval and verdict."""

    name: str
    tests: Sequence[ChangeTest | None]
    scale: float = 1.0


@dataclass(frozen=True)
class Panel:
    title: str
    xlabel: str
    series: Sequence[Marks]


def metric_name(metric: str, names: Mapping[str, str]) -> str:
    """``dp_gap k=2`` -> ``ΔDP at k=2``, ``rabbi`` -> ``RABBI``, with a kind's
    ``figure_names``; a figure it does not name keeps its key."""
    base, _, k = metric.partition(" ")
    name = names.get(base, base)
    return f"{name} at {k}" if k else name


def group_label(group: str, names: Mapping[str, str]) -> str:
    """``Black male (B_M)``, or the bare group (or context) without a name."""
    name = names.get(group, "")
    return f"{name} ({group})" if name and name != group else group


@plain_style
def _draw(
    labels: Sequence[str], panels: Sequence[Panel], *, simulated: bool, alpha: float
) -> bytes:
    """Differences with intervals, one row per label; filled marks changed, hollow ones did not.

    One legend under the panels names the series (k = 1..K, say) and says
    what filled and hollow marks mean, so no legend covers a mark.
    """
    from matplotlib.lines import Line2D

    figure = _figure(min(4.6 * len(panels) + 1.8, 13.0), 0.42 * len(labels) + 1.9)

    axes_list = figure.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    for axes, panel in zip(axes_list, panels, strict=True):
        count = len(panel.series)
        for index, marks in enumerate(panel.series):
            offset = (index - (count - 1) / 2) * min(0.6 / count, 0.22)
            # Several series skip black, the colour of the filled / hollow key.
            _draw_marks(axes, marks, offset, index + (count > 1), alpha)
        axes.axvline(0.0, color="black", linewidth=0.8)
        axes.set_title(panel.title, fontsize=10)
        axes.set_xlabel(panel.xlabel, fontsize=9)
        _style(axes)
    first = axes_list[0]
    first.set_yticks(range(len(labels)), list(labels), fontsize=9)
    first.set_ylim(len(labels) - 0.5, -0.5)
    widest = max(panels, key=lambda panel: len(panel.series))
    handles = [
        Line2D([], [], color=COLOURS[i % len(COLOURS)], marker=MARKERS[i % len(MARKERS)],
               linestyle="none", label=marks.name)
        for i, marks in enumerate(widest.series, start=1)
    ] if len(widest.series) > 1 else []  # fmt: skip
    handles += [
        Line2D([], [], color="black", marker="o", linestyle="none", markerfacecolor=face,
               label=label)
        for face, label in (("black", f"changed (Holm p < {alpha:g})"), ("white", "within noise"))
    ]  # fmt: skip
    figure.legend(
        handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8, frameon=False
    )
    return _png(figure, simulated)


def _draw_marks(axes: Axes, marks: Marks, offset: float, index: int, alpha: float) -> None:
    colour, marker = COLOURS[index % len(COLOURS)], MARKERS[index % len(MARKERS)]
    labelled = False
    for row, test in enumerate(marks.tests):
        if test is None:
            continue
        value = marks.scale * test.difference
        low, high = (marks.scale * bound for bound in test.ci)
        interval = _error(value, low, high) or (0.0, 0.0)
        axes.errorbar(
            [value],
            [row + offset],
            xerr=[[interval[0]], [interval[1]]],
            linestyle="none",
            color=colour,
            marker=marker,
            markersize=7,
            markerfacecolor=colour if test.changed(alpha) else "white",
            capsize=3,
            elinewidth=1.2,
            label=None if labelled else marks.name,
        )
        labelled = True


def figure_block(
    name: str,
    labels: Sequence[str],
    panels: Sequence[Panel],
    comparison: Compared,
    simulated: bool,
    alt: str,
) -> Figure:
    png = _draw(labels, panels, simulated=simulated, alpha=comparison.alpha)
    caption = (
        "Marks: the difference B - A; bars: its 95% interval; the vertical line is no change. "
        f"Filled marks changed beyond noise (Holm-adjusted p < {comparison.alpha:g}); "
        "hollow ones did not."
    )
    return Figure(name, png, alt, caption)


def tests_by_key(tests: Sequence[ChangeTest]) -> dict[tuple[str | None, str], ChangeTest]:
    return {(test.group, test.metric): test for test in tests}
