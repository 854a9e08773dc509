"""The progress bar a run shows on a terminal, drawn with rich.

:class:`~biasaudit.engine.progress.ProgressPrinter` uses it when stderr is a
terminal; elsewhere (a log file, a pipe, CI) it prints plain lines instead.
The bar is redrawn by the printer's own timer (``auto_refresh`` off), so it
starts no thread and stops exactly when the run does.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TextIO

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.text import Text

from biasaudit.engine.types import EngineStats, format_rate

__all__ = ["ProgressBar", "progress_details"]


def _clock(seconds: float) -> str:
    minutes, second = divmod(round(seconds), 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours}:{minute:02d}:{second:02d}"


def _eta(stats: EngineStats, rate: float) -> str:
    remaining = stats.total - stats.done
    return _clock(remaining / rate) if rate > 0 and remaining else "-"


def _rate(stats: EngineStats) -> float:
    """Fresh answers a second: cache hits come at once and would make the ETA too hopeful."""
    elapsed = max(time.monotonic() - stats.started, 1e-9)
    return (stats.done - stats.cache_hits) / elapsed


def progress_details(stats: EngineStats) -> str:
    """Cache hits, retries, failures, requests in flight and the rate, under the bar."""
    limit = (
        f" (limit {stats.concurrency_limit})"
        if stats.rate_limited and stats.concurrency_limit
        else ""
    )
    failed = f"[bold]{stats.failures} failed[/]" if stats.failures else "0 failed"
    return (
        (
            f"{stats.cache_hits} cached · {stats.retries} retries · {failed} · "
            f"{stats.in_flight} in flight{limit} · {format_rate(_rate(stats))}"
        )
        + (f"\n{stats.batch_status}" if stats.batch_status else "")
        + (
            f"\nwaiting for another run's answers to {stats.waiting} requests"
            if stats.waiting
            else ""
        )
    )


class _TwoLines(Progress):
    """The bar, done/total and ETA on one line, the counters on the next: both fit 80 columns."""

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        for task in self.tasks:
            yield Text.from_markup(f"  {task.fields['details']}", overflow="ellipsis")


class ProgressBar:
    """A bar of requests done out of the total, ETA, and :func:`progress_details` under it.

    Parameters
    ----------
    target:
        A rich console, or the terminal stream to draw on.
    label:
        What is running (``"resume-screening: "``); shown before the bar.
    """

    def __init__(self, target: Console | TextIO, *, label: str = "") -> None:
        console = target if isinstance(target, Console) else Console(file=target)
        self._progress = _TwoLines(
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("ETA {task.fields[eta]}"),
            console=console,
            auto_refresh=False,
        )
        description = label.strip().removesuffix(":") or "requests"
        self._task = self._progress.add_task(description, total=None, details="", eta="-")
        self._started = False

    def show(self, stats: EngineStats, *, final: bool = False) -> None:
        """Redraw the bar from ``stats``; ``final`` leaves it on screen and ends the display."""
        self._progress.update(
            self._task,
            completed=stats.done,
            total=stats.total or None,
            details=progress_details(stats),
            eta=_eta(stats, _rate(stats)),
        )
        if not self._started:  # after the update: the first frame shows the real counts
            self._progress.start()
            self._started = True
        self._progress.refresh()
        if final:
            self._progress.stop()
            self._started = False
