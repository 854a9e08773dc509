"""A run in progress: provider, cache, engine, run directory and manifest, held together.

Every command that writes a run (``fanout``, the audits) does the same things
around the engine, and does them here: open the cache and the run directory
once the provider is resolved, keep the manifest, show progress, record one
line per response as it arrives, and mark the run ``completed``, ``aborted``
(a fatal provider error: every unanswered input is listed), ``failed`` or
``interrupted`` (Ctrl-C, SIGTERM: what arrived is in the cache)::

    session = RunSession.open("fanout", provider, settings, runs_dir=..., cache_path=...)
    try:
        await session.send(requests, stderr=stderr, label="fanout: ")
    finally:
        await session.close()
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from . import __version__
from .batch import require_batch_api
from .cache import ResponseCache
from .engine import Engine, EngineSettings, RequestResult
from .errors import BiasauditError, RunAbortedError, RunInterruptedError
from .progress import ProgressPrinter
from .providers import ModelRequest, Provider
from .runs import (
    BatchesFile,
    BatchRecord,
    Manifest,
    ResponseRecord,
    RunCounts,
    RunDirectory,
    TokenUsage,
)

__all__ = ["Annotate", "RunSession", "finish_manifest", "response_record"]

Annotate = Callable[[RequestResult], dict[str, Any]]
"""Reads one result and returns extra :class:`ResponseRecord` fields (probe, parsed answer)."""


@dataclass
class RunSession:
    """The open pieces of one run; create with :meth:`open`, end with :meth:`close`."""

    provider: Provider
    cache: ResponseCache
    engine: Engine
    run: RunDirectory
    manifest: Manifest

    @classmethod
    def open(
        cls,
        kind: str,
        provider: Provider,
        settings: EngineSettings,
        *,
        runs_dir: Path,
        cache_path: Path,
        command: Sequence[str],
    ) -> RunSession:
        """Open the cache and create the run directory with its first manifest.

        Resolve ``provider`` first: a configuration error then leaves nothing
        behind and sends nothing.
        """
        if settings.batch and not settings.replay:
            require_batch_api(provider)  # before the run directory exists
        cache = ResponseCache(cache_path)
        run = RunDirectory.create(runs_dir, kind, provider.model_id)
        manifest = Manifest(
            tool_version=__version__,
            run_id=run.run_id,
            kind=kind,
            command=list(command),
            started_at=datetime.now(UTC),
            endpoint=provider.describe(),
            simulated=provider.simulated,
            settings=asdict(settings),
            cache_path=str(cache_path),
        )
        run.write_json("manifest.json", manifest)
        session = cls(provider, cache, Engine(provider, cache, settings), run, manifest)
        session.engine.on_batch_update = session._record_batches
        return session

    def _record_batches(self, batches: list[BatchRecord]) -> None:
        """Keep ``batches.json`` and the manifest up to date: a killed run still names them."""
        self.manifest.batches = batches
        self.run.write_json("batches.json", BatchesFile(batches=batches))
        self.run.write_json("manifest.json", self.manifest)

    async def send(
        self,
        requests: Sequence[ModelRequest],
        *,
        stderr: TextIO | None = None,
        label: str = "",
        annotate: Annotate | None = None,
    ) -> None:
        """Run ``requests``, appending one response line each, and set the run's status.

        Raises
        ------
        RunAbortedError
            A fatal provider error stopped the run (naming the run directory).
        RunInterruptedError
            Ctrl-C or SIGTERM.
        """
        manifest, run = self.manifest, self.run
        progress = ProgressPrinter(lambda: self.engine.stats, stderr, label=label)
        progress.start()
        try:
            async for result in self.engine.run(requests):
                record = response_record(result)
                if annotate is not None:
                    record = record.model_copy(update=annotate(result))
                run.append_response(record)
            manifest.status = "completed"
        except RunAbortedError as error:
            manifest.status, manifest.error = "aborted", str(error.cause)
            self._record_unanswered(requests, str(error.cause))
            raise RunAbortedError(error.cause, str(run.path)) from error
        except BiasauditError as error:
            manifest.status, manifest.error = "failed", str(error)
            raise
        except (asyncio.CancelledError, KeyboardInterrupt) as error:
            manifest.status, manifest.error = "interrupted", "interrupted by the user"
            raise RunInterruptedError(str(run.path), note=self._pending_batches()) from error
        finally:
            await progress.stop()

    async def close(self) -> None:
        """Release the provider, write the final manifest, close the files."""
        self.manifest.endpoint.update(self.provider.run_report())
        try:
            await self.provider.aclose()
        finally:
            finish_manifest(self.manifest, self.engine)
            self.run.write_json("manifest.json", self.manifest)
            self.run.close()
            self.cache.close()

    def _pending_batches(self) -> str | None:
        """Says which provider batches are still pending, and that a rerun collects them."""
        batches = self.manifest.batches
        pending = [b.batch_id or b.local_id for b in batches if b.state != "collected"]
        if not pending:
            return None
        return (
            f"batch {', '.join(pending)} still pending at the provider; run the same command "
            "again to collect the answers (nothing is submitted twice)"
        )

    def _record_unanswered(self, requests: Sequence[ModelRequest], reason: str) -> None:
        """List every input the aborted run never answered, so nothing is silently lost."""
        done = _answered_ids(self.run.path / "responses.jsonl")
        for request in requests:
            if (request.id, request.replicate) not in done:
                self.engine.stats.failures += 1
                self.run.append_response(
                    ResponseRecord(
                        id=request.id,
                        replicate=request.replicate,
                        cache_key=self.engine.key(request),
                        error=f"not answered: the run stopped ({reason})",
                        error_type="RunAbortedError",
                    )
                )


def finish_manifest(manifest: Manifest, engine: Engine) -> None:
    """Copy the engine's final counts, versions and token usage into the manifest."""
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
        batched=stats.batched,
    )
    manifest.usage = TokenUsage(input_tokens=stats.input_tokens, output_tokens=stats.output_tokens)


def response_record(result: RequestResult) -> ResponseRecord:
    """The ``responses.jsonl`` line of one result."""
    response = result.response
    fields: dict[str, Any] = {
        "id": result.request.id,
        "replicate": result.request.replicate,
        "cache_key": result.key,
        "cached": result.cached,
        "attempts": result.attempts,
        "latency_s": round(result.latency_s, 4) if result.latency_s is not None else None,
        "error": result.error,
        "error_type": result.error_type,
    }
    if response is not None:
        many = len(response.texts) > 1
        fields["text"] = None if many else response.text
        fields["texts"] = list(response.texts) if many else None
        if response.logprobs is not None:
            fields["top_logprobs"] = list(response.logprobs)
        fields["finish_reason"] = response.finish_reasons[0] if response.finish_reasons else None
        fields["model_version"] = response.model_version
        fields["system_fingerprint"] = response.system_fingerprint
        fields["refusal"] = response.refusal
    return ResponseRecord(**fields)


def _answered_ids(path: Path) -> set[tuple[str, int]]:
    if not path.exists():
        return set()
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return {(row["id"], row.get("replicate", 0)) for row in rows}
