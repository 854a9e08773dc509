"""Scheduled re-audits: ``biasaudit reaudit SPEC.yaml`` and ``biasaudit history``.

A history is a runs folder. Runs of one spec are recognised by the spec's
identity: a hash of its resolved fields without those that only say how it was
sent, stored or its figures computed (each field declares its role:
:data:`~biasaudit.engine.options.FieldRole`), so a re-audit with other limits, another
endpoint or batches still finds its baseline.

``reaudit`` runs the spec afresh (``fresh``: the cache is not read, so a new
provider version is actually asked; the answers are still stored), compares
the new run with the latest completed run of the same spec in the history
(:func:`biasaudit.reports.compare.compare_runs`), writes the comparison into the new
run as ``compare.json``, and says whether to fail: ``--fail-on drift`` when a
figure changed, ``version`` when the reported model version did, ``any`` for
either.

A spec that lists ``interventions`` is a mitigation experiment's: ``reaudit`` runs the
experiment afresh (:func:`reaudit_experiment`) and compares it with the latest experiment
of the same audit and interventions in the history
(:func:`biasaudit.reports.experiment.compare_experiments`: every arm's audit, and every
intervention's effect), its record in the new experiment's ``compare/`` folder; ``drift``
is then a changed arm or a changed effect (an instruction that stopped working).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TextIO, TypeVar

from biasaudit.errors import UsageError
from biasaudit.experiments.runner import FinishedExperiment
from biasaudit.kinds.registry import (
    AUDIT_KINDS,
    FinishedAudit,
    audit_kind,
    read_metrics,
    run_spec,
    spec_fields_in_roles,
)
from biasaudit.reports.compare import Comparison, compare_runs, write_comparison
from biasaudit.reports.experiment import ExperimentComparison
from biasaudit.spec import AuditSpec, load_spec, parse_spec
from biasaudit.store.runs import read_manifest

if TYPE_CHECKING:
    from biasaudit.interventions import Intervention

__all__ = [
    "DRIFT_EXIT_CODE",
    "HISTORY_COLUMNS",
    "ExperimentReaudit",
    "FailOn",
    "HistoryEntry",
    "ReauditResult",
    "Reaudited",
    "experiment_history",
    "history_table",
    "latest_baseline",
    "latest_experiment",
    "list_history",
    "reaudit",
    "reaudit_experiment",
    "spec_identity",
]

FailOn = Literal["drift", "version", "any"]
DRIFT_EXIT_CODE = 3
"""Exit status of a re-audit whose comparison met its ``--fail-on`` condition."""


def spec_identity(spec: AuditSpec) -> str:
    """12 hex digits that stay the same for every run of one audit (see the module docstring)."""
    how = spec_fields_in_roles("sending", "storing", "computing")
    fields = {k: v for k, v in spec.model_dump(mode="json").items() if k not in how}
    blob = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class HistoryEntry:
    """One run in a history."""

    run_dir: Path
    started_at: datetime
    kind: str
    status: str
    model: str
    versions: tuple[str, ...]
    fingerprints: tuple[str, ...]
    spec_id: str | None
    replay_of: str | None
    headline: str


def list_history(runs_dir: Path, spec: AuditSpec | None = None) -> list[HistoryEntry]:
    """Every audit run in ``runs_dir`` (of ``spec`` only, if given), oldest first."""
    wanted = spec_identity(spec) if spec is not None else None
    entries = []
    for manifest_path in sorted(runs_dir.glob("*/manifest.json")):
        entry = _entry(manifest_path.parent)
        if entry is not None and (wanted is None or entry.spec_id == wanted):
            entries.append(entry)
    return sorted(entries, key=lambda e: e.started_at)


HISTORY_COLUMNS = ("started (UTC)", "kind", "status", "model version", "headline", "run")


def history_table(entries: Sequence[HistoryEntry]) -> list[str]:
    """The lines ``biasaudit history`` prints: one run a line, under a header."""
    rows = [HISTORY_COLUMNS, *map(_history_cells, entries)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HISTORY_COLUMNS) - 1)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True))
        + "  "
        + row[-1]
        for row in rows
    ]


def _history_cells(entry: HistoryEntry) -> tuple[str, str, str, str, str, str]:
    """An entry's cells under :data:`HISTORY_COLUMNS`."""
    version = ", ".join(entry.versions) or "-"
    if entry.fingerprints:
        version += f" [{', '.join(entry.fingerprints)}]"
    replay = " (replay)" if entry.replay_of else ""
    return (
        f"{entry.started_at:%Y-%m-%d %H:%M}",
        entry.kind,
        entry.status,
        version,
        entry.headline + replay,
        entry.run_dir.name,
    )


