"""Progress on stderr: a rich bar on a terminal, a plain line now and then otherwise;
for several runs at once, one board with a line per run (:class:`ProgressBoard`)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from biasaudit.engine.types import EngineStats, format_duration, format_rate

if TYPE_CHECKING:
    from rich.console import Console

    from biasaudit.engine.progress_bar import ProgressBar

__all__ = [
    "ProgressBoard",
    "ProgressPrinter",
    "describe_progress",
    "format_duration",
    "format_rate",
    "phase",
]


@contextlib.contextmanager
def phase(what: str, stream: TextIO | None = None) -> Iterator[None]:
    """Show ``what`` with a spinner and the time spent, on a terminal, while the block runs.

    For the work between requests that can take a while: computing a run's
    figures, writing its report, a study, a replay's comparison, a power plan's
    refit. Nothing is shown where ``stream`` (stderr) is not a terminal, so
    logs, pipes and tests read as before; the line is gone when the block ends.
    """
    out = stream if stream is not None else sys.stderr
    if out is None or not out.isatty():
        yield
        return
    from rich.console import Console
    from rich.errors import LiveError
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    shown = Progress(*columns, console=Console(file=out), transient=True)
    try:
        shown.start()
    except LiveError:  # another display holds the terminal: it shows the progress
        yield
        return
    try:
        shown.add_task(what, total=None)
        yield
    finally:
        shown.stop()


def describe_progress(stats: EngineStats) -> str:
    """One line: done/total, cache hits, retries, failures, in flight, rate and ETA."""
    elapsed = max(time.monotonic() - stats.started, 1e-9)
    fresh = stats.done - stats.cache_hits
    rate = fresh / elapsed
    remaining = stats.total - stats.done
    eta = format_duration(remaining / rate) if rate > 0 and remaining else "-"
    limited = (
        f", limit {stats.concurrency_limit}"
        if stats.rate_limited and stats.concurrency_limit
        else ""
    )
    return (
        (
            f"{stats.done}/{stats.total} done ({stats.cache_hits} cached, {stats.retries} retries, "
            f"{stats.failures} failed, {stats.in_flight} in flight{limited}) "
            f"{format_rate(rate)}, ETA {eta}"
        )
        + (f"; {stats.batch_status}" if stats.batch_status else "")
        + _waiting(stats)
    )


def _waiting(stats: EngineStats) -> str:
    """Requests another process sharing the cache has in flight, which this run waits for."""
    if not stats.waiting:
        return ""
    return f"; waiting for another run's answers to {stats.waiting} requests"


class ProgressPrinter:
    """Prints :func:`describe_progress` of live stats until stopped.

    Parameters
    ----------
    stats:
        A callable returning the stats to show (the engine replaces its object per run).
    stream:
        Where to print; defaults to stderr.
    console:
        Draw the rich bar on this console whatever ``stream`` is (tests force a terminal so).
    """

    def __init__(
        self,
        stats: object,
        stream: TextIO | None = None,
        *,
        label: str = "",
        console: Console | None = None,
    ) -> None:
        self._stats = stats
        self._stream = stream or sys.stderr
        self._board = self._stream if isinstance(self._stream, _BoardStream) else None
        self._tty = self._board is None and (console is not None or self._stream.isatty())
        self._bar: ProgressBar | None = None
        if self._tty:
            from biasaudit.engine.progress_bar import ProgressBar

            self._bar = ProgressBar(console or self._stream, label=label)
        self._interval = 0.25 if self._tty else 5.0
        if self._board is not None:
            self._interval = self._board.interval
        self._label = label
        self._task: asyncio.Task[None] | None = None

    def _current(self) -> EngineStats:
        stats = self._stats() if callable(self._stats) else self._stats
        assert isinstance(stats, EngineStats)
        return stats

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._print(final=True)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            self._print()

    def _print(self, *, final: bool = False) -> None:
        if self._bar is not None:
            self._bar.show(self._current(), final=final)
            return
        if self._board is not None:
            self._board.progress(f"{self._label}{describe_progress(self._current())}")
            return
        self._stream.write(f"{self._label}{describe_progress(self._current())}\n")
        self._stream.flush()


class ProgressBoard:
    """One progress display for several runs at once (``biasaudit run -m A -m B``).

    Each run prints to its own :meth:`stream`. On a terminal the board redraws the
    latest progress line of every run in place; elsewhere it prints each line as it
    comes, named by its run. Anything else a run writes (notes, warnings) passes
    through, named by its run too.
    """

    def __init__(self, stream: TextIO | None = None, *, console: Console | None = None) -> None:
        self._stream = stream or sys.stderr
        self._lines: dict[str, str] = {}
        self._lock = threading.Lock()
        self._live: Any = None
        if console is not None or self._stream.isatty():
            from rich.console import Console
            from rich.live import Live

            self._console = console or Console(file=self._stream)
            self._live = Live(console=self._console, refresh_per_second=4, transient=False)
            self._live.start()

    @property
    def interval(self) -> float:
        """How often a run's progress line is refreshed (seconds)."""
        return 0.25 if self._live is not None else 5.0

    def stream(self, name: str) -> TextIO:
        """The stream the run called ``name`` prints to."""
        return _BoardStream(self, name)  # type: ignore[return-value]

    def progress(self, name: str, line: str) -> None:
        with self._lock:
            self._lines[name] = line
            if self._live is not None:
                self._live.update(self._render())
                return
            self._stream.write(f"{name}: {line}\n")
            self._stream.flush()

    def write(self, name: str, text: str) -> None:
        with self._lock:
            if self._live is not None:
                self._live.console.print(f"{name}: {text}", markup=False, highlight=False)
                return
            self._stream.write(f"{name}: {text}\n")
            self._stream.flush()

    def close(self) -> None:
        """Stop redrawing; the last lines stay on the terminal."""
        with self._lock:
            if self._live is not None:
                self._live.update(self._render())
                self._live.stop()
                self._live = None

    def _render(self) -> Any:
        from rich.text import Text

        return Text("\n".join(f"{name}: {line}" for name, line in self._lines.items()))


class _BoardStream:
    """What one run of a :class:`ProgressBoard` prints to: whole lines go to the board."""

    def __init__(self, board: ProgressBoard, name: str) -> None:
        self._board = board
        self._name = name
        self._pending = ""

    @property
    def interval(self) -> float:
        return self._board.interval

    def progress(self, line: str) -> None:
        self._board.progress(self._name, line)

    def write(self, text: str) -> int:
        self._pending += text
        while "\n" in self._pending:
            line, self._pending = self._pending.split("\n", 1)
            if line.strip():
                self._board.write(self._name, line)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False
