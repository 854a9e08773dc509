"""Progress on stderr: a rich bar on a terminal, a plain line now and then otherwise."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING, TextIO

from biasaudit.engine.types import EngineStats

if TYPE_CHECKING:
    from rich.console import Console

    from biasaudit.engine.progress_bar import ProgressBar

__all__ = ["ProgressPrinter", "describe_progress"]


def describe_progress(stats: EngineStats) -> str:
    """One line: done/total, cache hits, retries, failures, in flight, rate and ETA."""
    elapsed = max(time.monotonic() - stats.started, 1e-9)
    fresh = stats.done - stats.cache_hits
    rate = fresh / elapsed
    remaining = stats.total - stats.done
    eta = f"{remaining / rate:.0f}s" if rate > 0 and remaining else "-"
    limited = (
        f", limit {stats.concurrency_limit}"
        if stats.rate_limited and stats.concurrency_limit
        else ""
    )
    return (
        (
            f"{stats.done}/{stats.total} done ({stats.cache_hits} cached, {stats.retries} retries, "
            f"{stats.failures} failed, {stats.in_flight} in flight{limited}) "
            f"{rate:.0f} req/s, ETA {eta}"
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
        self._tty = console is not None or self._stream.isatty()
        self._bar: ProgressBar | None = None
        if self._tty:
            from biasaudit.engine.progress_bar import ProgressBar

            self._bar = ProgressBar(console or self._stream, label=label)
        self._interval = 0.25 if self._tty else 5.0
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
        self._stream.write(f"{self._label}{describe_progress(self._current())}\n")
        self._stream.flush()
