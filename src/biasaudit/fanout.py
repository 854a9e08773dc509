"""``biasaudit fanout``: send a file of prompts to a model and keep every answer.

The command-line face of the engine; audits use the same pieces from Python.
Input is JSONL, one request per line::

    {"id": "q1", "messages": [{"role": "user", "content": "..."}], "params": {"logprobs": true}}
    {"id": "q2", "prompt": "The nurse said that", "params": {"max_tokens": 1, "logprobs": 5}}
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from pydantic import ValidationError

from . import __version__
from .cache import ResponseCache
from .engine import Engine, EngineSettings, RequestResult
from .errors import BiasauditError, InputError, RunAbortedError, RunInterruptedError, UsageError
from .loop import run_async
from .progress import ProgressPrinter
from .providers import ModelRequest, Provider, resolve_model
from .runs import Manifest, ResponseRecord, RunCounts, RunDirectory, TokenUsage

__all__ = ["FanoutOptions", "FanoutResult", "fanout", "read_prompts", "run_fanout"]


@dataclass(frozen=True)
class FanoutOptions:
    """Everything ``biasaudit fanout`` takes besides the input file."""

    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int = 16
    rpm: float | None = None
    max_retries: int = 6
    timeout: float = 60.0
    runs_dir: Path = Path("runs")
    cache_path: Path | None = None
    replay: bool = False
    workers: int = 1
    command: Sequence[str] = field(default_factory=lambda: list(sys.argv))

    @property
    def resolved_cache_path(self) -> Path:
        return self.cache_path or Path(self.runs_dir) / "cache.sqlite"

    def engine_settings(self) -> EngineSettings:
        return EngineSettings(
            concurrency=self.concurrency,
            rpm=self.rpm,
            max_retries=self.max_retries,
            timeout=self.timeout,
            replay=self.replay,
            workers=self.workers,
        )


@dataclass(frozen=True)
class FanoutResult:
    run_dir: Path
    manifest: Manifest

    @property
    def exit_code(self) -> int:
        """0 when every prompt got an answer, 1 when some did not."""
        counts = self.manifest.counts
        return 0 if self.manifest.status == "completed" and counts.failures == 0 else 1


def read_prompts(path: str | Path) -> list[ModelRequest]:
    """Parse a prompts JSONL file, naming the line and field of the first problem.

    Raises
    ------
    InputError
        A line that is not JSON, not an object, misses ``id`` or an input,
        has a bad parameter, or repeats an (``id``, ``replicate``) pair.
    """
    requests: list[ModelRequest] = []
    seen: dict[tuple[str, int], int] = {}
    name = str(path)
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115
    except OSError as error:
        raise UsageError(f"cannot read {name}: {error.strerror}") from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            request = _parse_line(name, number, line)
            pair = (request.id, request.replicate)
            if pair in seen:
                raise InputError(
                    name, number, "id", f"id {request.id!r} with replicate {request.replicate} "
                    f"already appears on line {seen[pair]}"
                )
            seen[pair] = number
            requests.append(request)
    if not requests:
        raise UsageError(f"{name} holds no prompts")
    return requests


def _parse_line(name: str, number: int, line: str) -> ModelRequest:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as error:
        raise InputError(name, number, None, f"not valid JSON ({error.msg})") from None
    if not isinstance(data, dict):
        raise InputError(name, number, None, "each line must be a JSON object")
    if isinstance(data.get("id"), int):
        data["id"] = str(data["id"])
    try:
        return ModelRequest.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or None
        problem = str(first["msg"]).removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            problem = "unknown field (allowed: id, messages, prompt, params, replicate)"
        if first["type"] == "missing":
            problem = "required"
        raise InputError(name, number, where, problem) from None


def fanout(input_path: str | Path, options: FanoutOptions, *, stderr: TextIO | None = None) -> FanoutResult:
    """Read prompts from ``input_path`` and run them; see :func:`run_fanout`."""
    requests = read_prompts(input_path)
    return run_async(
        run_fanout(requests, options, stderr=stderr, input_path=Path(input_path))
    )


async def run_fanout(
    requests: Sequence[ModelRequest],
    options: FanoutOptions,
    *,
    stderr: TextIO | None = None,
    input_path: Path | None = None,
) -> FanoutResult:
    """Send ``requests`` to ``options.model`` and write a run directory.

    The provider (and its API key) is resolved before the run directory exists,
    so a configuration error leaves nothing behind and sends nothing. Interrupts
    (Ctrl-C, SIGTERM) mark the run ``interrupted`` and re-raise; what arrived is
    already in the cache.
    """
    provider = resolve_model(
        options.model,
        base_url=options.base_url,
        api_key_env=options.api_key_env,
        max_connections=options.concurrency,
        need_key=not options.replay,
    )
    settings = options.engine_settings()
    cache = ResponseCache(options.resolved_cache_path)
    run = RunDirectory.create(options.runs_dir, "fanout", provider.model_id)
    manifest = _start_manifest(run, provider, options, settings)
    run.write_json("manifest.json", manifest)
    run.write_json("spec.json", _spec(options, input_path))
    run.write_lines(
        "inputs.jsonl",
        [r.model_dump(mode="json", exclude_none=True, exclude_defaults=True) for r in requests],
    )
    engine = Engine(provider, cache, settings)
    progress = ProgressPrinter(lambda: engine.stats, stderr, label="fanout: ")
    progress.start()
    try:
        async for result in engine.run(requests):
            run.append_response(_record(result))
        manifest.status = "completed"
    except RunAbortedError as error:
        manifest.status, manifest.error = "aborted", str(error.cause)
        _record_unanswered(run, engine, requests, str(error.cause))
        raise RunAbortedError(error.cause, str(run.path)) from error
    except BiasauditError as error:
        manifest.status, manifest.error = "failed", str(error)
        raise
    except (asyncio.CancelledError, KeyboardInterrupt) as error:
        manifest.status, manifest.error = "interrupted", "interrupted by the user"
        raise RunInterruptedError(str(run.path)) from error
    finally:
        await progress.stop()
        await provider.aclose()
        _finish_manifest(manifest, engine)
        run.write_json("manifest.json", manifest)
        run.close()
        cache.close()
    return FanoutResult(run.path, manifest)


def _start_manifest(
    run: RunDirectory, provider: Provider, options: FanoutOptions, settings: EngineSettings
) -> Manifest:
    return Manifest(
        tool_version=__version__,
        run_id=run.run_id,
        kind="fanout",
        command=list(options.command),
        started_at=datetime.now(UTC),
        endpoint=provider.describe(),
        simulated=provider.simulated,
        settings=asdict(settings),
        cache_path=str(options.resolved_cache_path),
    )


def _finish_manifest(manifest: Manifest, engine: Engine) -> None:
    stats = engine.stats
    manifest.ended_at = datetime.now(UTC)
    manifest.duration_s = round((manifest.ended_at - manifest.started_at).total_seconds(), 3)
    manifest.model_versions = dict(stats.model_versions)
    manifest.system_fingerprints = dict(stats.system_fingerprints)
    manifest.counts = RunCounts(
        requests=stats.total,
        sent=stats.sent,
        cache_hits=stats.cache_hits,
        retries=stats.retries,
        failures=stats.failures,
        refusals=stats.refusals,
        rate_limited=stats.rate_limited,
    )
    manifest.usage = TokenUsage(input_tokens=stats.input_tokens, output_tokens=stats.output_tokens)


def _spec(options: FanoutOptions, input_path: Path | None) -> dict[str, object]:
    spec: dict[str, object] = {
        "model": options.model,
        "base_url": options.base_url,
        "api_key_env": options.api_key_env,  # the variable's name, never its value
        "settings": asdict(options.engine_settings()),
        "runs_dir": str(options.runs_dir),
        "cache_path": str(options.resolved_cache_path),
    }
    if input_path is not None:
        spec["input"] = str(input_path)
        spec["input_sha256"] = hashlib.sha256(input_path.read_bytes()).hexdigest()
    return spec


def _record(result: RequestResult) -> ResponseRecord:
    response = result.response
    record = ResponseRecord(
        id=result.request.id,
        replicate=result.request.replicate,
        cache_key=result.key,
        cached=result.cached,
        attempts=result.attempts,
        latency_s=round(result.latency_s, 4) if result.latency_s is not None else None,
        error=result.error,
        error_type=result.error_type,
    )
    if response is None:
        return record
    many = len(response.texts) > 1
    return record.model_copy(
        update={
            "text": None if many else response.text,
            "texts": list(response.texts) if many else None,
            "top_logprobs": list(response.logprobs) if response.logprobs is not None else None,
            "finish_reason": response.finish_reasons[0] if response.finish_reasons else None,
            "model_version": response.model_version,
            "system_fingerprint": response.system_fingerprint,
            "refusal": response.refusal,
        }
    )


def _record_unanswered(
    run: RunDirectory, engine: Engine, requests: Sequence[ModelRequest], reason: str
) -> None:
    """List every input the aborted run never answered, so nothing is silently lost."""
    done = _answered_ids(run.path / "responses.jsonl")
    for request in requests:
        if (request.id, request.replicate) not in done:
            engine.stats.failures += 1
            run.append_response(
                ResponseRecord(
                    id=request.id,
                    replicate=request.replicate,
                    cache_key=engine.key(request),
                    error=f"not answered: the run stopped ({reason})",
                    error_type="RunAbortedError",
                )
            )


def _answered_ids(path: Path) -> set[tuple[str, int]]:
    if not path.exists():
        return set()
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return {(row["id"], row.get("replicate", 0)) for row in rows}
