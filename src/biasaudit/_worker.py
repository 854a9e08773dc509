"""A fan-out worker process: ``python -m biasaudit._worker``, driven by the engine.

One Python process drives one core. Past a few hundred requests a second the
SDKs' own request building, not the endpoint, limits a fan-out, so with
``workers > 1`` the engine shares the uncached requests among worker processes
that each run an ordinary single-process :class:`~biasaudit.engine.Engine`.

Protocol, one JSON object per line:

- stdin: a header ``{"provider": {...}, "settings": {...}, "cache": path}``,
  then one :class:`~biasaudit.providers.ModelRequest` per line, then EOF. The
  provider is described by the arguments of
  :func:`~biasaudit.providers.resolve_model`; API keys are never sent, the
  worker reads them from the environment it inherits.
- stdout: ``{"i": n, "result": {...}, "stats": {...}}`` per request, in the
  order they complete (``n`` counts input lines from 0); or a last
  ``{"fatal": {"type": ..., "message": ...}}`` when a fatal provider error stops
  the worker. Each answer is committed to the shared cache by the worker itself
  before its line is written.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from .cache import ResponseCache
from .engine import Engine, EngineSettings, RequestResult
from .errors import BiasauditError, RunAbortedError
from .loop import run_async
from .providers import ModelRequest, resolve_model


async def serve(lines: list[str], out: Any) -> None:
    header = json.loads(lines[0])
    requests = [ModelRequest.model_validate_json(line) for line in lines[1:]]
    index = {(r.id, r.replicate, r.sample): i for i, r in enumerate(requests)}
    provider = resolve_model(**header["provider"])
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
    lines = sys.stdin.read().splitlines()
    try:
        run_async(serve(lines, sys.stdout))
    except BiasauditError as error:
        sys.stdout.write(
            json.dumps({"fatal": {"type": type(error).__name__, "message": str(error)}}) + "\n"
        )
    except (asyncio.CancelledError, KeyboardInterrupt):
        pass  # stopped by the engine (run over, or interrupted): answers are in the cache


if __name__ == "__main__":
    main()
