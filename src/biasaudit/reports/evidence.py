"""``evidence.html``: the answers behind a run's figures, one self-contained page.

An auditor who signs a finding must show what makes it: which names and resumes,
what the model was asked and what it answered. Every kind says what its page holds
(its ``evidence`` step: :mod:`biasaudit.kinds._evidence`): views of its units, each
with the answer as read and the prompt exactly as sent (from ``prompts.jsonl.gz``),
and the links the report gives into them. This module writes them as one page.

The page needs no network: its data sit in the file as JSON (every ``<`` written
``\\u003c``, so that no text ends the script), and its script writes them into the
page as text (``textContent``), never as markup: a name, an answer or a resume that
holds ``<script>`` stays text. Its address takes a view and filters
(``evidence.html#view=pairs&group=B_M``), which the report's links use.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from biasaudit._version import __version__
from biasaudit.errors import UsageError

__all__ = ["EVIDENCE_FILE", "evidence_data", "evidence_links", "write_evidence"]

EVIDENCE_FILE = "evidence.html"


def _evidence(run_dir: Path) -> Any:
    """The kind's evidence of the run, or None (no run, a kind unknown, none to show)."""
    from biasaudit.kinds.registry import KINDS, audit_kind
    from biasaudit.store.runs import read_manifest

    if not (run_dir / "manifest.json").is_file() or not (run_dir / "metrics.json").is_file():
        return None
    kind = read_manifest(run_dir).kind
    if kind not in KINDS:
        return None
    return audit_kind(kind).evidence(run_dir)


def evidence_links(run_dir: Path) -> list[tuple[str, str]] | None:
    """The report's links into the run's page (text, address), or None (no page)."""
    found = _evidence(run_dir)
    if found is None:
        return None
    return [(words, EVIDENCE_FILE + address) for words, address in found.links]


def evidence_data(run_dir: Path) -> dict[str, Any] | None:
    """The page's data (None where the run has no evidence to show)."""
    from biasaudit.store.runs import read_run_json

    found = _evidence(run_dir)
    if found is None:
        return None
    metrics = read_run_json(run_dir / "metrics.json")
    return {
        "run": run_dir.name, "model": str(metrics.get("model", "")),
        "simulated": bool(metrics.get("simulated")), "task": str(metrics.get("task", "")),
        "about": found.about, "prompts_verified": found.prompts_verified,
        "views": [
            {**asdict(view), "columns": [list(c) for c in view.columns],
             "rows": list(view.rows), "long": list(view.long), "labels": dict(view.labels),
             "marks": {k: list(v) for k, v in view.marks.items()}}
            for view in found.views
        ],
    }  # fmt: skip


def write_evidence(run_dir: str | Path) -> Path | None:
    """Write ``evidence.html`` into a run (None where it has no evidence to show).

    Raises
    ------
    UsageError
        The folder cannot be written.
    """
    from biasaudit.store.files import write_text

    folder = Path(run_dir)
    data = evidence_data(folder)
    if data is None:
        return None
    path = folder / EVIDENCE_FILE
    try:
        write_text(path, evidence_page(data))
    except OSError as error:
        raise UsageError(
            f"cannot write {path} ({error.strerror or error}): free some space, or copy "
            "the run to a disk that may be written"
        ) from None
    return path


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinity made None (JSON has none of them)."""
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def _embedded(data: dict[str, Any]) -> str:
    """JSON that no text of it can end the script it sits in."""
    text = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False)  # fmt: skip
    for raw, safe in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                      ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):  # fmt: skip
        text = text.replace(raw, safe)
    return text


def evidence_page(data: dict[str, Any]) -> str:
    """The page for ``data`` (:func:`evidence_data`)."""
    simulated = (
        '<p class="sim">SIMULATED model: sim/ is biasaudit\'s built-in offline model; no '
        "finding here is about a real model.</p>"
        if data["simulated"]
        else ""
    )
    from biasaudit.textfiles import DATA_DIR

    page = (DATA_DIR / "evidence_page.html").read_text(encoding="utf-8")
    # the data last: a text of theirs that reads "{{SIMULATED}}" must stay text
    page = page.replace("{{SIMULATED}}", simulated).replace("{{VERSION}}", __version__)
    return page.replace("{{DATA}}", _embedded(data))
