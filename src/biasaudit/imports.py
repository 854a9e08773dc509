"""``biasaudit score allocation|grade-score FILE.csv``: audits of outputs produced elsewhere.

Another harness, a paper's released data or a vendor's logs hold one score per
candidate; this turns them into the same run directory an allocation audit
writes (``scores.csv``, ``metrics.json`` with every figure, interval and note,
the reports), so that ``report``, ``study`` and ``compare`` work on it. The
manifest says the answers were imported (``endpoint.provider: imported``, the
file and its SHA-256), and ``replay`` refuses such a run: nothing was asked.

The file is CSV with a header:

- ``candidate``: a unique id per row;
- ``group``: the candidate's group;
- ``score``: a finite number, higher is better;
- optional ``qualified`` (true/false, yes/no, 1/0; empty: not rated),
  ``subtask`` (job, essay prompt: figures are computed within each),
  ``name`` (the units names are resampled by), ``item`` (the resume or
  essay, the second unit), ``pool`` (pools already compared: selection
  within them instead of simulated pools).

``biasaudit score ruted FILE.csv`` reads gendered outputs: one row per text
with ``occupation``, ``context`` and ``text`` (its pronouns are counted as a
run counts them), or one row per (occupation, context) with ``p_male`` (a
male share already measured, in [0, 1]); optional ``majority`` (male/female:
else the 40 WinoBias occupations' own).

``biasaudit score grade-score TRIALS.csv`` reads a judge's answers: one row
per request with ``item``, ``shown`` (the item's options in the order shown,
space-separated: their indices 0..n-1 or any labels) and ``slot`` (the slot the
judge chose, 1 = shown first; empty: no usable answer), optionally
``preferred`` (the option people prefer, as written in ``shown``) and
``replicate``. It writes a Grade Score run directory the same way.

A malformed file stops before anything is written, naming file, line and column.
"""

from __future__ import annotations

import hashlib
import math
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from biasaudit import __version__
from biasaudit.errors import InputError, UsageError
from biasaudit.kinds.allocation.metrics import (
    AllocationMetrics,
    CandidateCounts,
    MetricOptions,
    ScoringSummary,
    allocation_results,
)
from biasaudit.kinds.allocation.task import PoolDesign
from biasaudit.kinds.common import NOTHING_SENT
from biasaudit.kinds.grade_score.run import GradeScoreMetrics, item_figures, score_fields
from biasaudit.kinds.grade_score.task import GradeItem
from biasaudit.kinds.ruted import embeddings
from biasaudit.kinds.ruted.metrics import (
    RutedMetrics,
    TextsByPrompt,
    context_metrics,
    mode_collapse_check,
    occupations_csv,
)
from biasaudit.kinds.ruted.plan import OCCUPATION_COLUMNS
from biasaudit.kinds.ruted.task import OCCUPATIONS_PATH, read_occupations
from biasaudit.probes._pronouns import classify_pronouns
from biasaudit.secrets import redact_command
from biasaudit.store.runs import Manifest, RunDirectory, read_manifest
from biasaudit.textfiles import brief, read_table, require_columns, require_values

__all__ = [
    "GradeImportResult",
    "ImportOptions",
    "ImportResult",
    "score_allocation",
    "score_grade",
    "score_ruted",
]

_TRUE = frozenset({"true", "yes", "1", "y", "t"})
_FALSE = frozenset({"false", "no", "0", "n", "f"})
_OPTIONAL = ("qualified", "subtask", "name", "item", "pool")


@dataclass(frozen=True)
class ImportOptions:
    """How to audit imported scores (the allocation run's own options)."""

    reference_group: str | None = None
    model: str = "imported"
    k_max: int = 5
    headline_k: int = 1
    pool: Literal["auto", "one_per_group", "random"] = "auto"
    pool_size: int = 10
    rounds: int = 1800
    value_range: tuple[float, float] | None = None
    seed: int = 0
    bootstrap: int = 2000
    gap_bootstrap: int = 200
    confidence: float = 0.95
    conventions: Literal["biasaudit", "paper"] = "biasaudit"
    runs_dir: Path = Path("runs")


@dataclass(frozen=True)
class ImportResult:
    run_dir: Path
    manifest: Manifest
    metrics: AllocationMetrics


