"""What every kind's ``biasaudit score`` shares: the manifest of a run whose answers
were imported (the file, its SHA-256, no request sent), and finishing it."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from biasaudit._version import __version__
from biasaudit.kinds.runspec import RunSpec
from biasaudit.secrets import redact_command
from biasaudit.store.runs import Manifest, RunDirectory, RunResult

__all__ = ["Imported", "ScoreOptions", "as_in_spec", "finish_imported", "imported_manifest"]

M = TypeVar("M")


@dataclass(frozen=True)
class Imported(RunResult, Generic[M]):
    """A finished ``biasaudit score``: its run folder, manifest and metrics (a kind may
    add the per-unit table it computed them from)."""

    metrics: M


def as_in_spec(spec: type[BaseModel], name: str) -> Any:
    """The field ``name`` of an audit's spec (its default, bounds and description), so
    that ``biasaudit score`` takes an option the audit has as ``biasaudit run`` does."""
    return spec.model_fields[name]


class ScoreOptions(BaseModel):
    """The options of every ``biasaudit score`` command (each kind adds its own)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(
        "imported", description="A name for the model the outputs came from, as reports show it."
    )
    runs_dir: Path = as_in_spec(RunSpec, "runs_dir")
    confidence: float = as_in_spec(RunSpec, "confidence")


def imported_manifest(
    run: RunDirectory,
    source: Path,
    *,
    kind: str,
    model: str,
    settings: Mapping[str, Any],
    command: Sequence[str] | None,
    rows: int,
) -> Manifest:
    """The manifest of an imported run, written at once (status ``running``)."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    manifest = Manifest(
        tool_version=__version__,
        run_id=run.run_id,
        kind=kind,
        command=redact_command(list(command if command is not None else sys.argv)),
        started_at=datetime.now(UTC),
        endpoint={
            "provider": "imported",
            "model": model,
            "source": str(source.resolve()),
            "sha256": digest,
            "rows": rows,
            "note": "scores imported with biasaudit score: no request was sent",
        },
        settings=dict(settings),
    )
    run.write_json("manifest.json", manifest)
    return manifest


def finish_imported(run: RunDirectory, manifest: Manifest) -> None:
    ended = datetime.now(UTC)
    run.write_json(
        "manifest.json",
        manifest.model_copy(
            update={
                "status": "completed",
                "ended_at": ended,
                "duration_s": (ended - manifest.started_at).total_seconds(),
            }
        ),
    )
