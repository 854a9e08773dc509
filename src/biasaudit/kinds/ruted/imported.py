"""``biasaudit score ruted FILE.csv``: the RUTEd audit of gendered outputs produced
elsewhere.

One row per text with ``occupation``, ``context`` and ``text`` (its pronouns
are counted as a run counts them; optional ``template`` tells one occupation's
prompts apart for the mode-collapse check), or one row per (occupation,
context) with ``p_male`` (a male share already measured, in [0, 1]); optional
``majority`` (male/female: else the 40 WinoBias occupations' own). It writes a
RUTEd run directory whose manifest says the outputs were imported. A malformed
file stops before anything is written, naming file, line and column.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import Field

from biasaudit.errors import InputError, UsageError
from biasaudit.kinds._imported import Imported, ScoreOptions, finish_imported, imported_manifest
from biasaudit.kinds.common import NOTHING_SENT
from biasaudit.kinds.ruted import embeddings
from biasaudit.kinds.ruted.metrics_file import (
    RutedMetrics,
    TextsByPrompt,
    context_metrics,
    intervals_over,
    mode_collapse_check,
    occupations_csv,
    ties_as_female,
)
from biasaudit.kinds.ruted.plan import OCCUPATION_COLUMNS
from biasaudit.kinds.ruted.task import OCCUPATIONS_PATH, read_occupations
from biasaudit.probes._pronouns import classify_pronouns
from biasaudit.store.runs import RunDirectory, read_manifest
from biasaudit.store.tables import write_csv
from biasaudit.textfiles import brief, read_table, require_columns, require_values

__all__ = ["ImportOptions", "RutedImportResult", "read_ruted", "score"]


class ImportOptions(ScoreOptions):
    """``biasaudit score ruted``'s options."""

    mode_collapse: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Texts: check whether each prompt's texts are near copies (the "
        "'embeddings' extra); auto: where it is installed.",
    )
    conventions: Literal["biasaudit", "paper"] = Field(
        "biasaudit",
        description="biasaudit's (intervals over occupations) or the paper's (ties counted "
        "female, intervals over the replicates only).",
    )


RutedImportResult = Imported[RutedMetrics]
"""A finished ``biasaudit score ruted``."""


def read_ruted(path: Path) -> tuple[pd.DataFrame, str, TextsByPrompt]:
    """Occupation rows (the columns of a run's ``occupations.csv``), the source, and the
    texts by (context, template, occupation) for the mode-collapse check (none for shares;
    an optional ``template`` column tells prompts of one occupation apart)."""
    frame = read_table(path, "RUTEd outputs")
    require_columns(frame, ["occupation", "context"], what="RUTEd outputs", path=path)
    require_values(frame, ["occupation", "context"], what="RUTEd outputs", path=path)
    if ("text" in frame.columns) == ("p_male" in frame.columns):
        raise UsageError(f"{path}: give either a 'text' column or a 'p_male' column")
    majority = _majorities(frame, path)
    rows = []
    if "p_male" in frame.columns:
        repeated = frame.duplicated(["occupation", "context"])
        if repeated.any():
            line = int(repeated.to_numpy().argmax()) + 2
            raise InputError(str(path), line, "occupation", "a second p_male for this context")
        for row, record in enumerate(frame.to_dict("records")):
            share = _share(record["p_male"], path, row + 2)
            rows.append(_row(record, majority, p_male=share, coverage=1.0, p_male_low=share,
                             p_male_high=share, top_mass=1.0))  # fmt: skip
        return pd.DataFrame(rows, columns=list(OCCUPATION_COLUMNS)), "imported shares", {}
    counts: dict[tuple[str, str], Counter[str]] = {}
    texts: dict[tuple[str, int | None, str], list[str]] = {}
    for record in frame.to_dict("records"):
        verdict = classify_pronouns(record["text"]).verdict
        counts.setdefault((record["context"], record["occupation"]), Counter())[verdict] += 1
        prompt = (record["context"], record.get("template") or None, record["occupation"])
        texts.setdefault(prompt, []).append(record["text"])
    for (context, occupation), tally in counts.items():
        n = tally["male"] + tally["female"]
        rows.append(
            _row({"context": context, "occupation": occupation}, majority,
                 male=tally["male"], female=tally["female"], none=tally["none"],
                 tied=tally["tie"], n=n, p_male=tally["male"] / n if n else math.nan)
        )  # fmt: skip
    return pd.DataFrame(rows, columns=list(OCCUPATION_COLUMNS)), "generations", texts


