"""The report of a comparison of two runs (``biasaudit compare``, ``reaudit``).

Sections: the verdict in plain words, the model versions each endpoint
reported and whether they changed, the two runs, charts of every figure's
difference B - A with its interval (filled where it changed beyond noise),
the table of every test with its Holm-adjusted p-value, and the commands that
rebuild it. Everything comes from ``compare.json``, so the report is rebuilt
the same way later; the runs' manifests and metrics, where still found, add
dates, counts, answer counts per version and the groups' names.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from biasaudit.errors import UsageError
from biasaudit.render.common import p_value, points, signed
from biasaudit.render.document import Bullets, Code, Document, Paragraph, Section, Table
from biasaudit.render.panels import group_label, metric_name
from biasaudit.reports.compare import VERSION_ONLY, ChangeTest, Comparison
from biasaudit.store.runs import Manifest, damaged_file, read_manifest, read_run_json

if TYPE_CHECKING:
    from biasaudit.kinds.declare import Kind

__all__ = ["COMPARE_FILE", "compare_document"]

COMPARE_FILE = "compare.json"
# The changed figures spelled out in the verdict; the table below has them all.
_MAX_SENTENCES = 12


@dataclass(frozen=True)
class _Run:
    """One side of the comparison: the run folder if still found, and what it holds."""

    side: str
    given: str
    path: Path | None
    manifest: Manifest | None
    metrics: Any


def _locate(given: str, folder: Path) -> Path | None:
    """The run folder: as recorded, else beside ``folder`` or in it (the runs were moved)."""
    recorded = Path(given)
    for candidate in (recorded, folder.parent / recorded.name, folder / recorded.name):
        if (candidate / "manifest.json").is_file():
            return candidate
    return None


def _run(side: str, given: str, folder: Path, kind: str) -> _Run:
    path = _locate(given, folder)
    manifest = metrics = None
    if path is not None:
        try:
            manifest = read_manifest(path)
            from biasaudit.kinds.registry import read_metrics

            metrics = read_metrics(path, kind)
        except (OSError, ValidationError, UsageError):
            pass  # the report stands on compare.json alone
    return _Run(side, given, path, manifest, metrics)


def _kind(comparison: Comparison) -> Kind:
    from biasaudit.kinds.registry import audit_kind

    return audit_kind(comparison.kind)


def _in_points(metric: str, kind: Kind) -> bool:
    return metric.partition(" ")[0] in kind.in_points


def _value(metric: str, value: float | None, kind: Kind) -> str:
    return points(value) if _in_points(metric, kind) else signed(value, 3)


def _sentence(test: ChangeTest, names: Mapping[str, str], kind: Kind) -> str:
    unit = " points" if _in_points(test.metric, kind) else ""
    low, high = (_value(test.metric, bound, kind) for bound in test.ci)
    figure = metric_name(test.metric, kind.figure_names)
    return (
        f"{group_label(test.group, names) + ': ' if test.group else ''}{figure} went from "
        f"{_value(test.metric, test.before, kind)} to {_value(test.metric, test.after, kind)}"
        f"{unit}, a change of {_value(test.metric, test.difference, kind)}{unit} (95% CI {low} "
        f"to {high}; "
        f"Holm-adjusted p {p_value(test.p_adjusted)})."
    )


def _group_names(runs: Sequence[_Run]) -> dict[str, str]:
    names: dict[str, str] = {}
    for run in runs:
        names.update(getattr(run.metrics, "group_names", None) or {})
    return names


def _versions_text(versions: Sequence[str]) -> str:
    return " → ".join(versions) if versions else "(none reported)"


def _verdict_section(comparison: Comparison, names: Mapping[str, str]) -> Section:
    tests, changed, alpha = comparison.tests, comparison.changed_tests, comparison.alpha
    groups = ", ".join(group_label(g, names) for g in comparison.changed_groups)
    kind = _kind(comparison)
    where = "in" if kind.compared_per == "context" else "for"
    verdict = f"Verdict: {comparison.verdict}" + (f", {where} {groups}." if groups else ".")
    if comparison.drift:
        summary = f"{len(changed)} of the {len(tests)} figures tested moved beyond noise."
    else:
        summary = f"None of the {len(tests)} figures tested moved beyond noise."
    versions = comparison.versions
    if versions.changed:
        summary += (
            " The model version the endpoint reported changed: "
            f"{', '.join(versions.versions_a) or '(none)'} → "
            f"{', '.join(versions.versions_b) or '(none)'}"
            + ("" if comparison.verdict != VERSION_ONLY else ", yet it answers alike")
            + "."
        )
    else:
        summary += " The model version the endpoint reported is the same in both runs."
    blocks: list[Any] = [Paragraph(verdict, strong=True), Paragraph(summary)]
    if comparison.different_settings:
        blocks.append(
            Bullets(
                [f"The runs asked differently: {item}." for item in comparison.different_settings]
            )
        )
    if changed:
        sentences = [_sentence(test, names, kind) for test in changed[:_MAX_SENTENCES]]
        if len(changed) > _MAX_SENTENCES:
            sentences.append(f"… and {len(changed) - _MAX_SENTENCES} more (table below).")
        blocks.append(Bullets(sentences))
    blocks.append(
        Paragraph(
            "Each figure's difference B - A is tested for no change; the "
            f"{len(tests)} p-values are adjusted together (Holm), and a figure counts as "
            f"changed when its adjusted p is below {alpha:g}. So a figure that moved within "
            "its noise is not called drift."
        )
    )
    if comparison.notes:
        blocks.append(Bullets([f"Note: {note}" for note in comparison.notes]))
    return Section("Verdict", "verdict", blocks)


def _answer_counts(versions: Sequence[str], counts: Mapping[str, int] | None) -> str:
    if not versions:
        return "(none reported)"
    if counts is None:
        return ", ".join(versions)
    return ", ".join(f"{v} ({counts.get(v, 0)} answers)" for v in versions)


def _counts(run: _Run, field: str) -> Mapping[str, int] | None:
    """Answers per reported version (or fingerprint) in the run's manifest, if found."""
    return None if run.manifest is None else dict(getattr(run.manifest, field))


def _versions_section(comparison: Comparison, a: _Run, b: _Run) -> Section:
    versions = comparison.versions

    def state(before: Sequence[str], after: Sequence[str]) -> str:
        return "unchanged" if set(before) == set(after) else "CHANGED"

    rows = [
        ["model asked for", comparison.model_a, comparison.model_b,
         "same" if comparison.model_a == comparison.model_b else "DIFFERENT"],
        ["model version reported",
         _answer_counts(versions.versions_a, _counts(a, "model_versions")),
         _answer_counts(versions.versions_b, _counts(b, "model_versions")),
         state(versions.versions_a, versions.versions_b)],
        ["system fingerprint",
         _answer_counts(versions.fingerprints_a, _counts(a, "system_fingerprints")),
         _answer_counts(versions.fingerprints_b, _counts(b, "system_fingerprints")),
         state(versions.fingerprints_a, versions.fingerprints_b)],
    ]  # fmt: skip
    headline = (
        f"The model version changed: {_versions_text(versions.versions_a)} → "
        f"{_versions_text(versions.versions_b)}."
        if set(versions.versions_a) != set(versions.versions_b)
        else (
            "The system fingerprint changed; the model version did not."
            if versions.changed
            else "Unchanged: both runs were answered by the same reported model version."
        )
    )
    return Section(
        "Model version",
        "versions",
        [
            Paragraph(headline, strong=True),
            Paragraph(
                "What each endpoint said about the model behind the name: its dated snapshot "
                "(model version) and, where given, the system fingerprint of the serving "
                "configuration. A change means another model answered, whatever the figures say."
            ),
            Table(["", "A (before)", "B (after)", ""], rows, left=frozenset({0, 1, 2, 3})),
        ],
    )


def _run_cells(run: _Run) -> list[str]:
    manifest = run.manifest
    if manifest is None:
        missing = "not found (read from compare.json)"
        return [run.given, missing, "-", "-", "-", "-"]
    counts = manifest.counts
    return [
        str(run.path),
        manifest.run_id,
        manifest.started_at.isoformat(timespec="seconds"),
        manifest.status + (" (replay)" if manifest.replay_of else ""),
        f"{counts.requests} ({counts.sent} sent, {counts.cache_hits} from cache, "
        f"{counts.failures} failed)",
        f"biasaudit {manifest.tool_version}",
    ]


def _runs_section(a: _Run, b: _Run) -> Section:
    labels = ["run directory", "run id", "started (UTC)", "status", "requests", "tool"]
    cells_a, cells_b = _run_cells(a), _run_cells(b)
    rows = [[label, cells_a[i], cells_b[i]] for i, label in enumerate(labels)]
    return Section(
        "Runs compared",
        "runs",
        [Table(["", "A (before)", "B (after)"], rows, left=frozenset({0, 1, 2}))],
    )