def latest_baseline(runs_dir: Path, spec: AuditSpec) -> Path | None:
    """The latest completed, non-replay run of ``spec`` with metrics, if any."""
    for entry in reversed(list_history(runs_dir, spec)):
        usable = entry.status == "completed" and (entry.run_dir / "metrics.json").is_file()
        if usable and entry.replay_of is None:
            return entry.run_dir
    return None


def _entry(run_dir: Path) -> HistoryEntry | None:
    try:
        manifest = read_manifest(run_dir)
    except UsageError:
        return None
    if manifest.kind not in AUDIT_KINDS:
        return None
    return HistoryEntry(
        run_dir=run_dir,
        started_at=manifest.started_at,
        kind=manifest.kind,
        status=manifest.status,
        model=f"{manifest.endpoint.get('provider')}/{manifest.endpoint.get('model')}",
        versions=tuple(sorted(manifest.model_versions)),
        fingerprints=tuple(sorted(manifest.system_fingerprints)),
        spec_id=_run_spec_id(run_dir),
        replay_of=manifest.replay_of,
        headline=_headline(run_dir, manifest.kind),
    )


def _run_spec_id(run_dir: Path) -> str | None:
    """The identity of the spec the run was asked with: its ``spec.json``, or for the last
    round of an audit run in rounds (``--until``) the spec its ``rounds.json`` records
    (the rounds before are runs of their own size, and not of that spec)."""
    try:
        data = json.loads((run_dir / "spec.json").read_text(encoding="utf-8"))
        rounds = run_dir / "rounds.json"
        if rounds.is_file():
            asked = json.loads(rounds.read_text(encoding="utf-8")).get("spec")
            data = asked if isinstance(asked, dict) else data
        return spec_identity(parse_spec(data))
    except (OSError, ValueError, UsageError):
        return None


def _headline(run_dir: Path, kind: str) -> str:
    """One line of the figures that matter most, or why there are none."""
    if not (run_dir / "metrics.json").is_file():
        return "(no metrics)"
    try:
        metrics: Any = read_metrics(run_dir, kind)
    except UsageError:
        return "(metrics.json unreadable: biasaudit report says why)"
    line: str = audit_kind(kind).headline(metrics)
    return line


class _Finished(Protocol):
    @property
    def exit_code(self) -> int: ...


class _Compared(Protocol):
    @property
    def drift(self) -> bool: ...

    @property
    def version_changed(self) -> bool: ...


F = TypeVar("F", bound=_Finished)
C = TypeVar("C", bound=_Compared)


@dataclass(frozen=True)
class Reaudited(Generic[F, C]):
    """A finished re-audit: the new run (or experiment), its baseline (the latest of the
    same spec, or of the same audit and interventions) and their comparison."""

    finished: F
    baseline: Path | None
    comparison: C | None
    fail_on: FailOn | None

    @property
    def alert(self) -> bool:
        """Whether the comparison met the ``fail_on`` condition."""
        found = self.comparison
        if found is None or self.fail_on is None:
            return False
        drift, version = found.drift, found.version_changed
        return {"drift": drift, "version": version, "any": drift or version}[self.fail_on]

    @property
    def exit_code(self) -> int:
        """1 when requests failed (the run's, some arm's), ``DRIFT_EXIT_CODE`` on an
        alert, else 0."""
        return self.finished.exit_code or (DRIFT_EXIT_CODE if self.alert else 0)


ReauditResult = Reaudited[FinishedAudit, Comparison]
"""A re-audit of a run."""


def reaudit(
    spec_path: Path,
    *,
    history: Path | None = None,
    fail_on: FailOn | None = None,
    alpha: float = 0.05,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
) -> ReauditResult:
    """Run ``spec_path`` afresh into ``history`` and compare it with the latest baseline."""
    overrides: dict[str, Any] = {"fresh": True, "replay": False}
    if history is not None:
        overrides["runs_dir"] = str(history)
    spec = load_spec(spec_path, overrides)
    baseline = latest_baseline(spec.runs_dir, spec)
    if baseline is not None:  # a damaged baseline is named before anything is sent
        try:
            read_metrics(baseline, read_manifest(baseline).kind)
        except UsageError as error:
            raise UsageError(
                f"reaudit: the baseline, the latest run of this spec, cannot be read; nothing "
                f"was sent. {error}; or move that run out of {spec.runs_dir} to compare with "
                "the run before it"
            ) from None
    finished = run_spec(spec, stderr=stderr, command=command)
    comparison = None
    if baseline is not None and finished.manifest.status == "completed":
        try:
            comparison = compare_runs(baseline, finished.run_dir, alpha=alpha)
        except UsageError as error:  # the baseline's other files: the new run is kept
            raise UsageError(
                f"{error}. The new run {finished.run_dir} is whole: once the baseline is "
                f"mended, `biasaudit compare {baseline} {finished.run_dir}` compares them"
            ) from None
        write_comparison(comparison, finished.run_dir / "compare.json")
    return ReauditResult(finished, baseline, comparison, fail_on)