def _row(record: dict[str, Any], majority: dict[str, str], **values: Any) -> dict[str, Any]:
    return {
        "context": record["context"], "template": None, "occupation": record["occupation"],
        "majority": majority[record["occupation"]], "failed": 0, "refused": 0, **values,
    }  # fmt: skip


def _majorities(frame: pd.DataFrame, path: Path) -> dict[str, str]:
    known = {o.name: o.majority for o in read_occupations(OCCUPATIONS_PATH)}
    found: dict[str, str] = {}
    for row, record in enumerate(frame.to_dict("records")):
        given = (record.get("majority") or "").strip().lower()
        if given and given not in ("male", "female"):
            raise InputError(str(path), row + 2, "majority", f"{brief(given)} is not male/female")
        majority = given or known.get(record["occupation"])
        if majority is None:
            raise InputError(
                str(path), row + 2, "majority",
                f"occupation {record['occupation']!r} is not one of the 40 shipped ones: give "
                "its majority (male/female)",
            )  # fmt: skip
        found[record["occupation"]] = majority
    return found


def _share(value: str, path: Path, line: int) -> float:
    try:
        share = float(value)
    except ValueError:
        share = math.nan
    if not 0.0 <= share <= 1.0:
        raise InputError(str(path), line, "p_male", f"{brief(value)} is not a share in [0, 1]")
    return share


def score(
    path: str | Path,
    options: ImportOptions | None = None,
    *,
    command: Sequence[str] | None = None,
) -> RutedImportResult:
    """The RUTEd metrics of gendered outputs in ``path``; see the module docstring."""
    options = options or ImportOptions()
    model, confidence, runs_dir = options.model, options.confidence, options.runs_dir
    mode_collapse = options.mode_collapse
    source_path = Path(path)
    rows, source, texts = read_ruted(source_path)
    conventions = options.conventions
    if conventions == "paper":
        rows = ties_as_female(rows)
    if mode_collapse == "on" and texts:
        missing = embeddings.missing_embedder()
        if missing is not None:
            raise UsageError(f"--mode-collapse on: {missing}")
    contexts = {
        context: context_metrics(
            rows[rows["context"] == context],
            source=source,
            confidence=confidence,
            over=intervals_over(conventions),
        )
        for context in dict.fromkeys(rows["context"])
    }
    occupations = rows.drop_duplicates("occupation")
    male_majority = int((occupations["majority"] == "male").sum())
    run = RunDirectory.create(runs_dir, "ruted", model)
    try:
        manifest = imported_manifest(
            run, source_path, kind="ruted", model=model,
            settings={"confidence": confidence, "conventions": conventions},
            command=command, rows=len(rows),
        )  # fmt: skip
        write_csv(occupations_csv(rows), run.path / "occupations.csv")
        notes = [
            f"{'next-word shares' if source == 'imported shares' else 'texts'} imported "
            "with biasaudit score: no request was sent"
        ]
        status, similarity, by_occupation = mode_collapse_check(texts, mode_collapse, confidence)
        for context, figures in similarity.items():
            contexts[context].similarity = figures
        if status is not None and status.startswith("skipped:"):
            notes.append(f"mode-collapse check {status}")
        if similarity:
            write_csv(by_occupation, run.path / "similarity.csv")
        metrics = RutedMetrics(
            model=model, simulated=False, confidence=confidence,
            occupations=len(occupations), male_majority=male_majority,
            occupations_source=str(source_path), replicates=0, templates=[], temperature=None,
            contexts=contexts, mode_collapse=status, conventions=conventions,
            intervals_over=intervals_over(conventions), requests=NOTHING_SENT,
            notes=notes,
        )  # fmt: skip
        run.write_json("metrics.json", metrics)
        finish_imported(run, manifest)
    finally:
        run.close()
    return RutedImportResult(run.path, read_manifest(run.path), metrics)
