"""Audit specs: what ``biasaudit run`` runs, from a YAML file or from the command line.

A spec is one flat mapping: the task, the model, the method and its options,
and the task's own fields. ``biasaudit run resume-screening --model M ...``
builds the same spec that ``biasaudit run SPEC.yaml`` reads, so the two run
identically, and the resolved spec is kept in the run as ``spec.json``::

    task: resume-screening        # or essay-grading, or allocation (your own task)
    model: openai/gpt-4o-mini
    method: pointwise             # or pairwise
    names_per_group: 100
    jobs: [software-engineer, retail-associate]

A bad spec fails before anything is sent, naming the field at fault.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from biasaudit.engine.core import EngineSettings
from biasaudit.errors import UsageError
from biasaudit.providers import Provider, resolve_model
from biasaudit.providers._types import ReasoningEffort
from biasaudit.secrets import public_headers, redact_urls
from biasaudit.textfiles import brief, load_yaml

__all__ = [
    "MAX_ROUNDS",
    "MAX_TIMEOUT_S",
    "AuditSpec",
    "RunSpec",
    "load_spec",
    "parse_spec",
    "relative_path",
]
MAX_ROUNDS = 100_000
MAX_TIMEOUT_S = 86_400.0


class RunSpec(BaseModel):
    """Fields every audit spec has: the model and its endpoint, the engine, the run's
    options and the statistics every kind shares (seed, confidence, conventions).
    Each kind's spec adds its own (:class:`AllocationSpec`, :class:`GradeScoreSpec`,
    :class:`RutedSpec`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    PATHS: ClassVar[tuple[str, ...]] = ("runs_dir", "cache")
    """Fields holding file or folder paths, relative to a spec file's folder."""

    model: str = Field(description="provider/model, e.g. openai/gpt-4o-mini or sim/biased.")
    base_url: str | tuple[str, ...] | None = Field(
        None, description="API root of an OpenAI-compatible server; several for replicas."
    )
    api_key_env: str | None = Field(None, description="Environment variable holding the key.")
    headers: dict[str, str] | None = Field(
        None,
        description="Sent with every request; a value $NAME is read from the environment. "
        "Recorded masked (spec.json keeps $NAME references, every other value is ***).",
    )
    temperature: float = Field(
        1.0, gt=0.0, le=2.0, allow_inf_nan=False, description="Of sampled answers and texts."
    )
    conventions: Literal["biasaudit", "paper"] = Field(
        "biasaudit",
        description="Which definitions the figures that depart from the papers follow: "
        "biasaudit's, or the papers' (README: Where biasaudit departs from the papers).",
    )
    seed: int = Field(
        0, ge=0, le=2**32 - 1, description="Seeds name sampling, pools and bootstraps."
    )
    confidence: float = Field(0.95, gt=0.0, lt=1.0, allow_inf_nan=False)
    concurrency: int = Field(16, ge=1, le=4096)
    rpm: float | None = Field(None, gt=0.0, le=1e7, allow_inf_nan=False)
    max_retries: int = Field(6, ge=0, le=100)
    timeout: float = Field(60.0, gt=0.0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    runs_dir: Path = Path("runs")
    cache: Path | None = None
    replay: bool = False
    fresh: bool = Field(
        False, description="Ask the model afresh, never reading cached answers (re-audits)."
    )
    workers: int = Field(1, ge=1, le=64, description="Processes sharing the requests.")
    batch: bool = Field(
        False, description="Through the provider's batch API (openai, anthropic): half price."
    )
    batch_poll: float = Field(
        5.0,
        gt=0.0,
        le=3600.0,
        allow_inf_nan=False,
        description="Seconds before a batch's first check.",
    )
    reasoning_effort: ReasoningEffort | None = Field(
        None,
        description="Reasoning models: how much the model reasons before each answer "
        "(OpenAI's reasoning_effort), part of every request and its cache key; unset: "
        "the model's default.",
    )

    @model_validator(mode="before")
    @classmethod
    def _base_urls(cls, data: Any) -> Any:
        # `base_urls: [...]` (replicas of one model) is another spelling of a list base_url.
        if isinstance(data, dict) and "base_urls" in data:
            data = dict(data)
            urls = data.pop("base_urls")
            if data.get("base_url") is not None:
                raise ValueError("give base_url or base_urls, not both")
            data["base_url"] = urls
        return data

    @field_validator("base_url", mode="before")
    @classmethod
    def _one_url_is_a_string(cls, value: Any) -> Any:
        if isinstance(value, list | tuple) and len(value) == 1:
            return value[0]
        return value

    @field_serializer("base_url", when_used="json")
    def _masked_urls(self, urls: str | tuple[str, ...] | None) -> str | list[str] | None:
        # Written to spec.json and used for a spec's identity: credentials never are.
        return redact_urls(urls)

    @field_serializer("headers", when_used="json")
    def _masked_headers(self, headers: dict[str, str] | None) -> dict[str, str] | None:
        return public_headers(headers)

    @classmethod
    def relative_to(cls, data: dict[str, Any], folder: Path) -> dict[str, Any]:
        """``data`` read from a spec file in ``folder``, its relative paths made that
        folder's (a kind's spec adds the paths of its own fields)."""
        resolved = dict(data)
        for key in cls.PATHS:
            value = resolved.get(key)
            if isinstance(value, str) and value != "demo":
                resolved[key] = relative_path(value, folder)
        return resolved

    @property
    def cache_path(self) -> Path:
        return self.cache or self.runs_dir / "cache.sqlite"

    def resolve_provider(self, *, need_key: bool | None = None) -> Provider:
        """The provider ``model`` names, pooled for ``concurrency``.

        The API key is read now (unless the run sends nothing: a replay, or
        ``need_key=False``), so a missing key fails before anything is written.
        """
        return resolve_model(
            self.model,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            max_connections=self.concurrency,
            need_key=not self.replay if need_key is None else need_key,
            headers=self.headers,
        )

    def engine_settings(self) -> EngineSettings:
        return EngineSettings(
            concurrency=self.concurrency,
            rpm=self.rpm,
            max_retries=self.max_retries,
            timeout=self.timeout,
            replay=self.replay,
            read_cache=not self.fresh,
            workers=self.workers,
            batch=self.batch,
            batch_poll=self.batch_poll,
        )


AuditSpec = RunSpec
"""Any audit's spec (every kind's spec is a :class:`RunSpec`)."""


def relative_path(value: str, folder: Path) -> str:
    """``value`` as a path from ``folder`` unless it is absolute."""
    return value if Path(value).is_absolute() else str(folder / value)


def parse_spec(data: Mapping[str, Any], *, source: str = "spec") -> AuditSpec:
    """Validate a spec mapping as the spec of its ``task``, naming the field of the
    first problem (each kind's spec classes: :data:`biasaudit.kinds.registry.SPECS`).

    Raises
    ------
    UsageError
        ``<source>, field '<dotted.path>': <problem>``.
    """
    from biasaudit.kinds.registry import SPECS

    task = data.get("task", "")
    if not (isinstance(task, str) and task in SPECS):
        # Named here, not by pydantic: its message would spell out the value in full,
        # and a YAML alias can make that value billions of elements long.
        names = ", ".join(SPECS)
        raise UsageError(f"{source}, field 'task': must be one of {names}; got {brief(task)}")
    try:
        return SPECS[task].model_validate(dict(data))
    except ValidationError as error:
        raise UsageError(_describe(error, data, source)) from None


def load_spec(path: str | Path, overrides: Mapping[str, Any] | None = None) -> AuditSpec:
    """Read a YAML spec; relative paths in it are relative to the file.

    ``overrides`` (options given on the command line) replace the file's values.

    Raises
    ------
    UsageError
        The file cannot be read, is not a YAML mapping, or fails validation.
    """
    from biasaudit.kinds.registry import SPECS

    spec_path = Path(path)
    data = load_yaml(spec_path, "spec")
    if not isinstance(data, dict):
        raise UsageError(f"spec {spec_path}: expected a mapping of fields, e.g. 'task: ...'")
    task = data.get("task")  # maybe a YAML alias bomb: never turned into text here
    spec_class = SPECS.get(task, RunSpec) if isinstance(task, str) else RunSpec
    data = spec_class.relative_to(data, spec_path.parent)
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return parse_spec(data, source=str(spec_path))


def _models(spec_class: type[BaseModel]) -> set[type[BaseModel]]:
    """A spec class and the models its fields hold (a task's prompt, pool, ...)."""
    found = {spec_class}
    for field in spec_class.model_fields.values():
        for part in (field.annotation, *get_args(field.annotation)):
            if isinstance(part, type) and issubclass(part, BaseModel):
                found |= _models(part)
    return found


def _suggestion(name: str) -> str:
    from biasaudit.kinds.registry import SPECS

    models = set().union(*(_models(spec_class) for spec_class in SPECS.values()))
    known = sorted({field for model in models for field in model.model_fields})
    close = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def _owner(name: str, task: Any) -> str | None:
    """Whose option the field ``name`` is, when another task's spec has it: ``an
    allocation-audit option``, or ``an option of essay-grading`` (a task of the same
    kind); None for a field no spec has."""
    from biasaudit.kinds.registry import SPECS, kind_of_spec_class

    own = SPECS.get(task) if isinstance(task, str) else None
    own_kind = kind_of_spec_class(own) if own is not None else None
    for other, spec_class in SPECS.items():
        if other != task and name in spec_class.model_fields:
            kind = kind_of_spec_class(spec_class)
            if kind != own_kind:
                return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}-audit option"
            return f"an option of {other}"
    return None


def _describe(error: ValidationError, data: Mapping[str, Any], source: str) -> str:
    first = error.errors()[0]
    location = [str(part) for part in first["loc"]]
    kind = first["type"]
    problem = str(first["msg"]).removeprefix("Value error, ")
    task = data.get("task")
    owner = _owner(location[-1], task) if kind == "extra_forbidden" and location else None
    if owner is not None:
        problem = f"{owner}; {task} does not use it"
    elif kind == "extra_forbidden":
        problem = "unknown field" + _suggestion(location[-1] if location else "")
    elif kind == "missing":
        problem = "required"
    where = ".".join(location) or "(top level)"
    return f"{source}, field '{where}': {problem}"
