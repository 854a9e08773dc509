"""``biasaudit score decisions OUTPUTS.csv``: the decisions audit of yes/no answers produced
elsewhere (lm-evaluation-harness, your own harness, another tool).

One row per person asked with ``scenario``, ``age`` (years), ``gender``, ``race`` and
``p_yes`` (the normalised probability of yes, 0 to 1) or ``logit`` (its log-odds);
optionally ``fill`` (``explicit`` or ``implicit``; default explicit) and ``order``
(``yes-first`` or ``no-first``, several rows per person: the orders are averaged, and
their gap measured, as an audit does). Race is scored against ``white`` and gender
against ``male``, compared without case. It writes a decisions run directory whose
manifest says the answers were imported. A malformed file stops before anything is
written, naming file, line and column.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import Field

from biasaudit.engine.progress import phase
from biasaudit.errors import InputError
from biasaudit.kinds._imported import Imported, ScoreOptions, finish_imported, imported_manifest
from biasaudit.kinds.common import NOTHING_SENT
from biasaudit.kinds.decisions.metrics_file import DecisionsMetrics
from biasaudit.kinds.decisions.run import age_scale, baseline, fill_scores
from biasaudit.kinds.decisions.task import ORDERS, persons_frame, require_baseline
from biasaudit.metrics import yes_logit
from biasaudit.store.runs import RunDirectory, read_manifest
from biasaudit.store.tables import write_csv
from biasaudit.textfiles import brief, read_table, require_columns, require_values

__all__ = ["DecisionsImportResult", "ImportOptions", "read_outputs", "score"]


class ImportOptions(ScoreOptions):
    """``biasaudit score decisions``'s options."""

    conventions: Literal["biasaudit", "paper"] = Field(
        "biasaudit",
        description="biasaudit's (scenarios' own fits averaged, t over scenarios, age per 10 "
        "years) or the paper's (the mixed model's estimates, age standardised).",
    )


@dataclass(frozen=True)
class DecisionsImportResult(Imported[DecisionsMetrics]):
    persons: pd.DataFrame


def _number(value: str, column: str, path: Path, line: int) -> float:
    try:
        number = float(value)
    except ValueError:
        raise InputError(str(path), line, column, f"{brief(value)} is not a number") from None
    if not math.isfinite(number):
        raise InputError(str(path), line, column, f"{brief(value)} is not a finite number")
    return number


def read_outputs(path: Path) -> pd.DataFrame:
    """The answers of an outputs file as ``answers.csv`` rows, checked; see the module
    docstring."""
    frame = read_table(path, "outputs")
    require_columns(frame, ["scenario", "age", "gender", "race"], what="outputs", path=path)
    require_values(frame, ["scenario", "age", "gender", "race"], what="outputs", path=path)
    has_p, has_logit = "p_yes" in frame.columns, "logit" in frame.columns
    if not has_p and not has_logit:
        require_columns(frame, ["p_yes"], what="outputs", path=path)
    rows = []
    seen: dict[tuple[str, ...], int] = {}
    for index, record in enumerate(frame.to_dict("records")):
        line = index + 2
        age = _number(record["age"], "age", path, line)
        if not 0 <= age <= 150:
            raise InputError(str(path), line, "age", f"{age:g} is not an age from 0 to 150")
        fill = (record.get("fill") or "explicit").lower()
        if fill not in ("explicit", "implicit"):
            raise InputError(str(path), line, "fill", f"{brief(fill)}: explicit or implicit")
        order = (record.get("order") or "yes-first").lower()
        if order not in ORDERS:
            raise InputError(str(path), line, "order", f"{brief(order)}: yes-first or no-first")
        gender, race = record["gender"].lower(), record["race"].lower()
        key = f"{record['scenario']}|{fill}|{age:g}|{gender}|{race}"
        where = seen.setdefault((key, order), line)
        if where != line:
            raise InputError(str(path), line, None, f"the same person and order as line {where}")
        p_yes, logit = math.nan, math.nan
        if has_p and record["p_yes"] != "":
            p_yes = _number(record["p_yes"], "p_yes", path, line)
            if not 0 <= p_yes <= 1:
                raise InputError(str(path), line, "p_yes", f"{p_yes:g} is not a probability")
            logit = yes_logit(p_yes)
        elif has_logit and record["logit"] != "":
            logit = _number(record["logit"], "logit", path, line)
            p_yes = 1 / (1 + math.exp(-max(-700.0, min(700.0, logit))))
        rows.append({
            "key": key, "scenario": record["scenario"], "fill": fill, "age": age,
            "gender": gender, "race": race, "name": record.get("name", ""), "order": order,
            "p_yes": p_yes, "logit": logit, "n": 1, "irregular": 0, "label_mass": None,
            "answer": None, "error": None if not math.isnan(logit) else "no answer in the file",
        })  # fmt: skip
    return pd.DataFrame(rows)


def score(
    path: str | Path,
    options: ScoreOptions | None = None,
    *,
    command: Sequence[str] | None = None,
) -> DecisionsImportResult:
    """The decisions audit of the answers in ``path``; see the module docstring."""
    options = options or ImportOptions()
    conventions = getattr(options, "conventions", "biasaudit")
    model, confidence, runs_dir = options.model, options.confidence, options.runs_dir
    source = Path(path)
    answers = read_outputs(source)
    people = answers[["fill", "race", "gender"]].itertuples(index=False, name=None)
    require_baseline(f"outputs {source}", people)
    persons = persons_frame(answers)
    notes: list[str] = []
    with phase("decisions: computing the figures (the mixed model takes a while)"):
        fills, scenarios = fill_scores(
            persons, confidence=confidence, conventions=conventions, notes=notes
        )
    run = RunDirectory.create(runs_dir, "decisions", model)
    try:
        manifest = imported_manifest(
            run, source, kind="decisions", model=model,
            settings={"confidence": confidence, "conventions": conventions},
            command=command, rows=len(answers),
        )  # fmt: skip
        write_csv(answers, run.path / "answers.csv")
        write_csv(persons, run.path / "persons.csv")
        write_csv(scenarios, run.path / "scenarios.csv")
        metrics = DecisionsMetrics(
            model=model, simulated=False, scenarios_source=str(source), prompt="imported",
            orders=list(dict.fromkeys(answers["order"])), scoring=None,
            age_scale=age_scale(conventions), baseline=baseline(conventions),
            confidence=confidence, conventions=conventions, fills=fills,
            scenarios_total=int(answers["scenario"].nunique()),
            persons_total=len(persons), requests=NOTHING_SENT, notes=notes,
        )  # fmt: skip
        run.write_json("metrics.json", metrics)
        finish_imported(run, manifest)
    finally:
        run.close()
    return DecisionsImportResult(run.path, read_manifest(run.path), metrics, persons)
