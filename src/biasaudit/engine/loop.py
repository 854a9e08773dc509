"""Running the async engine from synchronous code (the CLI, scripts, notebooks)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["pause_gc_until_run", "run_async"]

T = TypeVar("T")
_GC_GEN0_THRESHOLD = 50_000
_gc_paused = False


def pause_gc_until_run() -> None:
    """Switch the cyclic garbage collector off until :func:`run_async` next starts.

    For a command about to send requests: its start-up imports an SDK and
    builds its requests, and about a tenth of that time went to collections
    that find nothing to free (modules, classes and requests live as long as
    the run). :func:`run_async` switches the collector back on, after moving
    what exists by then out of its way (:func:`gc.freeze`). Does nothing when
    the collector is already off.
    """
    global _gc_paused
    if gc.isenabled():
        gc.disable()
        _gc_paused = True


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion on a fresh event loop.

    Uses uvloop when it is installed (``pip install biasaudit[fast]``), which
    roughly halves the engine's per-request overhead. SIGTERM is handled like
    Ctrl-C: the run is cancelled, marks itself interrupted, and what arrived
    stays in the cache.

    While it runs, the cyclic garbage collector runs less often: a fan-out
    allocates many short-lived objects and almost no cycles, and the default
    thresholds spent about a tenth of its time collecting (bench/RESULTS.md).
    """
    global _gc_paused
    if _gc_paused:
        _gc_paused = False
        gc.freeze()
        gc.enable()
    thresholds = gc.get_threshold()
    gc.set_threshold(_GC_GEN0_THRESHOLD, *thresholds[1:])
    try:
        return _run(coroutine)
    finally:
        gc.set_threshold(*thresholds)


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        loop = runner.get_loop()
        main = loop.create_task(coroutine)
        # Signal handlers exist only in the main thread, and not on Windows.
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGTERM, main.cancel)
        try:
            return runner.run(_await(main))
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGTERM)


async def _await(task: asyncio.Task[T]) -> T:
    return await task


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory
