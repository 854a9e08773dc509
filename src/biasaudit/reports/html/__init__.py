"""Reports that stand on their own: one self-contained HTML file and a Markdown version.

``write_report(run_dir)`` writes ``report.html`` and ``report.md`` (with its
figures in ``report_figures/``) into an allocation, Grade Score or RUTEd run
directory; ``write_study_report(run_dirs)`` writes them into a new study
directory beside the runs, with ``study.json`` naming the runs, so that
``write_report`` can rebuild it; ``write_compare_report(comparison)`` writes
a comparison's report into a new compare folder beside run B, with
``compare.json``. A run holding a ``compare.json`` (a re-audit's) gets the
comparison's report too, as ``compare.html`` and ``compare.md``. The HTML
embeds its figures as PNG ``data:`` URIs and its style sheet inline: it needs
no network to be read. A simulated model is labelled on every section it
appears in.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from biasaudit._version import __version__
from biasaudit.errors import UsageError
from biasaudit.render.common import read_spec
from biasaudit.render.document import Document, to_html, to_markdown
from biasaudit.store.experiments import EXPERIMENT_COMPARE_FILE, EXPERIMENT_FILE
from biasaudit.store.files import replaced_together, write_bytes, write_text
from biasaudit.store.runs import read_manifest
from biasaudit.textfiles import a_run

if TYPE_CHECKING:
    from biasaudit.kinds._evidence import Evidence
    from biasaudit.reports.compare import Comparison
    from biasaudit.reports.experiment import ExperimentComparison

__all__ = [
    "REPORT_FORMATS",
    "ReportFormat",
    "write_compare_report",
    "write_experiment_compare_report",
    "write_report",
    "write_study_report",
]

ReportFormat = Literal["html", "md", "both"]
REPORT_FORMATS = ("html", "md", "both")
FIGURE_DIR = "report_figures"
STUDY_FILE = "study.json"
COMPARE_FILE = "compare.json"


def _footer(document: Document) -> str:
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    simulated = " Contains a SIMULATED model: not a real model." if document.simulated else ""
    return f"Written by biasaudit {__version__} on {stamp}.{simulated}"


def _write(
    document: Document, folder: Path, report_format: ReportFormat, stem: str = "report"
) -> list[Path]:
    """Write the document's pages (and the Markdown's figures) in ``folder``; a failure
    (a full or read-only disk) leaves the earlier pages whole and is named.

    Raises
    ------
    UsageError
        The folder cannot be written.
    """
    try:
        return _pages(document, folder, report_format, stem)
    except OSError as error:
        raise UsageError(
            f"cannot write the report in {folder} ({error.strerror or error}); the earlier "
            "report, if any, is as it was: free some space, or copy the folder to a disk "
            "that may be written, and run biasaudit report there"
        ) from None


def _pages(document: Document, folder: Path, report_format: ReportFormat, stem: str) -> list[Path]:
    footer = _footer(document)
    figure_dir = FIGURE_DIR if stem == "report" else f"{stem}_figures"
    texts: dict[Path, str] = {}
    if report_format in ("html", "both"):
        texts[folder / f"{stem}.html"] = to_html(document, footer=footer)
    if report_format in ("md", "both"):
        figures = folder / figure_dir
        figures.mkdir(exist_ok=True)
        for figure in document.figures():
            write_bytes(figures / figure.name, figure.png)
        texts[folder / f"{stem}.md"] = to_markdown(document, figure_dir=figure_dir, footer=footer)
    # the pages replace the earlier ones together, or not at all
    with replaced_together(list(texts)) as temporary:
        for path, text in zip(temporary, texts.values(), strict=True):
            path.write_text(text, encoding="utf-8")
    return list(texts)


def run_document(run_dir: Path) -> Document:
    """The report of the run (or study) in ``run_dir``.

    Raises
    ------
    UsageError
        The folder is not a run of a kind with a report.
    """
    if (run_dir / EXPERIMENT_FILE).exists():
        from biasaudit.reports.html._experiment import experiment_document

        return experiment_document(run_dir)
    if (run_dir / EXPERIMENT_COMPARE_FILE).exists():
        from biasaudit.reports.html._experiment import experiment_compare_document

        return experiment_compare_document(run_dir)
    if (run_dir / STUDY_FILE).exists():
        from biasaudit.reports.html._study import study_document

        return study_document(run_dir)
    if (run_dir / COMPARE_FILE).exists() and not (run_dir / "manifest.json").exists():
        from biasaudit.reports.html._compare import compare_document

        return compare_document(run_dir)
    manifest = read_manifest(run_dir)
    if not (run_dir / "metrics.json").exists():
        why = f" (it {manifest.status}: {manifest.error})" if manifest.error else ""
        raise UsageError(
            f"{run_dir} has no metrics.json{why}: {a_run(manifest.kind)} has no report"
        )
    spec = read_spec(run_dir)
    from biasaudit.kinds.registry import KINDS, audit_kind

    if manifest.kind not in KINDS:
        raise UsageError(
            f"{run_dir} is {a_run(manifest.kind)}: reports cover {', '.join(KINDS)} runs"
        )
    document: Document = audit_kind(manifest.kind).run_document(run_dir, manifest, spec)
    return _with_evidence(_with_rounds(document, run_dir), run_dir)


def _with_evidence(document: Document, run_dir: Path) -> Document:
    """A run with an evidence page links to it: its tables' labels that name a unit
    (:func:`linked_document`), and before its replay section, the links its kind gives
    (every unit and answer, and the units behind each figure beyond noise)."""
    from biasaudit.render.document import Links, Paragraph, Section
    from biasaudit.reports.evidence import EVIDENCE_FILE, kind_evidence

    evidence = kind_evidence(run_dir)
    if evidence is None:
        return document
    links = [(words, EVIDENCE_FILE + address) for words, address in evidence.links]
    section = Section("Evidence: the answers behind the figures", "evidence", [
        Paragraph(f"{EVIDENCE_FILE}, beside this report, holds every answer the figures rest "
                  "on, with filters, search, sorting and CSV export:"),
        Links(links),
    ])  # fmt: skip
    sections = list(linked_document(document, evidence).sections)
    at = next((i for i, s in enumerate(sections) if s.anchor == "replay"), len(sections))
    return replace(document, sections=[*sections[:at], section, *sections[at:]])


def linked_document(document: Document, evidence: Evidence) -> Document:
    """``document`` with every table label that names a unit of ``evidence`` linked to
    the rows behind it (on ``evidence.html`` beside it)."""
    from biasaudit.reports.evidence import EVIDENCE_FILE

    units = {label: EVIDENCE_FILE + address for label, address in evidence.units.items()}
    sections = [replace(s, blocks=[_linked(b, units) for b in s.blocks])
                for s in document.sections]  # fmt: skip
    return replace(document, sections=sections)


def _linked(block: Any, units: dict[str, str]) -> Any:
    """A table whose label cells name a unit of the evidence page, those cells linked to
    the rows behind them (a row whose labels, joined by " / ", name one: its last label
    cell); any other block as it is."""
    from biasaudit.render.document import Table

    if not isinstance(block, Table) or not units:
        return block
    links = {}
    for r, row in enumerate(block.rows):
        labels = [i for i in sorted(block.left) if i < len(row)]
        whole = " / ".join(row[i].strip() for i in labels)  # a row named by all its labels
        if labels and whole in units:
            links[(r, labels[-1])] = units[whole]
            continue
        links.update({(r, i): units[row[i].strip()] for i in labels if row[i].strip() in units})
    return replace(block, links={**block.links, **links}) if links else block


def _with_rounds(document: Document, run_dir: Path) -> Document:
    """The report of a run in rounds (``--until``) opens with them: the rule, why it
    stopped, each round's figures with the intervals valid at every look, and a warning
    that the run's own intervals further down do not allow for the looks."""
    from biasaudit.kinds._rounds import read_rounds, rounds_lines
    from biasaudit.render.document import Paragraph, Section, Table
    from biasaudit.render.text import PlainTable

    try:
        record = read_rounds(run_dir)
    except UsageError as error:  # a damaged record: the run's own report stands, and says so
        note = Section(
            "Rounds (--until)",
            "rounds",
            [Paragraph(f"{error}; its rounds are left out", strong=True)],
        )
        return replace(document, sections=[note, *document.sections])
    if record is None:
        return document
    blocks: list[Paragraph | Table] = [
        Paragraph(
            f"This audit ran in rounds of more {record.unit} until --until {record.until} "
            f"held, and stopped at round {len(record.rounds)}. The intervals that hold at "
            "every look, whatever the round it stopped at, are the ones in the table below "
            f"({record.design}). The run's own intervals in the sections after it are for "
            "its last size alone: they do not allow for the looks taken on the way, and are "
            "narrower than what the audit can claim.",
            strong=True,
        )
    ]
    for line in rounds_lines(record):
        if isinstance(line, PlainTable):
            blocks.append(Table.of(line))
        elif line:
            blocks.append(Paragraph(str(line)))
    section = Section("Rounds (--until)", "rounds", list(blocks))
    return replace(document, sections=[section, *document.sections])


def write_report(run_dir: str | Path, report_format: ReportFormat = "both") -> list[Path]:
    """Write the report of the run, study, comparison or experiment in ``run_dir`` into it
    (an experiment's arms get theirs too where they have none).

    Returns the files written: ``report.html`` / ``report.md``, and for a run
    holding a ``compare.json`` (a re-audit) ``compare.html`` / ``compare.md`` too. A
    run also gets ``evidence.html`` beside its HTML report, which links it.
    """
    from biasaudit.reports.evidence import write_evidence

    folder = Path(run_dir)
    written = _write(run_document(folder), folder, report_format)
    if report_format in ("html", "both") and (folder / "manifest.json").exists():
        write_evidence(folder)  # the report links it
    if (folder / EXPERIMENT_FILE).exists():
        from biasaudit.experiments.runner import read_experiment
        from biasaudit.reports.experiment import write_experiment_evidence

        experiment = read_experiment(folder)
        for arm in experiment.arms:  # the page links each arm's own report
            run = experiment.run_dir(arm.name, folder)
            if run.is_dir() and not (run / "report.html").exists():
                written += write_report(run, report_format)
        if report_format in ("html", "both"):
            write_experiment_evidence(folder)
    if (folder / COMPARE_FILE).exists() and (folder / "manifest.json").exists():
        from biasaudit.reports.html._compare import compare_document

        written += _write(compare_document(folder), folder, report_format, stem="compare")
    return written


