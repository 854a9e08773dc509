"""Running the async engine from synchronous code (the CLI, scripts, notebooks)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["run_async"]

T = TypeVar("T")
_GC_GEN0_THRESHOLD = 50_000


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
