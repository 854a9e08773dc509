"""Running the async engine from synchronous code (the CLI, scripts, notebooks)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import signal
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, ParamSpec, TypeVar

__all__ = [
    "STOPPING_SIGNALS",
    "Interrupted",
    "pause_gc_until_run",
    "run_async",
    "run_in_threads",
    "stopping_signal",
    "synchronous",
]

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


P = ParamSpec("P")


def synchronous(audit: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """``audit`` (an ``async`` function) as a plain function that runs it to completion
    with :func:`run_async`, taking the same arguments and keeping its name and help: a
    kind's ``run`` made from its ``run_..._audit``."""
    import functools

    @functools.wraps(audit)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_async(audit(*args, **kwargs))

    return run


# The signals that stop a run as Ctrl-C does (SIGINT is Python's own KeyboardInterrupt):
# kill's default, and the terminal closing. Left alone where they are ignored (nohup).
STOPPING_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)
_stopped_by: list[int] = []


def stopping_signal() -> int:
    """The signal that stopped the last run: SIGTERM, SIGHUP, else SIGINT (Ctrl-C)."""
    return _stopped_by[-1] if _stopped_by else int(signal.SIGINT)


def _stop(task: asyncio.Task[Any], signum: int) -> None:
    _stopped_by.append(signum)
    task.cancel()


def _handled(signum: int) -> bool:
    """Whether to handle ``signum``: not where the process was told to ignore it."""
    return signal.getsignal(signum) is not signal.SIG_IGN


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    _stopped_by.clear()
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        loop = runner.get_loop()
        main = loop.create_task(coroutine)
        with _running_lock:
            _running[id(main)] = (loop, main)
            if _stopping.is_set():  # Ctrl-C came before this run was listed
                main.cancel()
        # Signal handlers exist only in the main thread (uvloop says so with ValueError),
        # and not on Windows.
        handled = [signum for signum in STOPPING_SIGNALS if _handled(signum)]
        for signum in handled:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, _stop, main, signum)
        try:
            return runner.run(_await(main))
        finally:
            with _running_lock:
                _running.pop(id(main), None)
            for signum in handled:
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.remove_signal_handler(signum)


_running: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = {}
_running_lock = threading.Lock()
_stopping = threading.Event()


def _cancel_running() -> None:
    """Cancel every run in progress, in whatever thread its loop runs, and any that
    starts before :func:`run_in_threads` has waited for them all."""
    with _running_lock:
        _stopping.set()
        found = list(_running.values())
    for loop, task in found:
        with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
            loop.call_soon_threadsafe(_cancel_once, task)


def _cancel_once(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` unless it is done or already cancelling (in its loop's thread): a
    second cancel would interrupt the run's own clean-up, which keeps what arrived."""
    if not task.done() and not task.cancelling():
        task.cancel()


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) during :func:`run_in_threads`: every job was cancelled;
    ``results`` holds what each returned or raised (a run's error names its directory)."""

    def __init__(self, results: list[Any]) -> None:
        super().__init__()
        self.results = results


def run_in_threads(jobs: Sequence[Callable[[], T]]) -> list[T | BaseException]:
    """Run ``jobs`` (each a whole run: it calls :func:`run_async`) at once, one thread
    and event loop each, so that one slow endpoint does not hold up the others; each
    job's result, or the exception it raised, in order.

    Ctrl-C (or SIGTERM) cancels every run as it would cancel one: each marks itself
    interrupted and keeps what arrived; then :class:`Interrupted` is raised here.
    """
    if not jobs:
        return []
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures: list[concurrent.futures.Future[T]] = []
        previous: dict[int, Any] = {}
        _stopped_by.clear()
        try:  # from the first submit: a Ctrl-C at any point cancels what started
            with contextlib.suppress(ValueError):  # not the main thread: no signal handler
                for signum in STOPPING_SIGNALS:
                    if _handled(signum):
                        previous[signum] = signal.signal(signum, _interrupt)
            _submit_all(pool, jobs, futures)
            pending = set(futures)
            while pending:  # in short waits: a signal is handled between them
                pending = concurrent.futures.wait(pending, timeout=0.25).not_done
        except KeyboardInterrupt:
            _cancel_running()
            pending = set(futures)
            while pending:  # a run the first pass missed is cancelled on the next
                pending = concurrent.futures.wait(pending, timeout=0.25).not_done
                _cancel_running()
            raise Interrupted([f.exception() or f.result() for f in futures]) from None
        finally:
            _stopping.clear()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    return [f.exception() or f.result() for f in futures]


def _interrupt(signum: int, frame: Any) -> None:
    _stopped_by.append(signum)
    raise KeyboardInterrupt


def _submit_all(
    pool: concurrent.futures.ThreadPoolExecutor,
    jobs: Sequence[Callable[[], T]],
    futures: list[concurrent.futures.Future[T]],
) -> None:
    """Submit every job, a Ctrl-C or SIGTERM held until all are: raised inside
    ``submit``, it would leave a job running whose future was never returned (and whose
    thread the pool does not yet track), which nothing would then wait for."""
    held: list[int] = []
    handlers = {}
    with contextlib.suppress(ValueError):  # not the main thread: no signal handler
        for signum in (signal.SIGINT, *STOPPING_SIGNALS):
            if callable(signal.getsignal(signum)):  # an ignored signal stays ignored
                handlers[signum] = signal.signal(signum, lambda number, _: held.append(number))
    try:
        for job in jobs:
            futures.append(pool.submit(job))
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    if held:
        if held[-1] != signal.SIGINT:
            _stopped_by.append(held[-1])
        raise KeyboardInterrupt


async def _await(task: asyncio.Task[T]) -> T:
    return await task


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory
