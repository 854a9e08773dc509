"""Study reports: the page of a study folder, whatever the kind of its runs.

A study folder holds ``study.json`` (``kind``, ``runs``, ``ndcg_at``); the
report is computed afresh from the runs it names, by the same functions as
``biasaudit study``; each kind draws its own sections
(``study_page`` of its :class:`~biasaudit.kinds.declare.Kind`).
"""

from __future__ import annotations

from pathlib import Path

from biasaudit.errors import UsageError
from biasaudit.render.document import Document

__all__ = ["study_document"]


def study_document(folder: Path) -> Document:
    """The report of the study described by ``folder/study.json``."""
    from biasaudit.kinds.registry import KINDS, audit_kind
    from biasaudit.store.runs import read_run_json

    study = read_run_json(folder / "study.json")
    kind, runs = study.get("kind"), [Path(p) for p in study.get("runs", [])]
    if kind not in KINDS:
        raise UsageError(f"{folder}/study.json names an unknown kind of study: {kind!r}")
    found = audit_kind(kind)
    title, sections, simulated = found.study_page(
        found.study(runs, ndcg_at=int(study.get("ndcg_at", 3)))
    )
    subtitle = f"Study folder {folder.name}"
    if not simulated and any(_simulated(run) for run in runs):
        subtitle += (
            ". Some runs are of a SIMULATED model, not a real one: the runs table marks them"
        )
    document = Document(title, subtitle, simulated)
    document.sections = sections
    return document


def _simulated(run: Path) -> bool:
    from biasaudit.store.runs import read_manifest

    try:
        return read_manifest(run).simulated
    except UsageError:
        return False
