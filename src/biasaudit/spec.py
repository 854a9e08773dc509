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
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from biasaudit.engine.options import MAX_TIMEOUT_S
from biasaudit.errors import UsageError
from biasaudit.kinds.runspec import MAX_ROUNDS, AuditSpec, RunSpec, relative_path
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
M = TypeVar("M", bound=BaseModel)


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


def load_spec(
    path: str | Path,
    overrides: Mapping[str, Any] | None = None,
    *,
    aside: dict[str, Any] | None = None,
) -> AuditSpec:
    """Read a YAML spec; relative paths in it are relative to the file.

    ``overrides`` (options given on the command line) replace the file's values. The
    keys of ``aside`` are taken out of the file before it is read as a spec, their
    values put in ``aside`` (``interventions``: read by ``biasaudit experiment``).

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
    for key in aside or {}:
        assert aside is not None
        aside[key] = data.pop(key, None)
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

    if name == "interventions":  # a mitigation experiment's spec, given to another command
        return (
            ": it lists a mitigation experiment's interventions; run it with biasaudit "
            "experiment SPEC (biasaudit reaudit SPEC re-audits it), or drop the list"
        )

    models = set().union(*(_models(found) for classes in VARIANTS.values() for found in classes))
    known = sorted({field for model in models for field in model.model_fields})
    close = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def owner_of(name: str, task: Any, method: Any = None) -> str | None:
    """Whose option the field ``name`` is, when another spec has it, and who does not
    use it: ``an allocation-audit option; grade-score does not use it``, ``an option of
    essay-grading; resume-screening does not use it`` (a task of the same kind), or ``an
    option of the listwise method; resume-screening with method pointwise does not use
    it``; a field of the task's own spec that has no flag (a structured one, such as
    ``intervention``) says so; None for a field no spec has."""
    from biasaudit.kinds.registry import VARIANTS, kind_of_spec_class, methods_of, spec_class

    variants = VARIANTS.get(task, ()) if isinstance(task, str) else ()
    own = None
    if variants:
        try:
            own = spec_class(task, method)
        except UsageError:
            own = variants[0]
    if own is not None and name in own.model_fields:
        return f"a field of the {task} spec without a flag; set it in a spec file"
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
