"""The audit kinds behind one call: run a spec, plan it, read a run's metrics, print
its table, draw it, write its report.

:data:`~biasaudit.kinds.KINDS` maps each manifest kind to the module that declares it,
one line a kind: its ``kind.py``, whose ``KIND`` is a :class:`~biasaudit.kinds.declare.Kind`.
The command line, ``replay``, ``reaudit``, ``report``, ``study``, ``compare``,
``history`` and ``run --max-cost`` reach a kind only through here, so a new kind
is a folder under ``kinds/`` with its ``kind.py``, and one line in ``kinds/__init__.py``.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, get_args

from pydantic import BaseModel

from biasaudit.errors import UsageError
from biasaudit.kinds import KINDS
from biasaudit.kinds.common import TaskInfo, read_run_metrics
from biasaudit.kinds.declare import Kind
from biasaudit.kinds.runspec import AuditSpec
from biasaudit.providers import ModelRequest, Provider
from biasaudit.render.text import Block, block_lines
from biasaudit.store.runs import Manifest
from biasaudit.textfiles import a_run

if TYPE_CHECKING:
    from biasaudit.engine.options import FieldRole
    from biasaudit.kinds._rounds import RoundsRecord

__all__ = [
    "AUDIT_KINDS",
    "BROKEN_KINDS",
    "KINDS",
    "SPECS",
    "TASK_NAMES",
    "VARIANTS",
    "FinishedAudit",
    "Kind",
    "audit_kind",
    "command_specs",
    "kind_of_spec",
    "kind_of_spec_class",
    "methods_of",
    "plan_requests",
    "read_metrics",
    "run_kind",
    "run_spec",
    "runs_to_study",
    "spec_class",
    "spec_fields_in_roles",
    "study_kind",
    "table_of",
    "with_names_to_hide",
]


@cache
def audit_kind(name: str) -> Kind:
    """The kind a manifest names.

    Raises
    ------
    UsageError
        No such audit kind (a fan-out run, say).
    """
    module = KINDS.get(name)
    if module is None:
        raise UsageError(f"'{name}' is not an audit kind ({', '.join(KINDS)})")
    kind: Kind = importlib.import_module(module).KIND
    return kind


BROKEN_KINDS: dict[str, str] = {}
"""Kinds an installed package declares that could not be loaded, with why: left out,
so that one broken package stops no command (``biasaudit tasks`` names them)."""
_TAKEN = {
    _class.model_fields["task"].default
    for _name, _module in KINDS.items() if _module.startswith("biasaudit.")
    for _class in audit_kind(_name).specs
}  # fmt: skip
for _name, _module in list(KINDS.items()):
    if not _module.startswith("biasaudit."):
        try:
            _tasks = {_class.model_fields["task"].default for _class in audit_kind(_name).specs}
            if _tasks & _TAKEN:  # a built-in task's name: its specs would be mixed in
                raise ValueError(f"its task {sorted(_tasks & _TAKEN)[0]!r} is already taken")
            _TAKEN |= _tasks
        except Exception as _error:  # a third party's module: whatever it raises
            BROKEN_KINDS[_name] = f"{_module}: {type(_error).__name__}: {_error}"
            del KINDS[_name]
AUDIT_KINDS = tuple(KINDS)

VARIANTS: dict[str, tuple[type[AuditSpec], ...]] = {}
for _name in KINDS:
    for _class in audit_kind(_name).specs:
        _task = _class.model_fields["task"].default
        VARIANTS[_task] = (*VARIANTS.get(_task, ()), _class)
"""Each task's spec classes, by the ``task`` a spec names: several kinds may take one
task (resume screening: allocation's pointwise and pairwise methods, listwise), and
tell their specs apart by its ``method``; the first is the task's default."""
SPECS: dict[str, type[AuditSpec]] = {task: classes[0] for task, classes in VARIANTS.items()}
"""Each task's default spec class (the one a spec without a ``method`` is read as)."""
TASK_NAMES = tuple(SPECS)


def methods_of(spec_class: type[AuditSpec]) -> tuple[str, ...]:
    """The ``method`` values a spec class takes (none: it has no ``method``)."""
    field = spec_class.model_fields.get("method")
    return () if field is None else tuple(str(v) for v in get_args(field.annotation))


def spec_class(task: str, method: Any) -> type[AuditSpec]:
    """The spec class of ``task`` whose ``method`` is ``method`` (None: the default).

    Raises
    ------
    UsageError
        ``method`` is a string no spec of the task takes.
    """
    classes = VARIANTS[task]
    if method is None or len(classes) == 1:
        return classes[0]
    for found in classes:
        if method in methods_of(found):
            return found
    if not isinstance(method, str):
        return classes[0]  # its validation names the problem
    allowed = ", ".join(m for found in classes for m in methods_of(found))
    raise UsageError(f"field 'method': must be one of {allowed}; got {method!r}")


def command_specs() -> dict[str, tuple[type[AuditSpec], ...]]:
    """The tasks with a ``biasaudit run <task>`` command, and their specs."""
    return {task: VARIANTS[task] for name in KINDS for task in audit_kind(name).commands}


def __getattr__(name: str) -> Any:
    # TASKS (each built-in task's TaskInfo, by name, as 'biasaudit tasks' lists them)
    # imports every kind's tasks, their data files and prompts: only when asked.
    if name == "TASKS":
        tasks: dict[str, TaskInfo] = {
            info.name: info for kind in KINDS for info in audit_kind(kind).task_infos()
        }
        return tasks
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def kind_of_spec_class(spec_class: type[AuditSpec]) -> str:
    """The audit kind whose tasks ``spec_class`` describes."""
    for name in KINDS:
        if spec_class in audit_kind(name).specs:
            return name
    raise UsageError(f"no audit kind has the spec {spec_class.__name__}")


def kind_of_spec(spec: AuditSpec) -> Kind:
    """The kind a run of ``spec`` is."""
    for name in KINDS:
        kind = audit_kind(name)
        if kind.owns(spec):
            return kind
    raise UsageError(f"no audit kind runs a {type(spec).__name__}")


@dataclass(frozen=True)
class FinishedAudit:
    """A finished audit of any kind: its run, manifest, metrics and printed table."""

    kind: str
    run_dir: Path
    manifest: Manifest
    metrics: BaseModel
    blocks: list[Block]

    @property
    def table(self) -> list[str]:
        """The table as plain lines."""
        return block_lines(self.blocks)

    @property
    def exit_code(self) -> int:
        """0 when every request got an answer, 1 when some did not."""
        counts = self.manifest.counts
        return 0 if self.manifest.status == "completed" and counts.failures == 0 else 1


def _missing(path: Path) -> str:
    """Why ``path`` is not there: a glob the shell matched to nothing passes on as it is."""
    if any(ch in str(path) for ch in "*?["):
        return f"{path} matches nothing"
    return f"{path} does not exist"


def runs_to_study(paths: Sequence[str | Path]) -> tuple[list[Path], list[str]]:
    """The audit runs among ``paths`` (a shell glob such as ``runs/*`` also matches the
    cache file, earlier study and compare folders and fan-out runs), and a note for each
    path left out.

    Raises
    ------
    UsageError
        A path that does not exist; no audit run among the paths.
    """
    from biasaudit.store.runs import read_manifest

    runs: dict[Path, Manifest] = {}
    skipped: list[str] = []
    for path in map(Path, paths):
        if not path.exists():
            raise UsageError(_missing(path))
        if path.is_file():
            skipped.append(f"skipped {path}: a file, not a run directory")
        elif (path / "study.json").is_file() or (path / "compare.json").is_file():
            found = "study" if (path / "study.json").is_file() else "compare"
            skipped.append(f"skipped {path}: an earlier {found}'s folder, not a run")
        elif not (path / "manifest.json").is_file():
            skipped.append(f"skipped {path}: not a run (no manifest.json)")
        elif (manifest := read_manifest(path)).kind not in KINDS:
            skipped.append(f"skipped {path}: {a_run(manifest.kind)}, not an audit run")
        elif (why := _unusable(path, manifest)) is not None:
            skipped.append(f"skipped {path}: {why}")
        else:
            runs[path] = manifest
    if not runs:
        raise UsageError(
            "no audit run among the paths given" + (f" ({skipped[0]})" if skipped else "")
        )
    return _once_per_audit(runs, skipped)


def _unusable(path: Path, manifest: Manifest) -> str | None:
    """Why a study cannot use an audit run (it stopped early, nothing was answered), or None."""
    if not (path / "metrics.json").is_file():
        return (
            f"incomplete: no metrics.json, the run stopped before its figures "
            f"(status {manifest.status})"
        )
    if manifest.status != "completed":
        return f"incomplete ({manifest.status}): its figures rest on part of its requests"
    counts = manifest.counts
    if counts.requests and counts.failures >= counts.requests:
        return "every request failed: no answer to study"
    return None


@functools.cache
def spec_fields_in_roles(*roles: FieldRole) -> frozenset[str]:
    """Every spec class's fields declared in one of ``roles`` where they are declared
    (:data:`~biasaudit.engine.options.FieldRole`): what the study, ``compare`` and a
    history leave out of "the same audit", read from the fields, not from lists."""
    from biasaudit.engine.options import fields_in_roles

    specs = [spec_class for classes in VARIANTS.values() for spec_class in classes]
    return frozenset().union(*(fields_in_roles(spec_class, *roles) for spec_class in specs))


def selecting_kinds() -> dict[str, str]:
    """The kinds whose figures are selection rates by demographic category
    (:attr:`~biasaudit.kinds.declare.Kind.selects`), each with the word for what its
    rates count: those a Local Law 144 summary can read."""
    found = {name: audit_kind(name).selects for name in AUDIT_KINDS}
    return {name: word for name, word in found.items() if word}


def selecting_audit_in_words() -> str:
    """``an allocation or listwise audit``: the kinds of :func:`selecting_kinds`, in a
    sentence (help texts and errors ask for the capability, not for a kind's name)."""
    names = list(selecting_kinds())
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    return f"{'an' if listed[:1] in 'aeiou' else 'a'} {listed} audit"


def _size_and_engine_fields() -> frozenset[str]:
    """Spec fields that say which model, how much of an audit a run asked, how it was
    sent, stored or its figures computed, not which audit it is: runs that differ only
    in them (a pilot, the rounds of --until, a repeat) are one audit of one model,
    counted once in a study."""
    return spec_fields_in_roles("model", "sending", "storing", "computing", "sizing")


def _audit_identity(path: Path, manifest: Manifest) -> str:
    """What a run audits, whatever its size: its kind and spec less sizes and engine settings."""
    import json

    endpoint = manifest.endpoint
    if endpoint.get("provider") == "imported" and endpoint.get("sha256"):
        # outputs produced elsewhere: the same file of one model's answers is one audit,
        # however often it is imported
        return json.dumps([manifest.kind, "imported", endpoint.get("model"), endpoint["sha256"]])
    try:
        spec = json.loads((path / "spec.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return str(path)  # nothing to match it by: it stands alone
    if not isinstance(spec, dict):
        return str(path)
    asked = {k: v for k, v in spec.items() if k not in _size_and_engine_fields()}
    audited = [manifest.endpoint.get(k) for k in ("provider", "model", "base_url")]
    return json.dumps([manifest.kind, audited, asked], sort_keys=True, default=str)


def _once_per_audit(runs: dict[Path, Manifest], skipped: list[str]) -> tuple[list[Path], list[str]]:
    """One run for each audit of one model: the one with the most answers (the latest
    of equals); a note names the runs it stands for."""
    by_audit: dict[str, list[Path]] = {}
    for path, manifest in runs.items():
        by_audit.setdefault(_audit_identity(path, manifest), []).append(path)
    kept: list[Path] = []
    for same in by_audit.values():
        manifests = {path: runs[path] for path in same}
        answered = {  # an import sent nothing: its rows are its answers
            path: (m.counts.requests - m.counts.failures or int(m.endpoint.get("rows") or 0),
                   m.started_at.isoformat())
            for path, m in manifests.items()
        }  # fmt: skip
        chosen = max(same, key=answered.__getitem__)
        kept.append(chosen)
        others = [path for path in same if path != chosen]
        if others:
            endpoint = manifests[chosen].endpoint
            model = f"{endpoint.get('provider', '?')}/{endpoint.get('model', '?')}"
            skipped.append(
                f"counted once: {len(same)} runs audit the same model ({model}) the same way "
                f"(pilots, rounds or repeats); {chosen} stands for them (the most answers, "
                f"{answered[chosen][0]}); left out: {', '.join(map(str, others))}"
            )
    order = list(runs)
    return sorted(kept, key=order.index), skipped


def study_kind(run_dirs: Sequence[str | Path]) -> str:
    """The kind of audit run the folders hold (their manifest's ``kind``), e.g.
    ``grade-score``.

    Raises
    ------
    UsageError
        No folders; a folder that does not exist, is not a run, or is not an audit
        run (a fan-out); runs of different kinds.
    """
    from biasaudit.store.runs import read_manifest

    if not run_dirs:
        raise UsageError("give at least one run directory")
    kinds: dict[str, str] = {}
    for path in map(Path, run_dirs):
        if not path.exists():
            raise UsageError(_missing(path))
        if not (path / "manifest.json").is_file():
            raise UsageError(f"{path} is not a run (no manifest.json)")
        kind = read_manifest(path).kind
        if kind not in KINDS:
            raise UsageError(f"{path} is {a_run(kind)}: a study compares audit runs")
        kinds.setdefault(kind, str(path))
    if len(kinds) > 1:
        found = "; ".join(f"{path} is {a_run(kind)}" for kind, path in kinds.items())
        raise UsageError(f"a study compares runs of one kind: {found}")
    return next(iter(kinds))


def run_kind(spec: AuditSpec) -> str:
    """The manifest kind a run of ``spec`` gets."""
    return kind_of_spec(spec).name


def run_spec(
    spec: AuditSpec,
    *,
    provider: Provider | None = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
    recorded: RoundsRecord | None = None,
) -> FinishedAudit:
    """Run the audit ``spec`` describes, whatever its kind: in rounds where it has
    ``until`` (``recorded``: the rounds a replay repeats, followed as recorded; see
    :func:`biasaudit.kinds._rounds.audit_until`).

    Raises
    ------
    UsageError
        ``spec`` names several models: run :meth:`~biasaudit.spec.RunSpec.for_model`
        of each (``biasaudit run`` runs them at once).
    """
    if spec.models:
        raise UsageError(
            f"the spec names {len(spec.models)} models: run spec.for_model(m) for each "
            "(biasaudit run runs them at once)"
        )
    spec = with_names_to_hide(spec)
    kind = kind_of_spec(spec)
    if getattr(spec, "until", None) is not None:
        from biasaudit.kinds._rounds import audit_until, growth_for

        growth = growth_for(kind, spec)
        ran = audit_until(spec, growth, kind.run, provider=provider,
                          stderr=stderr, command=command, recorded=recorded)  # fmt: skip
    else:
        ran = kind.run(spec, provider=provider, stderr=stderr, command=command)
    blocks = kind.run_blocks(ran.metrics, ran.run_dir)
    return FinishedAudit(kind.name, ran.run_dir, ran.manifest, ran.metrics, blocks)


def plan_requests(spec: AuditSpec, provider: Provider) -> Iterator[ModelRequest]:
    """The requests a run of ``spec`` would send to ``provider``, made one at a time as
    they are read (nothing is sent): a reader that keeps none holds one prompt at a time."""
    from biasaudit.interventions import intervene

    spec = with_names_to_hide(spec)
    planned = kind_of_spec(spec).plan_requests(spec, provider)
    requests: Iterator[ModelRequest] = iter(intervene(planned, spec.intervention))
    return requests


def with_names_to_hide(spec: AuditSpec) -> AuditSpec:
    """``spec`` whose intervention hides names given the names its audit shows
    (:meth:`~biasaudit.kinds.declare.Kind.shown_names`), recorded with the run.

    Raises
    ------
    UsageError
        The intervention hides names and the audit shows none.
    """
    from biasaudit.interventions import names_to_hide

    intervention = spec.intervention
    if intervention is None or not intervention.hides_names or intervention.hidden:
        return spec
    hidden = names_to_hide(kind_of_spec(spec).shown_names(spec))
    if not hidden:
        raise UsageError(
            f"intervention '{intervention.name}' hides names, and this audit shows the "
            "model none (a task without names, or a decisions audit filled explicitly)"
        )
    return spec.model_copy(update={"intervention": intervention.model_copy(
        update={"hidden": hidden})})  # fmt: skip


def read_metrics(run_dir: Path, kind: str) -> Any:
    """The ``metrics.json`` of an audit run, as its pydantic model.

    Raises
    ------
    UsageError
        The run has no metrics (it stopped early) or is not an audit run.
    """
    if kind not in KINDS:
        raise UsageError(f"{run_dir}: {a_run(kind)} has no audit metrics")
    return read_run_metrics(run_dir, audit_kind(kind).metrics_model())


def table_of(kind: str, metrics: BaseModel, run_dir: Path) -> list[str]:
    """The table ``biasaudit run`` prints for a run of this kind, as plain lines."""
    return block_lines(audit_kind(kind).run_blocks(metrics, run_dir))