def write_study_report(
    run_dirs: Sequence[str | Path],
    *,
    kind: str,
    ndcg_at: int = 3,
    report_dir: str | Path | None = None,
    report_format: ReportFormat = "both",
) -> list[Path]:
    """Write a study's report into ``report_dir`` (default: a new folder beside the first run).

    The folder gets ``study.json`` (kind, runs, options) besides the report,
    so ``biasaudit report`` can rebuild it.
    """
    runs = [str(Path(path).resolve()) for path in run_dirs]
    if report_dir is None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        report_dir = Path(runs[0]).parent / f"{stamp}-study-{kind}-{secrets.token_hex(2)}"
    folder = Path(report_dir)
    folder.mkdir(parents=True, exist_ok=True)
    study = {"kind": kind, "runs": runs, "ndcg_at": ndcg_at, "tool_version": __version__}
    write_text(folder / STUDY_FILE, json.dumps(study, indent=2) + "\n")
    return write_report(folder, report_format)


def write_compare_report(
    comparison: Comparison,
    *,
    report_dir: str | Path | None = None,
    report_format: ReportFormat = "both",
) -> list[Path]:
    """Write a comparison's report into ``report_dir`` (default: a new folder beside run B).

    The folder gets ``compare.json`` (every test, the runs' paths made
    absolute) besides the report, so ``biasaudit report`` can rebuild it.
    """
    from biasaudit.reports.compare import write_comparison

    absolute = replace(
        comparison,
        run_a=str(Path(comparison.run_a).resolve()),
        run_b=str(Path(comparison.run_b).resolve()),
    )
    if report_dir is None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        report_dir = Path(absolute.run_b).parent / f"{stamp}-compare-{secrets.token_hex(2)}"
    folder = Path(report_dir)
    folder.mkdir(parents=True, exist_ok=True)
    write_comparison(absolute, folder / COMPARE_FILE)
    return write_report(folder, report_format)


def write_experiment_compare_report(
    comparison: ExperimentComparison,
    *,
    report_dir: str | Path | None = None,
    report_format: ReportFormat = "both",
) -> list[Path]:
    """Write two experiments' comparison into ``report_dir`` (default: a new folder beside
    experiment B): the record ``experiment-compare.json``, the report (which ``biasaudit
    report`` can rebuild from the record), and each shared arm's comparison's own report
    in ``arm-<name>/``."""
    absolute = replace(comparison, folder_a=comparison.folder_a.resolve(),
                       folder_b=comparison.folder_b.resolve())  # fmt: skip
    if report_dir is None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        report_dir = absolute.folder_b.parent / f"{stamp}-compare-{secrets.token_hex(2)}"
    folder = Path(report_dir)
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, arm in absolute.arms:  # each linked from the page as arm-<name>/report.html
        written += write_compare_report(arm, report_dir=folder / f"arm-{name}",
                                        report_format=report_format)  # fmt: skip
    record = json.dumps(absolute.to_json(), indent=2) + "\n"
    try:
        write_text(folder / EXPERIMENT_COMPARE_FILE, record)
    except OSError as error:
        raise UsageError(
            f"cannot write {folder / EXPERIMENT_COMPARE_FILE} ({error.strerror or error})"
        ) from None
    return [*_write(run_document(folder), folder, report_format), *written]