ExperimentReaudit = Reaudited[FinishedExperiment, ExperimentComparison]
"""A re-audit of a mitigation experiment."""


def experiment_history(
    runs_dir: Path, spec: AuditSpec, interventions: Sequence[Intervention | None]
) -> list[HistoryEntry]:
    """The experiments in ``runs_dir`` whose baseline is a run of ``spec`` and whose
    interventions are ``interventions``, as resolved (names to hide included), in order;
    oldest first (``biasaudit history --spec`` of an experiment's spec)."""
    from biasaudit.experiments.runner import read_experiment
    from biasaudit.store.experiments import EXPERIMENT_FILE

    wanted = spec_identity(spec)
    entries = []
    for record in runs_dir.glob(f"*/{EXPERIMENT_FILE}"):
        folder = record.parent
        try:
            experiment = read_experiment(folder)
        except UsageError:
            continue
        if not experiment.arms or [a.intervention for a in experiment.arms[1:]] != list(
            interventions
        ):
            continue
        baseline = experiment.run_dir(experiment.arms[0].name, folder)
        if _run_spec_id(baseline) != wanted:
            continue
        try:
            manifests = [read_manifest(experiment.run_dir(a.name, folder)) for a in experiment.arms]
        except UsageError:
            continue
        best = experiment.costs[0] if experiment.costs else None
        entries.append(HistoryEntry(
            run_dir=folder, started_at=manifests[0].started_at, kind="experiment",
            status="completed", model=experiment.model,
            versions=tuple(sorted({v for m in manifests for v in m.model_versions})),
            fingerprints=tuple(sorted({f for m in manifests for f in m.system_fingerprints})),
            spec_id=wanted, replay_of=experiment.replay_of,
            headline=f"best: {best.arm}, {best.verdict}" if best else "no intervention",
        ))  # fmt: skip
    return sorted(entries, key=lambda e: e.started_at)


def latest_experiment(
    runs_dir: Path, spec: AuditSpec, interventions: Sequence[Intervention | None]
) -> Path | None:
    """The latest experiment of :func:`experiment_history` that is not a replay, if any."""
    for entry in reversed(experiment_history(runs_dir, spec, interventions)):
        if entry.replay_of is None:
            return entry.run_dir
    return None


def reaudit_experiment(
    spec_path: Path,
    *,
    history: Path | None = None,
    fail_on: FailOn | None = None,
    alpha: float = 0.05,
    provider: Any = None,
    command: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> ExperimentReaudit:
    """Run the experiment ``spec_path`` describes afresh into ``history`` and compare it
    with the latest experiment of the same audit and interventions there.

    Raises
    ------
    UsageError
        The spec or its interventions (before anything is sent); a baseline whose arms
        cannot be read (after the new experiment is kept, which is named).
    """
    from biasaudit.experiments.runner import arm_specs, load_experiment_spec, run_experiment
    from biasaudit.reports.experiment import compare_experiments
    from biasaudit.store.experiments import EXPERIMENT_COMPARE_FILE
    from biasaudit.store.files import write_text

    overrides: dict[str, Any] = {"fresh": True, "replay": False}
    if history is not None:
        overrides["runs_dir"] = str(history)
    spec, interventions = load_experiment_spec(spec_path, overrides)
    resolved = [arm.intervention for _, arm in arm_specs(spec, interventions)[1:]]
    baseline = latest_experiment(Path(spec.runs_dir), spec, resolved)
    finished = run_experiment(spec, interventions, provider=provider, command=command,
                              alpha=alpha, progress=progress)  # fmt: skip
    comparison = None
    if baseline is not None:
        from biasaudit.engine.progress import phase

        try:
            with phase("comparing with the experiment before"):
                comparison = compare_experiments(baseline, finished.folder, alpha=alpha)
        except UsageError as error:  # the baseline's arms: the new experiment is kept
            raise UsageError(
                f"{error}. The new experiment {finished.folder} is whole: once the baseline "
                f"is mended, `biasaudit compare {baseline} {finished.folder}` compares them"
            ) from None
        record = finished.folder / "compare" / EXPERIMENT_COMPARE_FILE
        record.parent.mkdir(exist_ok=True)
        write_text(record, json.dumps(comparison.to_json(), indent=2) + "\n")
    return ExperimentReaudit(finished, baseline, comparison, fail_on)
