"""Run directories: the unit a user keeps, replays, reports on and compares.

``runs/<run-id>/`` holds

- ``manifest.json`` — :class:`Manifest`: what ran, when, against which endpoint
  and reported model versions, with request / cache-hit / retry / failure counts
  and token usage. Written when the run starts and rewritten when it ends.
- ``responses.jsonl`` — one :class:`ResponseRecord` per input, appended and
  flushed as each arrives.
- ``inputs.jsonl`` — the resolved requests, so the run can be replayed.
- ``spec.json`` — the resolved options of the command.
- ``batches.json`` — :class:`BatchesFile`, ``--batch`` runs only: the provider
  batches submitted or picked up, with their ids, status and counts.

Every artifact is a versioned pydantic model; ``SCHEMA_VERSION`` goes up
whenever a shape changes (ARCHITECTURE.md, "Run files and their versions", lists
each version). Older files keep reading (what they lack has a default); a file of a
newer version than this biasaudit knows is refused by name (:func:`check_version`).
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError

from biasaudit.errors import StorageFailedError, StorageUnusableError, UsageError
from biasaudit.providers import FirstTokenLogprobs
from biasaudit.store.files import write_text

__all__ = [
    "PROMPTS_FILE",
    "SCHEMA_VERSION",
    "BatchRecord",
    "BatchesFile",
    "Manifest",
    "PromptRecord",
    "PromptsHeader",
    "ResponseRecord",
    "RunCounts",
    "RunDirectory",
    "RunResult",
    "TokenUsage",
    "check_version",
    "damaged_file",
    "file_problem",
    "prompt_sent",
    "read_prompts",
    "read_run_json",
    "read_run_model",
]

SCHEMA_VERSION = 2
RunStatus = Literal["running", "completed", "failed", "aborted", "interrupted"]
# Disk space a run sets aside as it starts (the hidden file ``.reserve``), freed when
# storage fails so the answers already received and the final manifest still fit.
RESERVE_BYTES = 1 << 20
M = TypeVar("M", bound=BaseModel)


class RunCounts(BaseModel):
    """How the requests of a run went."""

    requests: int = Field(0, description="Input requests in the run.")
    sent: int = Field(0, description="HTTP requests sent, retries included.")
    cache_hits: int = Field(0, description="Inputs answered from the cache, at no cost.")
    retries: int = Field(0, description="Attempts after the first one of a request.")
    failures: int = Field(0, description="Inputs with no answer after all retries.")
    refusals: int = Field(
        0, description="Inputs the model refused to answer (cached and replayed like answers)."
    )
    rate_limited: int = Field(0, description="Rate-limit answers (429/529) met.")
    batched: int = Field(0, description="Inputs answered through a provider batch (--batch).")


class TokenUsage(BaseModel):
    """Tokens the endpoint reported for the requests sent in this run (not cache hits)."""

    input_tokens: int = 0
    output_tokens: int = 0


BatchRunState = Literal["submitting", "submitted", "ended", "collected"]


class BatchRecord(BaseModel):
    """One provider batch of a ``--batch`` run, as ``batches.json`` and the manifest list it."""

    local_id: str = Field(description="biasaudit's id of the batch (OpenAI: in its metadata).")
    provider: str = Field(description="Whose batch API: 'openai' or 'anthropic'.")
    model: str = Field(description="provider/model.")
    endpoint: str = Field(description="The endpoint every entry of the batch goes to.")
    batch_id: str | None = Field(
        None, description="The provider's batch id; None until the provider has created it."
    )
    state: BatchRunState = Field(
        description="submitting (recorded, not yet created), submitted, ended (results "
        "ready), collected (answers in the cache)."
    )
    status: str = Field(description="The provider's last word on the batch.")
    requests: int = Field(description="Entries in the batch.")
    counts: dict[str, int] = Field(
        default_factory=dict,
        description="Entries by outcome (total, processing, succeeded, errored, expired, "
        "canceled), as the provider last counted them.",
    )
    failed_entries: int = Field(
        0, description="Entries without an answer in the batch, sent again directly."
    )
    resumed: bool = Field(False, description="Submitted by an earlier, stopped run.")
    created_at: datetime = Field(description="When biasaudit recorded the batch.")


class BatchesFile(BaseModel):
    """``batches.json``: the provider batches a ``--batch`` run submitted or picked up."""

    schema_version: int = SCHEMA_VERSION
    batches: list[BatchRecord] = Field(default_factory=list)


class Manifest(BaseModel):
    """The header of a run: everything about it except the per-request lines."""

    schema_version: int = SCHEMA_VERSION
    tool_version: str
    run_id: str
    kind: str = Field(description="What wrote the run, e.g. 'fanout'.")
    command: list[str] = Field(description="The command line, as typed (keys never are).")
    status: RunStatus = "running"
    started_at: datetime
    ended_at: datetime | None = None
    duration_s: float | None = None
    endpoint: dict[str, Any] = Field(description="Provider, model, base URL, capabilities.")
    simulated: bool = Field(False, description="True for sim/ models: not a real model.")
    model_versions: dict[str, int] = Field(
        default_factory=dict, description="Model versions the endpoint reported, with counts."
    )
    system_fingerprints: dict[str, int] = Field(default_factory=dict)
    counts: RunCounts = RunCounts()
    usage: TokenUsage = TokenUsage()
    settings: dict[str, Any] = Field(default_factory=dict, description="Limits and retry settings.")
    cache_path: str | None = None
    error: str | None = Field(None, description="Why the run stopped early, if it did.")
    replay_of: str | None = Field(
        None, description="The run this one replayed from the cache ('biasaudit replay')."
    )
    batches: list[BatchRecord] = Field(
        default_factory=list, description="Provider batches of a --batch run (batches.json)."
    )


class ResponseRecord(BaseModel):
    """One line of ``responses.jsonl``: the outcome of one input."""

    id: str
    replicate: int = 0
    cache_key: str
    text: str | None = None
    texts: list[str] | None = Field(None, description="All choices when more than one.")
    top_logprobs: list[FirstTokenLogprobs | None] | None = Field(
        None, description="First-token log-probabilities per choice, when requested."
    )
    finish_reason: str | None = None
    model_version: str | None = None
    system_fingerprint: str | None = None
    cached: bool = False
    attempts: int = 0
    latency_s: float | None = Field(
        None, description="Seconds the answering attempt took, from sending to the last byte."
    )
    waited_s: float | None = Field(
        None,
        description="Seconds before that attempt: waiting for --rpm / --tpm, failed attempts "
        "and their backoff.",
    )
    refusal: str | None = None
    error: str | None = None
    error_type: str | None = None
    probe: str | None = Field(None, description="Audits: 'pointwise' or 'pairwise'.")
    scoring_path: str | None = Field(
        None, description="Pointwise: 'logprobs' or 'samples', how the label probabilities came."
    )
    parsed: str | None = Field(
        None, description="The answer as read: a label, or 'first'/'second'/'tie' (pairwise)."
    )
    label_probabilities: dict[str, float] | None = Field(
        None, description="Pointwise: label probabilities normalised over the label set."
    )
    irregular: int | None = Field(None, description="Answers outside the label set.")


@dataclass(frozen=True)
class RunResult:
    """A finished run: where its directory is, and its manifest."""

    run_dir: Path
    manifest: Manifest

    @property
    def exit_code(self) -> int:
        """0 when every request got an answer, 1 when some did not."""
        counts = self.manifest.counts
        return 0 if self.manifest.status == "completed" and counts.failures == 0 else 1


def new_run_id(kind: str, model_id: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    slug = "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in model_id)[:60]
    return f"{stamp}-{kind}-{slug}-{secrets.token_hex(2)}"


class RunDirectory:
    """A run directory being written. Create it with :meth:`create`.

    It holds a reserve of disk space (``.reserve``, :data:`RESERVE_BYTES`) while
    it is open: when the disk fills up, :meth:`release_reserve` makes room for
    what must still be written (the answers already received, the manifest).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._responses: IO[str] | None = None

    @classmethod
    def create(cls, runs_dir: str | Path, kind: str, model_id: str) -> RunDirectory:
        """Make a new run directory with its reserve of space.

        Raises
        ------
        StorageUnusableError
            ``runs_dir`` cannot be written (read-only, no permission).
        StorageFailedError
            The disk has no room for the reserve: a run could not keep what it
            is paid for.
        """
        run_id = new_run_id(kind, model_id)
        path = Path(runs_dir) / run_id
        try:
            path.mkdir(parents=True, exist_ok=False)
        except OSError as error:
            raise StorageUnusableError(
                f"cannot create a run directory in {runs_dir}: {error.strerror}; "
                "give --runs-dir a folder that may be written"
            ) from None
        run = cls(path)
        try:
            _allocate(path / ".reserve", RESERVE_BYTES)
        except OSError as error:
            shutil.rmtree(path, ignore_errors=True)
            raise StorageFailedError(
                f"no room to start a run in {runs_dir} ({error.strerror}): a run sets "
                f"{RESERVE_BYTES >> 20} MiB aside to keep what it is paid for; free some space"
            ) from None
        return run

    def remove(self) -> None:
        """Delete the run directory (a run that recorded nothing worth keeping)."""
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)

    def release_reserve(self) -> bool:
        """Free the space set aside; whether there was any to free."""
        try:
            (self.path / ".reserve").unlink()
        except FileNotFoundError:
            return False
        return True

    @property
    def run_id(self) -> str:
        return self.path.name

    def write_json(self, name: str, data: Any) -> None:
        """Write ``name`` atomically: a crash never leaves half a file."""
        text = (
            data.model_dump_json(indent=2)
            if isinstance(data, BaseModel)
            else json.dumps(data, indent=2, ensure_ascii=False, default=str)
        )
        write_text(self.path / name, text + "\n")

    def append_prompts(self, header: PromptsHeader, records: list[PromptRecord]) -> None:
        """Append ``records`` to ``prompts.jsonl.gz`` (a gzip member each call; the header
        first, once), before they are sent."""
        import gzip

        path = self.path / PROMPTS_FILE
        lines = [] if path.exists() else [header.model_dump_json()]
        lines += [record.model_dump_json() for record in records]
        with gzip.open(path, "at", encoding="utf-8", compresslevel=6) as handle:
            handle.write("".join(line + "\n" for line in lines))

    def write_lines(self, name: str, rows: list[BaseModel] | list[dict[str, Any]]) -> None:
        with open(self.path / name, "w", encoding="utf-8") as handle:
            for row in rows:
                line = (
                    row.model_dump_json(exclude_none=True)
                    if isinstance(row, BaseModel)
                    else (json.dumps(row, ensure_ascii=False))
                )
                handle.write(line + "\n")

    def append_response(self, record: ResponseRecord) -> None:
        if self._responses is None:
            self._responses = open(self.path / "responses.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._responses.write(record.model_dump_json(exclude_none=True) + "\n")
        self._responses.flush()

    def close(self) -> None:
        try:
            if self._responses is not None:
                self._responses.close()
        finally:
            self._responses = None
            self.release_reserve()


def _allocate(path: Path, size: int) -> None:
    """A file of ``size`` bytes whose blocks are really on the disk (not a sparse file)."""
    with open(path, "wb") as handle:
        try:
            os.posix_fallocate(handle.fileno(), 0, size)
            return
        except (AttributeError, OSError) as error:  # no fallocate here, or not on this disk
            if isinstance(error, OSError) and error.errno == errno.ENOSPC:
                raise
        handle.write(bytes(size))
        handle.flush()
        os.fsync(handle.fileno())


def check_version(text: str, known: int, path: Path) -> None:
    """Refuse a run file (JSON ``text``) whose ``schema_version`` is newer than ``known``,
    the newest this biasaudit writes: it cannot tell what such a file means.

    Raises
    ------
    UsageError
        The file's ``schema_version`` is above ``known``.
    """
    try:
        found = json.loads(text).get("schema_version")
    except (ValueError, AttributeError):
        return  # not JSON, or not an object: the model's own check names it
    if isinstance(found, int) and found > known:
        raise UsageError(
            f"{path} was written by a newer biasaudit (schema_version {found}; this one "
            f"reads up to {known}): upgrade biasaudit to read it"
        )


def damaged_file(path: Path, problem: str) -> UsageError:
    """The error for a run file (``path``) that is there but cannot be read, with the
    way to get it back: a run's other files are rebuilt from the cache by replay, which
    reads the ``spec.json`` and ``rounds.json`` (so those are restored from a copy); a
    study's or a comparison's file is written again by its command."""
    if path.name in ("study.json", "compare.json"):
        command = path.name.removesuffix(".json")
        fix = f"`biasaudit {command}` on its runs writes it again"
    elif path.name in ("spec.json", "rounds.json"):
        fix = "it records what the run asked, and replay needs it: restore it from a copy"
    else:
        fix = (
            f"`biasaudit replay {path.parent}` writes the run again from the cache, in a new folder"
        )
    return UsageError(f"{path} is damaged ({problem}); {fix}")


def file_problem(error: ValidationError) -> str:
    """The first thing wrong with a file pydantic read, in words."""
    first = error.errors()[0]
    if first["type"] == "json_invalid":
        return "not JSON: cut short, or edited"
    if first["type"] == "model_type" and not first["loc"]:
        return "not a JSON object"
    where = ".".join(str(part) for part in first["loc"])
    return f"field '{where}': {first['msg']}" if where else str(first["msg"])


def _run_text(path: Path) -> str | None:
    """The text of run file ``path``, or None where there is none (a file that cannot
    be read, or is not UTF-8, is named as damaged)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise damaged_file(path, str(error.strerror)) from None
    except UnicodeDecodeError:
        raise damaged_file(path, "not UTF-8 text") from None


def read_run_json(path: Path) -> dict[str, Any]:
    """The JSON object in run file ``path`` (``spec.json``), or ``{}`` where there is none.

    Raises
    ------
    UsageError
        The file is there but cannot be read, or holds no JSON object (named, with the
        way to get it back: :func:`damaged_file`).
    """
    text = _run_text(path)
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        raise damaged_file(path, "not JSON: cut short, or edited") from None
    if not isinstance(data, dict):
        raise damaged_file(path, f"a JSON {type(data).__name__}, not an object")
    return data


def read_run_model(path: Path, model: type[M]) -> M:
    """Run file ``path`` (``metrics.json``, ``rounds.json``) as ``model``.

    Raises
    ------
    UsageError
        The file is missing (naming it), newer than this biasaudit reads
        (:func:`check_version`), or damaged (:func:`damaged_file`).
    """
    text = _run_text(path)
    if text is None:
        raise UsageError(f"{path} is missing")
    version = model.model_fields.get("schema_version")
    if version is not None and isinstance(version.default, int):
        check_version(text, version.default, path)
    try:
        return model.model_validate_json(text)
    except ValidationError as error:
        raise damaged_file(path, file_problem(error)) from None


def read_manifest(run_dir: str | Path) -> Manifest:
    """The manifest of ``run_dir``.

    Raises
    ------
    UsageError
        ``run_dir`` is not a run directory: no ``manifest.json``, or one that
        cannot be read (truncated, not a manifest).
    """
    path = Path(run_dir, "manifest.json")
    try:
        text = path.read_text(encoding="utf-8")
        check_version(text, SCHEMA_VERSION, path)
        return Manifest.model_validate_json(text)
    except FileNotFoundError:
        raise UsageError(f"{run_dir} is not a run directory (no manifest.json)") from None
    except (OSError, ValueError) as error:
        problem = error.strerror if isinstance(error, OSError) else "truncated or not a manifest"
        raise UsageError(
            f"{run_dir} is not a run directory (its manifest.json cannot be read: {problem})"
        ) from None


PROMPTS_FILE = "prompts.jsonl.gz"
"""Every request of a run as it was sent (gzip-compressed JSON lines): a header line
naming the endpoint the cache keys were made for, then one line a request."""


class PromptsHeader(BaseModel):
    """The first line of ``prompts.jsonl.gz``: what, besides a request, its cache key
    was made of (``ModelRequest.cache_key``)."""

    provider: str
    model: str
    cache_scope: str | None = Field(
        None, description="The endpoint's identity in the key: its URL without credentials."
    )


class PromptRecord(BaseModel):
    """One request as sent, with the cache key it was sent (and cached) under."""

    id: str
    replicate: int = 0
    cache_key: str
    request: dict[str, Any] = Field(
        description="The request: its messages (or prompt), parameters, replicate."
    )


def read_prompts(run_dir: str | Path) -> tuple[PromptsHeader, dict[tuple[str, int], PromptRecord]]:
    """The requests a run sent, by (id, replicate), and their header.

    Raises
    ------
    OSError
        No such file (a run made before biasaudit recorded its prompts, or an import).
    UsageError
        The file is damaged (cut short, edited), named.
    """
    import gzip
    import zlib

    path = Path(run_dir, PROMPTS_FILE)
    number = 0
    header: PromptsHeader | None = None
    found: dict[tuple[str, int], PromptRecord] = {}
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):  # noqa: B007 (read below)
                if not line.strip():
                    continue
                if header is None:
                    header = PromptsHeader.model_validate_json(line)
                    continue
                record = PromptRecord.model_validate_json(line)
                found[(record.id, record.replicate)] = record
    except ValidationError as error:
        raise damaged_file(path, f"line {number}: {file_problem(error)}") from None
    except (EOFError, gzip.BadGzipFile, zlib.error):
        raise damaged_file(path, f"after line {number}: cut short or not gzip") from None
    except UnicodeDecodeError:
        raise damaged_file(path, f"after line {number}: not UTF-8 text") from None
    if header is None:
        raise damaged_file(path, "empty: no header line")
    return header, found


def prompt_sent(header: PromptsHeader, record: PromptRecord) -> bool:
    """Whether ``record``'s request is the one its cache key was made from: the text as
    recorded, unedited (``ModelRequest.cache_key`` over it and the header's endpoint)."""
    from biasaudit.providers import ModelRequest

    try:
        request = ModelRequest.model_validate(record.request)
    except ValidationError:
        return False
    key = request.cache_key(
        provider=header.provider, model=header.model, base_url=header.cache_scope
    )
    return key == record.cache_key


def read_responses(run_dir: str | Path) -> list[ResponseRecord]:
    """Every answer ``responses.jsonl`` records.

    Raises
    ------
    OSError
        The file cannot be opened (missing).
    UsageError
        A line is not a response record (cut short, edited), named by its number.
    """
    path = Path(run_dir, "responses.jsonl")
    records = []
    number = 0
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):  # noqa: B007 (read below)
                if line.strip():
                    records.append(ResponseRecord.model_validate_json(line))
    except ValidationError as error:
        raise damaged_file(path, f"line {number}: {file_problem(error)}") from None
    except UnicodeDecodeError:
        raise damaged_file(path, f"after line {number}: not UTF-8 text") from None
    return records
