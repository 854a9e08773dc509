"""A run in progress: provider, cache, engine, run directory and manifest, held together.

Every command that writes a run (``fanout``, the audits) does the same things
around the engine, and does them here: open the cache and the run directory
once the provider is resolved, keep the manifest, show progress, record one
line per response as it arrives, and mark the run ``completed``, ``aborted``
(a fatal provider error: every unanswered input is listed), ``failed`` or
``interrupted`` (Ctrl-C, SIGTERM: what arrived is in the cache). Storage that
fails mid-run (a full disk) stops it at once, ``failed``: the run directory's
reserve of space is freed so that the answers already received still go into
the cache and the manifest still records why::

    session = RunSession.open("fanout", provider, settings, runs_dir=..., cache_path=...)
    try:
        await session.send(requests, stderr=stderr, label="fanout: ")
    finally:
        await session.close()
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from biasaudit._version import __version__
from biasaudit.engine.batch import require_batch_api
from biasaudit.engine.core import Engine, EngineSettings, RequestResult
from biasaudit.engine.loop import stopping_signal
from biasaudit.engine.progress import ProgressPrinter
from biasaudit.errors import (
    BiasauditError,
    ProviderError,
    RunAbortedError,
    RunInterruptedError,
    StorageFailedError,
    UsageError,
    signal_name,
)
from biasaudit.providers import ModelRequest, Provider
from biasaudit.secrets import redact_command
from biasaudit.store.cache import ResponseCache
from biasaudit.store.runs import (
    BatchesFile,
    BatchRecord,
    Manifest,
    PromptRecord,
    PromptsHeader,
    ResponseRecord,
    RunCounts,
    RunDirectory,
    TokenUsage,
)

__all__ = ["Annotate", "RunSession", "check_requests", "finish_manifest", "response_record"]

logger = logging.getLogger(__name__)

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
    closed: bool = field(default=False, init=False)

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
        requests: Sequence[ModelRequest] = (),
        name_request: Callable[[int, ModelRequest], str] | None = None,
    ) -> RunSession:
        """Open the cache and create the run directory with its first manifest.

        Resolve ``provider`` first: a configuration error then leaves nothing
        behind and sends nothing. ``requests`` are checked against what the
        endpoint can do (logprobs, stop sequences...) before anything is
        created, each named by ``name_request(index, request)`` in the error.

        Raises
        ------
        UsageError
            A request the endpoint cannot answer, the batch API missing, or a
            cache or runs directory that cannot be used.
        """
        check_requests(provider, requests, name_request)
        if settings.batch and not settings.replay:
            require_batch_api(provider)  # before the run directory exists
        if settings.replay and not Path(cache_path).is_file():
            raise UsageError(
                f"replay: no cache at {cache_path} (a run keeps its answers in the cache of "
                "its --runs-dir, runs/cache.sqlite by default, relative to where it ran; give "
                "--runs-dir or --cache)"
            )
        # A replay writes nothing to the cache but hit counts: a read-only one will do.
        cache = (
            ResponseCache.for_reading(cache_path) if settings.replay else ResponseCache(cache_path)
        )
        try:
            if settings.replay and requests:  # a replay that cannot finish creates nothing
                Engine(provider, cache, settings).check_replay(requests)
            elif requests:  # nor does a rate that cannot finish within a day
                Engine(provider, cache, settings).check_rate(requests)
            run = RunDirectory.create(runs_dir, kind, provider.model_id)
        except BiasauditError:
            cache.close()
            raise
        manifest = Manifest(
            tool_version=__version__,
            run_id=run.run_id,
            kind=kind,
            command=redact_command(command),
            started_at=datetime.now(UTC),
            endpoint=provider.describe(),
            simulated=provider.simulated,
            settings=asdict(settings),
            cache_path=str(cache_path),
        )
        session = cls(provider, cache, Engine(provider, cache, settings), run, manifest)
        try:
            run.write_json("manifest.json", manifest)
        except OSError as error:
            run.close()
            cache.close()
            raise session._storage_failed(error) from None
        session.engine.on_batch_update = session._record_batches
        return session

    def _prompts(
        self, requests: Sequence[ModelRequest]
    ) -> tuple[PromptsHeader, list[PromptRecord]]:
        """Each request as it will be sent, with the cache key it is sent under."""
        provider = self.engine.provider
        header = PromptsHeader(
            provider=provider.name, model=provider.model, cache_scope=provider.cache_scope
        )
        records = [
            PromptRecord(
                id=request.id, replicate=request.replicate, cache_key=self.engine.key(request),
                request=request.model_dump(mode="json", exclude_none=True),
            )
            for request in requests
        ]  # fmt: skip
        return header, records

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
        try:  # the prompts as sent, before anything is sent: a run's evidence
            run.append_prompts(*self._prompts(requests))
        except OSError as error:
            raise self._storage_failed(error) from None
        progress = ProgressPrinter(lambda: self.engine.stats, stderr, label=label)
        progress.start()
        first_error: str | None = None
        try:
            async for result in self.engine.run(requests):
                if first_error is None and result.response is None and result.error:
                    first_error = result.error
                record = response_record(result)
                if annotate is not None:
                    record = record.model_copy(update=annotate(result))
                try:
                    run.append_response(record)
                except OSError as error:
                    raise self._storage_failed(error) from None
            manifest.status = "completed"
            if requests and self.engine.stats.failures >= len(requests):
                manifest.status = "failed"
                manifest.error = (
                    f"every request failed ({len(requests)}): no answer to compute a figure "
                    f"from; the first: {first_error or 'no answer'}"
                )
        except StorageFailedError as error:
            manifest.status, manifest.error = "failed", str(error)
            raise StorageFailedError(f"{error}{self._keep_what_arrived()}", str(run.path)) from None
        except RunAbortedError as error:
            manifest.status, manifest.error = "aborted", str(error.cause)
            self._record_unanswered(requests, str(error.cause))
            raise RunAbortedError(error.cause, str(run.path)) from error
        except BiasauditError as error:
            manifest.status, manifest.error = "failed", str(error)
            raise
        except (asyncio.CancelledError, KeyboardInterrupt) as error:
            signum = stopping_signal()
            manifest.status, manifest.error = "interrupted", f"interrupted ({signal_name(signum)})"
            raise RunInterruptedError(
                str(run.path), note=self._pending_batches(), signum=signum
            ) from error
        finally:
            await progress.stop()

    def fail(self, error: BaseException) -> BaseException:
        """Mark the run failed by ``error`` (unless already stopped) and return what to raise.

        A file of the run that could not be written (``OSError``: a full disk)
        becomes a :class:`~biasaudit.errors.StorageFailedError` naming it.
        """
        if isinstance(error, OSError):
            error = self._storage_failed(error)
        if self.manifest.status in ("running", "completed"):
            self.manifest.status, self.manifest.error = "failed", str(error)
        return error

    async def close(self) -> None:
        """Release the provider, write the final manifest, close the files (once)."""
        if self.closed:
            return
        self.closed = True
        self.manifest.endpoint.update(self.provider.run_report())
        try:
            await self.provider.aclose()
        finally:
            finish_manifest(self.manifest, self.engine)
            try:
                self.run.write_json("manifest.json", self.manifest)
            except OSError as error:
                self.run.release_reserve()
                try:
                    self.run.write_json("manifest.json", self.manifest)
                except OSError:
                    logger.warning("could not record the run's end in its manifest: %s", error)
            self.run.close()
            self.cache.close()

    def _storage_failed(self, error: OSError) -> StorageFailedError:
        where = error.filename or self.run.path
        return StorageFailedError(
            f"cannot write {where}: {error.strerror or error}; the run stopped sending. Free some "
            "space and run the same command again: every answer the run recorded is in the cache",
            str(self.run.path),
        )

    def _keep_what_arrived(self) -> str:
        """Store the answers received but not yet stored, in the run's reserve; say how it went."""
        held = self.cache.uncommitted
        if not held:
            return ""
        self.run.release_reserve()
        try:
            self.cache.commit()
        except BiasauditError:
            lost = self.cache.uncommitted
            return f" ({_answers(lost)} received as it stopped could not be kept)"
        return f" ({_answers(held)} received as it stopped kept in the cache)"

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


def check_requests(
    provider: Provider,
    requests: Sequence[ModelRequest],
    name_request: Callable[[int, ModelRequest], str] | None = None,
) -> None:
    """Refuse, before anything is sent or created, a request ``provider`` cannot answer.

    Raises
    ------
    UsageError
        Naming the request (``name_request``, else its id) and what it asks for.
    """
    for index, request in enumerate(requests):
        try:
            provider.check(request)
        except (ProviderError, UsageError) as error:
            where = name_request(index, request) if name_request else f"request {request.id!r}"
            raise UsageError(f"{where}: {error}") from None


def _answers(count: int) -> str:
    return "1 answer" if count == 1 else f"{count} answers"


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
        "waited_s": round(result.waited_s, 4) if result.waited_s is not None else None,
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
