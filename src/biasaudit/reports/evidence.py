"""``evidence.html``: the answers behind a run's figures, one self-contained page.

An auditor who signs a finding must show what makes it: which names and resumes,
what the model was asked and what it answered. Every kind says what its page holds
(its ``evidence`` step: :mod:`biasaudit.kinds._evidence`): views of its units, each
with the answer as read and the prompt exactly as sent (from ``prompts.jsonl.gz``),
and the links the report gives into them. This module writes them as one page.

The page needs no network: its data sit in the file as gzip-compressed JSON in base64
(no ``<`` in it, so that no text ends the script; :func:`read_page_data` reads them
back), which its script opens with the browser's ``DecompressionStream`` and writes
into the page as text (``textContent``), never as markup: a name, an answer or a resume that
holds ``<script>`` stays text. Its address takes a view and filters
(``evidence.html#view=pairs&group=B_M``), which the report's links use.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from biasaudit._version import __version__
from biasaudit.errors import UsageError
from biasaudit.kinds._evidence import Evidence

__all__ = [
    "EVIDENCE_FILE",
    "evidence_data",
    "evidence_page",
    "kind_evidence",
    "page_data",
    "read_page_data",
    "write_evidence",
]

EVIDENCE_FILE = "evidence.html"


# The last run's evidence, by the run's files as they were read: the report's links and
# its page read a large run's answers once, not twice, and a changed file reads afresh.
_LAST: dict[tuple[Any, ...], Any] = {}
_WRITTEN_HERE = frozenset({EVIDENCE_FILE, "report.html", "report.md"})


def _stamp(run_dir: Path) -> tuple[Any, ...]:
    files = sorted(p for p in run_dir.iterdir() if p.is_file() and p.name not in _WRITTEN_HERE)
    return (str(run_dir.resolve()),
            *((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in files))  # fmt: skip


def kind_evidence(run_dir: Path) -> Evidence | None:
    """The run's evidence as its kind gives it, or None (no run, a kind unknown, none to
    show)."""
    from biasaudit.kinds.registry import KINDS, audit_kind
    from biasaudit.store.runs import read_manifest

    if not (run_dir / "manifest.json").is_file() or not (run_dir / "metrics.json").is_file():
        return None
    stamp = _stamp(run_dir)
    if stamp in _LAST:
        cached: Evidence | None = _LAST[stamp]
        return cached
    kind = read_manifest(run_dir).kind
    found = audit_kind(kind).evidence(run_dir) if kind in KINDS else None
    _LAST.clear()  # one run's at most: a page of 100,000 answers is not kept twice
    _LAST[stamp] = found
    return found


def evidence_data(run_dir: Path) -> dict[str, Any] | None:
    """The page's data (None where the run has no evidence to show)."""
    from biasaudit.store.runs import read_run_json

    found = kind_evidence(run_dir)
    if found is None:
        return None
    metrics = read_run_json(run_dir / "metrics.json")
    return page_data(found, run=run_dir.name, model=str(metrics.get("model", "")),
                     task=str(metrics.get("task", "")),
                     simulated=bool(metrics.get("simulated")))  # fmt: skip


def page_data(
    found: Evidence, *, run: str, model: str, task: str, simulated: bool
) -> dict[str, Any]:
    """The page's data for ``found``, of ``run`` (a run directory, or a file summarised)."""
    # The views' fields as they are (no deep copy of a run's rows): _embedded writes
    # their tuples and mappings as JSON lists and objects.
    return {
        "run": run, "model": model, "simulated": simulated, "task": task,
        "about": found.about, "prompts_verified": found.prompts_verified,
        "views": [{f.name: getattr(view, f.name) for f in fields(view)} for view in found.views],
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
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def _embedded(data: dict[str, Any]) -> str:
    """The data as the page holds them: JSON, gzip-compressed (no time stamp: the same
    run gives the same page), base64-encoded. Base64 has no ``<``: no text of theirs can
    end the script it sits in, or be read as markup."""
    import base64
    import gzip

    text = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    packed = gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)
    return base64.b64encode(packed).decode("ascii")


def read_page_data(path: Path) -> dict[str, Any]:
    """The data an ``evidence.html`` holds (what its script reads), as a dict.

    Raises
    ------
    UsageError
        The file is not an evidence page, or its data are damaged.
    """
    import base64
    import binascii
    import gzip
    import re
    import zlib

    try:
        page = path.read_text(encoding="utf-8")
        found = re.search(r'<script type="application/octet-stream" id="data">(.*?)</script>',
                          page, re.DOTALL)  # fmt: skip
        if found is None:
            raise ValueError("no data in it")
        loaded: dict[str, Any] = json.loads(gzip.decompress(base64.b64decode(found.group(1))))
    except (OSError, ValueError, binascii.Error, zlib.error, EOFError) as error:
        raise UsageError(f"{path}: not an evidence page that can be read ({error})") from None
    return loaded


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
