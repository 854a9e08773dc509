"""The parent's side of fan-out worker processes (the worker: :mod:`biasaudit.engine._worker`).

With ``workers = N`` the engine sends a share of the uncached requests itself
and hands the other ``N - 1`` shares to child processes. A child spends about
half a second importing biasaudit and its provider's SDK before it can send
anything, so the CLI starts its children as early as it can
(:func:`prestart`, before the parent has imported the SDK or read its prompts):
their imports then run on another core while the parent does its own start-up,
and the engine (:func:`take`) finds them ready.

A child is told its provider first (one line: it builds the provider, which
imports the SDK, at once) and its settings, cache and requests later. A child
that is never used reads end-of-file when its parent closes the pipe or exits,
and exits without sending anything.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import math
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import IO, Any

__all__ = [
    "PARENT_ENV",
    "ChildExited",
    "WorkerProcess",
    "prestart",
    "prestart_for",
    "take",
    "worker_provider_spec",
]

# One result line can be long (many choices with logprobs).
_LINE_LIMIT = 1 << 24
PARENT_ENV = "BIASAUDIT_PARENT_PID"
"""Set for a worker: the pid of the process that started it (see :func:`die_with_parent`)."""

_prestarted: list[WorkerProcess] = []


class ChildExited(Exception):
    """A child stopped before answering all its requests (killed, out of memory, a crash)."""

    def __init__(self, slot: int, code: int) -> None:
        super().__init__(f"fan-out worker {slot} exited with status {code}")
        self.slot, self.code = slot, code


def worker_provider_spec(provider_spec: dict[str, Any], concurrency: int) -> dict[str, Any]:
    """How a child builds its provider: ``resolve_model`` arguments, with its connection pool."""
    return {**provider_spec, "max_connections": concurrency}


class WorkerProcess:
    """One child ``python -m biasaudit.engine._worker``, told its provider as soon as it starts."""

    def __init__(self, provider: dict[str, Any]) -> None:
        self.provider = provider
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "biasaudit.engine._worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, PARENT_ENV: str(os.getpid())},
        )
        stdin = self._stdin
        # A few hundred bytes: the pipe takes them without waiting for the child.
        stdin.write((json.dumps({"provider": provider}) + "\n").encode())
        stdin.flush()

    @property
    def _stdin(self) -> IO[bytes]:
        assert self.popen.stdin is not None
        return self.popen.stdin

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    async def talk(
        self,
        slot: int,
        header: dict[str, Any],
        request_lines: Sequence[bytes],
        lines: asyncio.Queue[tuple[int, Any] | BaseException],
    ) -> None:
        """Send the rest of the work, then pass each line the child answers to ``lines``.

        The requests are written from a thread: a child still importing reads
        nothing yet, and the parent's event loop must not wait for it.
        """
        payload = b"".join([(json.dumps(header) + "\n").encode(), *request_lines])
        writing = asyncio.create_task(asyncio.to_thread(self._write_and_close, payload))
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=_LINE_LIMIT)
        assert self.popen.stdout is not None
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), self.popen.stdout
        )
        answered = 0
        try:
            async for raw in reader:
                line = json.loads(raw)
                answered += "i" in line
                lines.put_nowait((slot, line))
            await writing
        finally:
            transport.close()
        code = await asyncio.to_thread(self.popen.wait)
        if answered < len(request_lines) and code != 0:
            lines.put_nowait((slot, ChildExited(slot, code)))

    def _write_and_close(self, payload: bytes) -> None:
        stdin = self._stdin
        with contextlib.suppress(BrokenPipeError):  # the child died: talk() reports it
            stdin.write(payload)
            stdin.close()

    def close(self) -> None:
        """Let an unused child go: it reads end-of-file and exits."""
        self._close_pipes()

    async def stop(self) -> None:
        """End the child (the run is over or was stopped) and reap it."""
        if self.popen.returncode is None and self.popen.poll() is None:
            self.popen.terminate()
        self._close_pipes()
        await asyncio.to_thread(self.popen.wait)

    def _close_pipes(self) -> None:
        for pipe in (self.popen.stdin, self.popen.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def prestart(provider: dict[str, Any], count: int) -> None:
    """Start ``count`` children for ``provider`` now, for :func:`take` to find later.

    Costs nothing but a little CPU if they go unused (a run the cache answers,
    an error before the run): each exits when its pipe closes.
    """
    if not _prestarted:
        atexit.register(_close_unused)
    _prestarted.extend(WorkerProcess(provider) for _ in range(count))


def prestart_for(
    model_id: str,
    base_url: str | Sequence[str] | None,
    api_key_env: str | None,
    *,
    concurrency: int,
    workers: int,
    headers: dict[str, str] | None = None,
) -> None:
    """Start the children a run with these options will ask for, if it asks for any.

    Replicas (several base URLs) and ``local/`` models run in one process, so
    nothing is started for them; nor for one worker.
    """
    if workers < 2 or model_id.startswith("local/"):
        return
    if base_url is not None and not isinstance(base_url, str):
        return
    from biasaudit.providers import provider_spec

    share = max(1, math.ceil(concurrency / workers))
    spec = worker_provider_spec(provider_spec(model_id, base_url, api_key_env, headers), share)
    prestart(spec, workers - 1)


def take(provider: dict[str, Any], count: int) -> list[WorkerProcess]:
    """``count`` children for ``provider``: the pre-started ones that match first, then new ones."""
    taken: list[WorkerProcess] = []
    for child in list(_prestarted):
        if len(taken) < count and child.provider == provider and child.alive:
            _prestarted.remove(child)
            taken.append(child)
    _close_unused()  # started for something else (or dead): not worth keeping
    return taken + [WorkerProcess(provider) for _ in range(count - len(taken))]


def _close_unused() -> None:
    for child in _prestarted:
        child.close()
    _prestarted.clear()