def read_scores(path: Path) -> pd.DataFrame:
    """The candidates of a scores file, checked; see the module docstring.

    Raises
    ------
    InputError
        A row with an empty or malformed cell, named by line and column.
    UsageError
        The file cannot be read, lacks a required column, or repeats a candidate.
    """
    frame = read_table(path, "scores")
    require_columns(frame, ["candidate", "group", "score"], what="scores", path=path)
    require_values(frame, ["candidate", "group", "score"], what="scores", path=path)
    scores = pd.to_numeric(frame["score"], errors="coerce")
    bad = ~np.isfinite(scores.to_numpy(float))
    if bad.any():
        row = int(bad.argmax())
        raise InputError(
            str(path), row + 2, "score", f"{frame['score'].iloc[row]!r} is not a finite number"
        )
    repeated = frame["candidate"].duplicated()
    if repeated.any():
        row = int(repeated.to_numpy().argmax())
        raise InputError(
            str(path), row + 2, "candidate", f"{frame['candidate'].iloc[row]!r} appears twice"
        )
    found = pd.DataFrame(
        {
            "candidate_id": frame["candidate"],
            "group": frame["group"],
            "subtask": frame["subtask"].replace("", "all") if "subtask" in frame else "all",
            "qualified": _qualified(frame, path),
            "score": scores.astype(float),
            "irregular": False,
        }
    )
    if "name" in frame.columns:  # a row without a name: names are not resampled
        found["name"] = frame["name"].where(frame["name"] != "")
    for column in ("item", "pool"):
        if column in frame.columns:
            require_values(frame, [column], what="scores", path=path)
            found[column] = frame[column]
    return found


def _qualified(frame: pd.DataFrame, path: Path) -> list[bool | None]:
    if "qualified" not in frame.columns:
        return [None] * len(frame)
    found: list[bool | None] = []
    for row, value in enumerate(frame["qualified"]):
        word = value.strip().lower()
        if word == "":
            found.append(None)
        elif word in _TRUE:
            found.append(True)
        elif word in _FALSE:
            found.append(False)
        else:
            raise InputError(
                str(path), row + 2, "qualified",
                f"{value!r} is not true/false (yes/no, 1/0; empty: not rated)",
            )  # fmt: skip
    return found


def score_allocation(
    path: str | Path, options: ImportOptions, *, command: Sequence[str] | None = None
) -> ImportResult:
    """Audit the scores in ``path`` into a new run directory; see the module docstring."""
    source = Path(path)
    scores = read_scores(source)
    groups = tuple(dict.fromkeys(scores["group"]))
    reference = _reference(groups, options.reference_group, source)
    pool, pool_size = _pool(scores, groups, options)
    given = "pool" in scores.columns
    k_max = min(options.k_max, pool_size)
    notes: list[str] = []
    if k_max < options.k_max:
        notes.append(f"k_max lowered from {options.k_max} to the pool size, {pool_size}")
    metric_options = MetricOptions(
        reference=reference, groups=groups, k_max=k_max, pool=pool, rounds=options.rounds,
        value_range=options.value_range or _value_range(scores), seed=options.seed,
        bootstrap=options.bootstrap, gap_bootstrap=options.gap_bootstrap,
        confidence=options.confidence, pairwise=given, conventions=options.conventions,
    )  # fmt: skip
    results = allocation_results(scores, metric_options, notes, item_column="item")
    run = RunDirectory.create(options.runs_dir, "allocation", options.model)
    try:
        manifest = _manifest(run, source, options, command, len(scores))
        scores.to_csv(run.path / "scores.csv", index=False)
        metrics = AllocationMetrics(
            task=f"imported:{source.name}",
            method="imported",
            model=options.model,
            simulated=False,
            reference_group=reference,
            k_max=k_max,
            confidence=options.confidence,
            scoring=ScoringSummary(path="imported", value_range=list(metric_options.value_range)),
            candidates=CandidateCounts(
                total=len(scores), scored=len(scores), irregular=0, unscored=0, failed=0
            ),
            requests=NOTHING_SENT,
            selection=results.selection,
            intervals=results.intervals,
            headline_k=min(options.headline_k, k_max),
            groups=results.groups,
            rates=results.rates,
            omnibus=results.omnibus,
            subtasks=results.subtasks,
            notes=notes,
            conventions=options.conventions,
        )
        run.write_json("metrics.json", metrics)
        _finish(run, manifest)
    finally:
        run.close()
    return ImportResult(run.path, read_manifest(run.path), metrics)


def _reference(groups: tuple[str, ...], wanted: str | None, source: Path) -> str:
    if len(groups) < 2:
        raise UsageError(f"{source}: an audit needs at least two groups; found {len(groups)}")
    reference = wanted or ("W_M" if "W_M" in groups else None)
    if reference is None:
        raise UsageError(
            f"{source} has no group 'W_M': name the reference with --reference-group "
            f"(groups: {', '.join(groups)})"
        )
    if reference not in groups:
        raise UsageError(
            f"{source}: reference group '{reference}' is not one of the groups "
            f"({', '.join(groups)})"
        )
    return reference


def _pool(
    scores: pd.DataFrame, groups: tuple[str, ...], options: ImportOptions
) -> tuple[PoolDesign, int]:
    """The pool design: the given pools, one of each group, or random pools."""
    if "pool" in scores.columns:
        size = int(scores.groupby("pool").size().max())
        return PoolDesign("random", size), size
    kind = options.pool
    if kind == "auto":
        every = scores.groupby("subtask")["group"].nunique().eq(len(groups)).all()
        kind = "one_per_group" if every else "random"
    if kind == "one_per_group":
        return PoolDesign("one_per_group"), len(groups)
    smallest = int(scores.groupby("subtask").size().min())
    size = min(options.pool_size, smallest)
    return PoolDesign("random", size), size


def _value_range(scores: pd.DataFrame) -> tuple[float, float]:
    low, high = float(scores["score"].min()), float(scores["score"].max())
    if low >= 0.0 and high <= 1.0:
        return (0.0, 1.0)
    return (low, high) if high > low else (low, low + 1.0)


def _manifest(
    run: RunDirectory,
    source: Path,
    options: ImportOptions,
    command: Sequence[str] | None,
    rows: int,
    *,
    kind: str = "allocation",
) -> Manifest:
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    manifest = Manifest(
        tool_version=__version__,
        run_id=run.run_id,
        kind=kind,
        command=redact_command(list(command if command is not None else sys.argv)),
        started_at=datetime.now(UTC),
        endpoint={
            "provider": "imported",
            "model": options.model,
            "source": str(source.resolve()),
            "sha256": digest,
            "rows": rows,
            "note": "scores imported with biasaudit score: no request was sent",
        },
        settings=_settings(options),
    )
    run.write_json("manifest.json", manifest)
    return manifest


def _settings(options: ImportOptions) -> dict[str, Any]:
    found = {
        name: value for name, value in vars(options).items() if name not in ("runs_dir", "model")
    }
    if options.value_range is not None:
        found["value_range"] = list(options.value_range)
    return found


@dataclass(frozen=True)
class GradeImportResult:
    run_dir: Path
    manifest: Manifest
    metrics: GradeScoreMetrics
    items: pd.DataFrame


def read_trials(path: Path) -> tuple[list[GradeItem], pd.DataFrame]:
    """The items and trials of a judge's answers file, checked; see the module docstring."""
    frame = read_table(path, "trials")
    require_columns(frame, ["item", "shown", "slot"], what="trials", path=path)
    require_values(frame, ["item", "shown"], what="trials", path=path)
    labels: dict[str, list[str]] = {}
    preferred: dict[str, int | None] = {}
    rows = []
    for row, record in enumerate(frame.to_dict("records")):
        line = row + 2
        item, shown = record["item"], record["shown"].split()
        known = labels.setdefault(item, sorted(shown, key=_label_order))
        if len(set(shown)) != len(shown) or sorted(shown) != sorted(known):
            raise InputError(
                str(path), line, "shown",
                f"{brief(record['shown'])} is not an order of item {item!r}'s options "
                f"({' '.join(known)})",
            )  # fmt: skip
        slot = _slot(record["slot"], len(shown), path, line)
        chosen = None if slot is None else known.index(shown[slot - 1])
        if record.get("preferred"):
            if record["preferred"] not in known:
                raise InputError(
                    str(path), line, "preferred",
                    f"{brief(record['preferred'])} is not one of item {item!r}'s options",
                )  # fmt: skip
            preferred[item] = known.index(record["preferred"])
        rows.append(
            {
                "item_id": item,
                "order": " ".join(shown),
                "replicate": _replicate(record.get("replicate", ""), path, line),
                "shown": " ".join(str(known.index(label)) for label in shown),
                "slot": slot,
                "option": chosen,
                "random": None if chosen is None else False,
                "parsed_as": None if slot is None else "imported",
                "answer": None,
                "refused": False,
                "error": None,
            }
        )
    items = [
        GradeItem(id=item, prompt="", options=tuple(known), preferred=preferred.get(item))
        for item, known in labels.items()
    ]
    trials = pd.DataFrame(rows).astype({"slot": "Int64", "option": "Int64"})
    return items, trials


def _label_order(label: str) -> tuple[int, int | str]:
    """Indices sort as numbers, other labels as text."""
    return (0, int(label)) if label.isdigit() else (1, label)


def _slot(value: str, n_options: int, path: Path, line: int) -> int | None:
    if value == "":
        return None
    if not value.isdigit() or not 1 <= int(value) <= n_options:
        raise InputError(
            str(path), line, "slot", f"{brief(value)} is not a slot from 1 to {n_options}"
        )
    return int(value)


def _replicate(value: str, path: Path, line: int) -> int:
    if value == "":
        return 0
    if not value.isdigit():
        raise InputError(str(path), line, "replicate", f"{brief(value)} is not a whole number")
    return int(value)


def score_grade(
    path: str | Path,
    *,
    model: str = "imported",
    confidence: float = 0.95,
    runs_dir: Path = Path("runs"),
    command: Sequence[str] | None = None,
) -> GradeImportResult:
    """The Grade Score audit of a judge's answers in ``path``; see the module docstring."""
    source = Path(path)
    items, trials = read_trials(source)
    widths = {item.n_options for item in items}
    if len(widths) > 1:
        raise UsageError(
            f"{source}: items have different numbers of options ({sorted(widths)}); a Grade "
            "Score run compares items of one size"
        )
    item_rows, scores = item_figures(items, trials)
    notes: list[str] = []
    fields = score_fields(
        trials, item_rows, scores, confidence=confidence, n_options=widths.pop(),
        random_option=False, notes=notes,
    )  # fmt: skip
    run = RunDirectory.create(runs_dir, "grade-score", model)
    try:
        options = ImportOptions(model=model, confidence=confidence, runs_dir=runs_dir)
        manifest = _manifest(run, source, options, command, len(trials), kind="grade-score")
        trials.to_csv(run.path / "trials.csv", index=False)
        item_rows.to_csv(run.path / "items.csv", index=False)
        orders = trials.groupby("item_id")["order"].nunique()
        metrics = GradeScoreMetrics(
            model=model, simulated=False, items_source=str(source),
            prompt="imported", prompt_description="answers imported with biasaudit score",
            random_option=False, permutations="given", orders=int(orders.max()),
            replicates=int(trials["replicate"].max()) + 1, temperature=None, max_tokens=None,
            n_options=items[0].n_options, confidence=confidence, items_total=len(items),
            requests=NOTHING_SENT,
            notes=notes, **fields,
        )  # fmt: skip
        run.write_json("metrics.json", metrics)
        _finish(run, manifest)
    finally:
        run.close()
    return GradeImportResult(run.path, read_manifest(run.path), metrics, item_rows)


def _finish(run: RunDirectory, manifest: Manifest) -> None:
    ended = datetime.now(UTC)
    run.write_json(
        "manifest.json",
        manifest.model_copy(
            update={
                "status": "completed",
                "ended_at": ended,
                "duration_s": (ended - manifest.started_at).total_seconds(),
            }
        ),
    )


@dataclass(frozen=True)
class RutedImportResult:
    run_dir: Path
    manifest: Manifest
    metrics: RutedMetrics


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


def score_ruted(
    path: str | Path,
    *,
    model: str = "imported",
    confidence: float = 0.95,
    runs_dir: Path = Path("runs"),
    command: Sequence[str] | None = None,
    mode_collapse: Literal["auto", "on", "off"] = "auto",
) -> RutedImportResult:
    """The RUTEd metrics of gendered outputs in ``path``; see the module docstring."""
    source_path = Path(path)
    rows, source, texts = read_ruted(source_path)
    if mode_collapse == "on" and texts:
        missing = embeddings.missing_embedder()
        if missing is not None:
            raise UsageError(f"--mode-collapse on: {missing}")
    contexts = {
        context: context_metrics(
            rows[rows["context"] == context], source=source, confidence=confidence
        )
        for context in dict.fromkeys(rows["context"])
    }
    occupations = rows.drop_duplicates("occupation")
    male_majority = int((occupations["majority"] == "male").sum())
    run = RunDirectory.create(runs_dir, "ruted", model)
    try:
        options = ImportOptions(model=model, confidence=confidence, runs_dir=runs_dir)
        manifest = _manifest(run, source_path, options, command, len(rows), kind="ruted")
        occupations_csv(rows).to_csv(run.path / "occupations.csv", index=False)
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
            by_occupation.to_csv(run.path / "similarity.csv", index=False)
        metrics = RutedMetrics(
            model=model, simulated=False, confidence=confidence,
            occupations=len(occupations), male_majority=male_majority,
            occupations_source=str(source_path), replicates=0, templates=[], temperature=None,
            contexts=contexts, mode_collapse=status,
            requests=NOTHING_SENT,
            notes=notes,
        )  # fmt: skip
        run.write_json("metrics.json", metrics)
        _finish(run, manifest)
    finally:
        run.close()
    return RutedImportResult(run.path, read_manifest(run.path), metrics)
