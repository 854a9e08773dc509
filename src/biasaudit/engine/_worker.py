"""A fan-out worker process: ``python -m biasaudit.engine._worker``, driven by the engine.

One Python process drives one core. Past a few hundred requests a second the
SDKs' own request building, not the endpoint, limits a fan-out, so with
``workers > 1`` the engine sends one share of the uncached requests itself and
hands the others to worker processes that each run an ordinary single-process
:class:`~biasaudit.engine.core.Engine` (the parent's side: :mod:`biasaudit.engine.worker_pool`).

Protocol, one JSON object per line:

- stdin: ``{"provider": {...}}`` first (the arguments of
  :func:`~biasaudit.providers.resolve_model`: the worker builds its provider,
  importing the SDK, as soon as it reads them); then ``{"settings": {...},
  "cache": path}``, then one :class:`~biasaudit.providers.ModelRequest` per
  line, then EOF. End-of-file right after the provider means the worker is not
  needed: it exits. API keys are never sent; the worker reads them from the
  environment it inherits.
- stdout: ``{"i": n, "result": {...}, "stats": {...}}`` per request, in the
  order they complete (``n`` counts request lines from 0); or a last
  ``{"fatal": {"type": ..., "message": ...}}`` when a fatal provider error stops
  the worker. Each answer is committed to the shared cache by the worker itself
  before its line is written.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from biasaudit.engine.core import Engine, EngineSettings, RequestResult
from biasaudit.engine.loop import pause_gc_until_run, run_async
from biasaudit.engine.worker_pool import PARENT_ENV
from biasaudit.errors import BiasauditError, RunAbortedError
from biasaudit.processes import die_with_parent
from biasaudit.providers import ModelRequest, Provider, resolve_model
from biasaudit.store.cache import ResponseCache


async def serve(provider: Provider, lines: list[str], out: Any) -> None:
    header = json.loads(lines[0])
    requests = [ModelRequest.model_validate_json(line) for line in lines[1:]]
    index = {(r.id, r.replicate, r.sample): i for i, r in enumerate(requests)}
    settings = EngineSettings(**header["settings"])
    cache = ResponseCache(header["cache"]) if header["cache"] else None
    engine = Engine(provider, cache, settings)
    try:
        async for result in engine.run(requests):
            key = (result.request.id, result.request.replicate, result.request.sample)
            out.write(
                json.dumps({"i": index[key], "result": encode(result), "stats": snapshot(engine)})
                + "\n"
            )
            out.flush()
    except RunAbortedError as error:
        cause = error.cause
        out.write(
            json.dumps({"fatal": {"type": type(cause).__name__, "message": str(cause)}}) + "\n"
        )
        out.flush()
    finally:
        await provider.aclose()
        if cache is not None:
            cache.close()


def encode(result: RequestResult) -> dict[str, Any]:
    response = (
        result.response.model_dump(mode="json", exclude_defaults=True) if result.response else None
    )
    return {
        "response": response,
        "error": result.error,
        "error_type": result.error_type,
        "attempts": result.attempts,
        "latency_s": result.latency_s,
        "waited_s": result.waited_s,
    }


def snapshot(engine: Engine) -> dict[str, int]:
    stats = engine.stats
    return {
        "sent": stats.sent,
        "retries": stats.retries,
        "rate_limited": stats.rate_limited,
        "in_flight": stats.in_flight,
        "limit": stats.concurrency_limit,
        "lowest_limit": stats.lowest_concurrency_limit,
    }


def main() -> None:
    die_with_parent()
    if os.environ.get(PARENT_ENV) not in (None, str(os.getppid())):
        return  # the parent died before this worker could ask to die with it
    first = sys.stdin.readline()
    if not first:
        return
    pause_gc_until_run()  # run_async switches it back on
    try:
        provider = resolve_model(**json.loads(first)["provider"])
        # Import the SDK and build its client now, while the parent reads its
        # prompts and the cache: the requests come after.
        provider.prepare()
        lines = sys.stdin.read().splitlines()
        if lines:
            run_async(serve(provider, lines, sys.stdout))
    except BiasauditError as error:
        sys.stdout.write(
            json.dumps({"fatal": {"type": type(error).__name__, "message": str(error)}}) + "\n"
        )
    except (asyncio.CancelledError, KeyboardInterrupt):
        pass  # stopped by the engine (run over, or interrupted): answers are in the cache
    except BrokenPipeError:
        # The parent is gone (killed): nobody reads the answers, which are in the cache.
        # Stop quietly; the interpreter's last flush must not meet the broken pipe again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    main()
