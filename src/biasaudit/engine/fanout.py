"""``biasaudit fanout``: send a file of prompts to a model and keep every answer.

The command-line face of the engine; audits use the same pieces from Python.
Input is JSONL, one request per line::

    {"id": "q1", "messages": [{"role": "user", "content": "..."}], "params": {"logprobs": true}}
    {"id": "q2", "prompt": "The nurse said that", "params": {"max_tokens": 1, "logprobs": 5}}
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, TextIO

from pydantic import Field, ValidationError, model_validator

from biasaudit.engine.loop import run_async
from biasaudit.engine.options import Flag, RunOptions
from biasaudit.engine.session import RunSession
from biasaudit.errors import BiasauditError, InputError, UsageError
from biasaudit.providers import ModelRequest
from biasaudit.secrets import public_headers, redact_urls
from biasaudit.store.runs import RunResult
from biasaudit.textfiles import MOST_PROMPT_CHARS, brief, json_object, label_problem, text_lines

__all__ = ["FanoutOptions", "FanoutResult", "fanout", "read_prompts", "run_fanout"]


class FanoutOptions(RunOptions):
    """Everything ``biasaudit fanout`` takes besides the input file: the
    :class:`~biasaudit.engine.options.RunOptions` and the command recorded."""

    command: Annotated[Sequence[str], Flag(command_line=False)] = Field(
        default_factory=lambda: list(sys.argv)
    )

    @model_validator(mode="before")
    @classmethod
    def _cache_path(cls, data: Any) -> Any:
        # ``cache_path=`` is the name this option had before it was shared with specs.
        if isinstance(data, dict) and "cache_path" in data:
            data = dict(data)
            data["cache"] = data.pop("cache_path")
        return data

    @model_validator(mode="after")
    def _one_model(self) -> FanoutOptions:
        if self.models:
            raise ValueError(
                "a fan-out sends to one model: run it once per model (they share the cache)"
            )
        return self

    @property
    def resolved_cache_path(self) -> Path:
        return self.cache_path


@dataclass(frozen=True)
class FanoutResult(RunResult):
    """A finished fan-out: its run directory and manifest."""


def read_prompts(path: str | Path) -> list[ModelRequest]:
    """Parse a prompts JSONL file, naming the line and field of the first problem.

    Raises
    ------
    InputError
        A line that is not JSON, not an object, misses ``id`` or an input,
        has a bad parameter, or repeats an (``id``, ``replicate``) pair.
    """
    return [request for _, request in read_prompt_lines(path)]


def read_prompt_lines(path: str | Path) -> list[tuple[int, ModelRequest]]:
    """:func:`read_prompts`, each request with the number of its line."""
    found: list[tuple[int, ModelRequest]] = []
    seen: dict[tuple[str, int], int] = {}
    name = str(path)
    for number, line in text_lines(path, "prompts"):
        if not line.strip():
            continue
        request = _parse_line(name, number, line)
        pair = (request.id, request.replicate)
        if pair in seen:
            raise InputError(
                name, number, "id",
                f"id {brief(request.id)} with replicate {request.replicate} "
                f"already appears on line {seen[pair]}",
            )  # fmt: skip
        seen[pair] = number
        found.append((number, request))
    if not found:
        raise UsageError(f"{name} holds no prompts")
    return found


def _parse_line(name: str, number: int, line: str) -> ModelRequest:
    data = json_object(name, number, line, most=MOST_PROMPT_CHARS)
    if isinstance(data.get("id"), int):
        data["id"] = str(data["id"])
    if isinstance(data.get("id"), str):
        problem = label_problem(data["id"])
        if problem:
            raise InputError(name, number, "id", problem)
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


def fanout(
    input_path: str | Path, options: FanoutOptions, *, stderr: TextIO | None = None
) -> FanoutResult:
    """Read prompts from ``input_path`` and run them; see :func:`run_fanout`."""
    numbered = read_prompt_lines(input_path)
    requests = [request for _, request in numbered]
    lines = [number for number, _ in numbered]
    return run_async(
        run_fanout(requests, options, stderr=stderr, input_path=Path(input_path), lines=lines)
    )


async def run_fanout(
    requests: Sequence[ModelRequest],
    options: FanoutOptions,
    *,
    stderr: TextIO | None = None,
    input_path: Path | None = None,
    lines: Sequence[int] | None = None,
) -> FanoutResult:
    """Send ``requests`` to ``options.model`` and write a run directory.

    The provider (and its API key) is resolved before the run directory exists,
    so a configuration error leaves nothing behind and sends nothing. Interrupts
    (Ctrl-C, SIGTERM) mark the run ``interrupted`` and re-raise; what arrived is
    already in the cache.
    """
    provider = options.resolve_provider()
    session = RunSession.open(
        "fanout",
        provider,
        options.engine_settings(),
        runs_dir=options.runs_dir,
        cache_path=options.cache_path,
        command=options.command,
        requests=requests,
        name_request=_line_namer(input_path, lines),
    )
    try:
        session.run.write_json("spec.json", _spec(options, input_path))
        session.run.write_lines(
            "inputs.jsonl",
            [r.model_dump(mode="json", exclude_none=True, exclude_defaults=True) for r in requests],
        )
        await session.send(requests, stderr=stderr, label="fanout: ")
    except (BiasauditError, OSError) as error:
        raise session.fail(error) from None
    finally:
        await session.close()
    return FanoutResult(session.run.path, session.manifest)


def _line_namer(
    input_path: Path | None, lines: Sequence[int] | None
) -> Callable[[int, ModelRequest], str] | None:
    """Names the i-th request by its file and line, when they are known."""
    if input_path is None or lines is None:
        return None
    return lambda index, request: f"{input_path}, line {lines[index]}"


def _spec(options: FanoutOptions, input_path: Path | None) -> dict[str, object]:
    spec: dict[str, object] = {
        "model": options.model,
        "base_url": redact_urls(options.base_url),
        "api_key_env": options.api_key_env,  # the variable's name, never its value
        "headers": public_headers(options.headers),
        "settings": asdict(options.engine_settings()),
        "runs_dir": str(options.runs_dir),
        "cache_path": str(options.cache_path),
    }
    if input_path is not None:
        spec["input"] = str(input_path)
        spec["input_sha256"] = hashlib.sha256(input_path.read_bytes()).hexdigest()
    return spec
