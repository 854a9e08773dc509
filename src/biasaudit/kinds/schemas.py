"""JSON Schemas of the spec file and of every run file, generated from the pydantic
models that write and read them (``biasaudit schema NAME`` prints one).

The same schemas ship in the package (``biasaudit/data/schemas/NAME.json``), so an
editor can validate a spec (``# yaml-language-server: $schema=...``) and another
tool can read runs without importing biasaudit; a test keeps them equal to what the
models generate. Each run file carries its ``schema_version`` (ARCHITECTURE.md, "Run
files and their versions").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import import_module, resources
from pathlib import Path
from typing import Any, Union

from biasaudit.errors import UsageError
from biasaudit.kinds import KINDS

__all__ = ["SCHEMA_NAMES", "json_schema", "shipped_schema", "write_schemas"]

_BASE = "https://biasaudit.invalid/schemas/"
_RUNS = "biasaudit.store.runs"
_EXPERIMENTS = "biasaudit.store.experiments"


def _spec() -> dict[str, Any]:
    from pydantic import TypeAdapter

    from biasaudit.kinds.registry import VARIANTS

    classes = tuple(c for found in VARIANTS.values() for c in found)
    union: Any = Union[classes]  # noqa: UP007 - a union of classes known at run time
    schema = TypeAdapter(union).json_schema()
    schema["title"] = "biasaudit spec file"
    schema["description"] = (
        "A spec file (YAML or JSON) for 'biasaudit run SPEC': one task, its method and "
        "options, and the model, endpoint, engine and storage options."
    )
    return schema


def _model(module: str, name: str) -> Callable[[], dict[str, Any]]:
    """The schema of the pydantic model ``name`` of ``module``, imported when asked for."""

    def schema() -> dict[str, Any]:
        found: dict[str, Any] = getattr(import_module(module), name).model_json_schema()
        return found

    return schema


def _metrics_title(kind: str) -> str:
    return f"metrics.json of a run of kind '{kind}'"


def _metrics(kind: str) -> Callable[[], dict[str, Any]]:
    def schema() -> dict[str, Any]:
        from biasaudit.kinds.registry import audit_kind

        found: dict[str, Any] = audit_kind(kind).metrics_model().model_json_schema()
        found["title"] = _metrics_title(kind)
        return found

    return schema


_SCHEMAS: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "spec": ("a spec file for 'biasaudit run SPEC' (every task and method)", _spec),
    "manifest": ("manifest.json of any run", _model(_RUNS, "Manifest")),
    "responses": ("one line of responses.jsonl", _model(_RUNS, "ResponseRecord")),
    "batches": ("batches.json of a --batch run", _model(_RUNS, "BatchesFile")),
    **{f"metrics-{kind}": (_metrics_title(kind), _metrics(kind)) for kind in KINDS},
    "rounds": (
        "rounds.json of an audit run with --until",
        _model("biasaudit.kinds._rounds", "RoundsRecord"),
    ),
    "compare": (
        "compare.json of two runs compared (compare, reaudit)",
        _model("biasaudit.store.comparisons", "ComparisonRecord"),
    ),
    "experiment": (
        "experiment.json of a mitigation experiment (biasaudit experiment)",
        _model(_EXPERIMENTS, "Experiment"),
    ),
    "experiment-compare": (
        "experiment-compare.json of two experiments compared (compare, reaudit)",
        _model(_EXPERIMENTS, "ExperimentComparisonRecord"),
    ),
}
SCHEMA_NAMES: dict[str, str] = {name: what for name, (what, _) in _SCHEMAS.items()}
"""Each schema's name and what it describes."""


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) called ``name``, generated now.

    Raises
    ------
    UsageError
        No schema has that name (the message lists them).
    """
    if name not in _SCHEMAS:
        raise UsageError(f"no schema {name!r}; the schemas are: {', '.join(_SCHEMAS)}")
    schema = _SCHEMAS[name][1]()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"{_BASE}{name}.json", **schema}  # fmt: skip


def shipped_schema(name: str) -> Path:
    """Where the package's copy of schema ``name`` lies."""
    if name not in _SCHEMAS:
        raise UsageError(f"no schema {name!r}; the schemas are: {', '.join(_SCHEMAS)}")
    return Path(str(resources.files("biasaudit") / "data" / "schemas" / f"{name}.json"))


def write_schemas(folder: Path) -> list[Path]:
    """Write every schema into ``folder`` as ``NAME.json``; the paths written."""
    from biasaudit.store.files import replaced_together

    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / f"{name}.json" for name in _SCHEMAS]
    texts = [
        json.dumps(json_schema(name), indent=2, ensure_ascii=False) + "\n" for name in _SCHEMAS
    ]
    with replaced_together(written) as temporary:  # all of them, or none
        for path, text in zip(temporary, texts, strict=True):
            path.write_text(text, encoding="utf-8")
    return written
