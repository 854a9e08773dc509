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
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar, get_args

from pydantic import BaseModel, Field, ValidationError, model_validator

from biasaudit.engine.options import MAX_TIMEOUT_S, RunOptions
from biasaudit.errors import UsageError
from biasaudit.providers._types import ReasoningEffort
from biasaudit.textfiles import brief, load_yaml

__all__ = [
    "MAX_ROUNDS",
    "MAX_TIMEOUT_S",
    "AuditSpec",
    "RunSpec",
    "load_spec",
    "owner_of",
    "parse_spec",
    "relative_path",
    "validated",
]
MAX_ROUNDS = 100_000
M = TypeVar("M", bound=BaseModel)


class RunSpec(RunOptions):
    """Fields every audit spec has: the model, its endpoint, the engine and the storage
    (:class:`~biasaudit.engine.options.RunOptions`), and the statistics every kind
    shares (seed, confidence, conventions). Each kind's spec adds its own
    (:class:`AllocationSpec`, :class:`GradeScoreSpec`, :class:`RutedSpec`)."""

    PATHS: ClassVar[tuple[str, ...]] = ("runs_dir", "cache")
    """Fields holding file or folder paths, relative to a spec file's folder."""

    temperature: float = Field(
        1.0, gt=0.0, le=2.0, allow_inf_nan=False, description="Of sampled answers and texts."
    )
    conventions: Literal["biasaudit", "paper"] = Field(
        "biasaudit",
        description="Definitions of the figures where biasaudit departs from the papers: its "
        "own, or the papers' (docs: Where biasaudit departs from the papers).",
    )
    seed: int = Field(
        0, ge=0, le=2**32 - 1, description="Seeds name sampling, pools and bootstraps."
    )
    confidence: float = Field(
        0.95, gt=0.0, lt=1.0, allow_inf_nan=False, description="Of every interval."
    )
    reasoning_effort: ReasoningEffort | None = Field(
        None,
        description="Reasoning models (openai/o3, openai/gpt-5, ...): how much the model "
        "reasons before each answer, sent as reasoning_effort and part of every cache key "
        "[default: the model's own].",
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

    @classmethod
    def relative_to(cls, data: dict[str, Any], folder: Path) -> dict[str, Any]:
        """``data`` read from a spec file in ``folder``, its relative paths made that
        folder's (a kind's spec adds the paths of its own fields)."""
        resolved = dict(data)
        for key in (*cls.PATHS, *(["like"] if "like" in cls.model_fields else [])):
            value = resolved.get(key)
            if isinstance(value, str) and value != "demo":
                resolved[key] = relative_path(value, folder)
        return resolved


AuditSpec = RunSpec
"""Any audit's spec (every kind's spec is a :class:`RunSpec`)."""


def relative_path(value: str, folder: Path) -> str:
    """``value`` as a path from ``folder`` unless it is absolute, without ``..`` steps
    (``specs/../runs`` is ``runs``: what every message then shows)."""
    return value if Path(value).is_absolute() else os.path.normpath(folder / value)


def parse_spec(data: Mapping[str, Any], *, source: str = "spec") -> AuditSpec:
    """Validate a spec mapping as the spec of its ``task``, naming the field of the
    first problem (each kind's spec classes: :data:`biasaudit.kinds.registry.SPECS`).

    Raises
    ------
    UsageError
        ``<source>, field '<dotted.path>': <problem>``.
    """
    from biasaudit.kinds.registry import SPECS, spec_class

    task = data.get("task", "")
    if not (isinstance(task, str) and task in SPECS):
        # Named here, not by pydantic: its message would spell out the value in full,
        # and a YAML alias can make that value billions of elements long.
        names = ", ".join(SPECS)
        raise UsageError(f"{source}, field 'task': must be one of {names}; got {brief(task)}")
    try:
        found = spec_class(task, data.get("method"))
    except UsageError as error:
        raise UsageError(f"{source}, {error}") from None
    try:
        return found.model_validate(dict(data))
    except ValidationError as error:
        raise UsageError(_describe(error, data, source)) from None


def validated(model: type[M], data: Mapping[str, Any], source: str) -> M:
    """``data`` as ``model`` (fan-out's options, a ``score`` command's), naming the
    field of the first problem as :func:`parse_spec` does.

    Raises
    ------
    UsageError
        ``<source>, field '<name>': <problem>``.
    """
    try:
        return model.model_validate(dict(data))
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
    from biasaudit.kinds.registry import SPECS, spec_class

    spec_path = Path(path)
    data = load_yaml(spec_path, "spec")
    if not isinstance(data, dict):
        raise UsageError(f"spec {spec_path}: expected a mapping of fields, e.g. 'task: ...'")
    task = data.get("task")  # maybe a YAML alias bomb: never turned into text here
    found: type[RunSpec] = RunSpec
    if isinstance(task, str) and task in SPECS:
        method = (overrides or {}).get("method", data.get("method"))
        try:
            found = spec_class(task, method)
        except UsageError:
            found = SPECS[task]  # parse_spec names the method
    data = found.relative_to(data, spec_path.parent)
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
    from biasaudit.kinds.registry import VARIANTS

    models = set().union(*(_models(found) for classes in VARIANTS.values() for found in classes))
    known = sorted({field for model in models for field in model.model_fields})
    close = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def owner_of(name: str, task: Any, method: Any = None) -> str | None:
    """Whose option the field ``name`` is, when another spec has it, and who does not
    use it: ``an allocation-audit option; grade-score does not use it``, ``an option of
    essay-grading; resume-screening does not use it`` (a task of the same kind), or ``an
    option of the listwise method; resume-screening with method pointwise does not use
    it``; None for a field no spec has."""
    from biasaudit.kinds.registry import VARIANTS, kind_of_spec_class, methods_of, spec_class

    variants = VARIANTS.get(task, ()) if isinstance(task, str) else ()
    own = None
    if variants:
        try:
            own = spec_class(task, method)
        except UsageError:
            own = variants[0]
    for other_class in variants:
        if other_class is not own and name in other_class.model_fields and own is not None:
            other_methods = "/".join(methods_of(other_class))
            own_method = "/".join(methods_of(own))
            return (
                f"an option of the {other_methods} method; {task} with method {own_method} "
                "does not use it"
            )
    own_kind = kind_of_spec_class(own) if own is not None else None
    for other, classes in VARIANTS.items():
        for found in classes:
            if other == task or name not in found.model_fields:
                continue
            kind = kind_of_spec_class(found)
            if kind != own_kind:
                article = "an" if kind[0] in "aeiou" else "a"
                return f"{article} {kind}-audit option; {task} does not use it"
            return f"an option of {other}; {task} does not use it"
    return None


def _describe(error: ValidationError, data: Mapping[str, Any], source: str) -> str:
    first = error.errors()[0]
    location = [str(part) for part in first["loc"]]
    kind = first["type"]
    problem = str(first["msg"]).removeprefix("Value error, ")
    task = data.get("task")
    method = data.get("method")
    owner = owner_of(location[-1], task, method) if kind == "extra_forbidden" and location else None
    if owner is not None:
        problem = owner
    elif kind == "extra_forbidden":
        problem = "unknown field" + _suggestion(location[-1] if location else "")
    elif kind == "missing":
        problem = "required"
    where = ".".join(location) or "(top level)"
    return f"{source}, field '{where}': {problem}"
