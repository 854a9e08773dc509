"""``evidence.html``: the answers behind a run's figures, one self-contained page.

An auditor who signs a finding must show what makes it: which names and resumes,
what the model was asked and what it answered. This page holds, for an allocation
run, every candidate (name, group, resume, score, the answer as read, the label
probabilities, whether it was irregular or refused, and the prompt exactly as sent,
from ``prompts.jsonl.gz``), and the **counterfactual pairs**: each resume's mean
score under each group's names beside the reference group's on the same resume, so
that the resumes where a group is passed over most are one click away.

The page needs no network: its data sit in the file as JSON (every ``<`` written
``\\u003c``, so that no text ends the script), and its script writes them into the
page as text (``textContent``), never as markup: a name, an answer or a resume that
holds ``<script>`` stays text. Its address takes a filter
(``evidence.html#view=pairs&group=B_M``), which the report's figures link to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from biasaudit._version import __version__
from biasaudit.errors import UsageError

__all__ = ["EVIDENCE_FILE", "evidence_data", "evidence_kind", "write_evidence"]

EVIDENCE_FILE = "evidence.html"


def evidence_kind(run_dir: Path) -> bool:
    """Whether the run has an evidence page: an allocation run with per-candidate scores
    (the other kinds' pages are still to come)."""
    from biasaudit.store.runs import read_manifest

    manifest_file = run_dir / "manifest.json"
    return (
        manifest_file.is_file()
        and (run_dir / "scores.csv").is_file()
        and read_manifest(run_dir).kind == "allocation"
    )


def evidence_data(run_dir: Path) -> dict[str, Any] | None:
    """The page's data for an allocation run with per-candidate scores (None for
    another kind, or a run without ``scores.csv``)."""
    import pandas as pd

    from biasaudit.store.runs import (
        PROMPTS_FILE,
        prompt_sent,
        read_prompts,
        read_responses,
        read_run_json,
    )
    from biasaudit.store.tables import read_run_table

    if not evidence_kind(run_dir):
        return None
    metrics = read_run_json(run_dir / "metrics.json")
    reference = str(metrics.get("reference_group", ""))
    scores = read_run_table(run_dir / "scores.csv", ("candidate_id", "group", "score"))
    answers: dict[str, Any] = {}
    if (run_dir / "responses.jsonl").is_file():
        for response in read_responses(run_dir):
            answers.setdefault(response.id, response)
    prompts: dict[str, Any] = {}
    verified = True
    if (run_dir / PROMPTS_FILE).is_file():
        header, found = read_prompts(run_dir)
        for (request_id, _), record in found.items():
            prompts.setdefault(request_id, record.request)
            verified = verified and prompt_sent(header, record)
    item = next((c for c in ("resume_id", "item") if c in scores.columns), None)
    rows = []
    for row in scores.to_dict("records"):
        candidate = str(row["candidate_id"])
        answer = answers.get(candidate)
        request = prompts.get(candidate, {})
        rows.append({
            "candidate": candidate, "name": _text(row.get("name")), "group": str(row["group"]),
            "subtask": _text(row.get("subtask")), "item": _text(row.get(item)) if item else "",
            "qualified": _text(row.get("qualified")), "score": _number(row.get("score")),
            "irregular": str(row.get("irregular")) == "True",
            "refused": str(row.get("refused")) == "True",
            "answer": "" if answer is None else _answer(answer),
            "probabilities": None if answer is None else answer.label_probabilities,
            "prompt": _messages(request),
        })  # fmt: skip
    return {
        "run": run_dir.name, "model": metrics.get("model", ""),
        "simulated": bool(metrics.get("simulated")), "task": metrics.get("task", ""),
        "reference": reference, "group_names": metrics.get("group_names", {}),
        "prompts_verified": verified and bool(prompts), "candidates": rows,
        "pairs": _pairs(pd.DataFrame(rows), reference) if item else [],
    }  # fmt: skip


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else number


def _answer(record: Any) -> str:
    if record.error:
        return f"(no answer: {record.error})"
    if record.refusal:
        return f"(refused: {record.refusal})"
    return record.text if record.text is not None else " | ".join(record.texts or [])


def _messages(request: dict[str, Any]) -> str:
    """The request as the model saw it: each message under its role, or the prompt."""
    if request.get("messages"):
        return "\n\n".join(
            f"[{m.get('role', '')}]\n{m.get('content', '')}" for m in request["messages"]
        )
    return str(request.get("prompt", ""))


def _pairs(frame: Any, reference: str) -> list[dict[str, Any]]:
    """Per item (resume) and group: the mean score of its names on that item, the
    reference group's on the same item, and the gap; the counterfactual pair of an
    audit of names, one resume shown under each group's names."""
    if frame.empty or not reference:
        return []
    scored = frame[frame["score"].notna()]
    means = scored.groupby(["item", "group"], sort=False)["score"].agg(["mean", "count"])
    pairs = []
    for (item, group), found in means.iterrows():
        if group == reference or (item, reference) not in means.index:
            continue
        base = means.loc[(item, reference)]
        pairs.append({
            "item": item, "group": group, "mean": float(found["mean"]),
            "reference_mean": float(base["mean"]), "gap": float(found["mean"] - base["mean"]),
            "names": int(found["count"]), "reference_names": int(base["count"]),
        })  # fmt: skip
    return pairs


def write_evidence(run_dir: str | Path) -> Path | None:
    """Write ``evidence.html`` into an allocation run (None for another kind).

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


def _embedded(data: dict[str, Any]) -> str:
    """JSON that no text of it can end the script it sits in."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
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