def _differences_section(
    comparison: Comparison, names: Mapping[str, str], reference: str, simulated: bool
) -> Section:
    kind = _kind(comparison)
    if not comparison.tests:
        blocks: list[Any] = [Paragraph("No figure could be tested (see the notes).")]
    else:
        blocks = list(kind.compare_figures(comparison, names, reference, simulated))
    return Section(f"Differences per {kind.compared_per}", "differences", blocks)


def _tests_section(comparison: Comparison) -> Section:
    grouped = any(test.group is not None for test in comparison.tests)
    kind = _kind(comparison)
    where = "context" if kind.compared_per == "context" else "group"
    headers = [
        "figure", *([where] if grouped else []), "A", "B", "B - A [95% CI]", "p", "p (Holm)",
        "changed", "method",
    ]  # fmt: skip
    rows = []
    # The most significant first; ties (most figures, at p = 1) keep their order by group.
    for test in sorted(comparison.tests, key=lambda t: t.p_adjusted):
        low, high = (_value(test.metric, bound, kind) for bound in test.ci)
        unit = " (points)" if _in_points(test.metric, kind) else ""
        rows.append(
            [
                metric_name(test.metric, kind.figure_names) + unit,
                *([test.group or "-"] if grouped else []),
                _value(test.metric, test.before, kind),
                _value(test.metric, test.after, kind),
                f"{_value(test.metric, test.difference, kind)} [{low}, {high}]",
                p_value(test.p_value),
                p_value(test.p_adjusted),
                "CHANGED" if test.changed(comparison.alpha) else "no",
                test.method,
            ]
        )
    last = len(headers) - 1
    return Section(
        "Every figure tested",
        "tests",
        [
            Table(
                headers,
                rows,
                caption=f"{len(rows)} tests of no change, most significant first; p: each "
                "test's own, p (Holm): "
                f"adjusted for all {len(rows)}; changed when p (Holm) < {comparison.alpha:g}."
                + kind.compare_note,
                left=frozenset({0, 1, last - 1, last} if grouped else {0, last - 1, last}),
            )
        ],
    )


def _commands_section(comparison: Comparison, folder: Path, a: _Run, b: _Run) -> Section:
    run_a, run_b = str(a.path or a.given), str(b.path or b.given)
    lines = [
        "# this comparison again (prints it, and writes a new compare folder with its report)",
        shlex.join(["biasaudit", "compare", run_a, run_b, "--alpha", f"{comparison.alpha:g}"]),
        "# this report, rebuilt from compare.json",
        shlex.join(["biasaudit", "report", str(folder)]),
        "# each run rebuilt from the cache (sends nothing) and checked against itself",
        shlex.join(["biasaudit", "replay", run_a]),
        shlex.join(["biasaudit", "replay", run_b]),
    ]
    return Section("Commands", "commands", [Code("\n".join(lines))])


def compare_document(folder: Path) -> Document:
    """The report of the comparison in ``folder/compare.json`` (a compare folder or a reaudit run).

    Raises
    ------
    UsageError
        ``compare.json`` is missing or unreadable.
    """
    path = folder / COMPARE_FILE
    if not path.is_file():
        raise UsageError(f"{folder}: no {COMPARE_FILE}")
    data = read_run_json(path)
    try:
        comparison = Comparison.from_json(data)
    except (ValueError, KeyError, TypeError) as error:
        raise damaged_file(path, f"not a comparison: {type(error).__name__} {error}") from None
    a = _run("A", comparison.run_a, folder, comparison.kind)
    b = _run("B", comparison.run_b, folder, comparison.kind)
    simulated = any(
        run.manifest.simulated if run.manifest else model.startswith("sim/")
        for run, model in ((a, comparison.model_a), (b, comparison.model_b))
    )
    names = _group_names([a, b])
    reference = str(getattr(b.metrics or a.metrics, "reference_group", "the reference"))
    model = comparison.model_b
    if comparison.model_a != comparison.model_b:
        model = f"{comparison.model_a} → {comparison.model_b}"
    ids = [run.manifest.run_id if run.manifest else Path(run.given).name for run in (a, b)]
    document = Document(
        f"What changed: {comparison.kind} audit of {model}",
        f"Run A {ids[0]} → run B {ids[1]}; {len(comparison.tests)} tests of no change, "
        f"Holm-adjusted, alpha {comparison.alpha:g}; verdict: {comparison.verdict}",
        simulated,
    )
    document.sections = [
        _verdict_section(comparison, names),
        _versions_section(comparison, a, b),
        _runs_section(a, b),
        _differences_section(comparison, names, reference, simulated),
        _tests_section(comparison),
        _commands_section(comparison, folder, a, b),
    ]
    return document
