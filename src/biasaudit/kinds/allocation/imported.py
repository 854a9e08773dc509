"""``biasaudit score allocation SCORES.csv``: an allocation audit of scores produced
elsewhere (another harness, a paper's released data, a vendor's logs).

It writes the same run directory an allocation audit writes (``scores.csv``,
``metrics.json`` with every figure, interval and note, the reports), so that
``report``, ``study`` and ``compare`` work on it. The manifest says the answers
were imported (``endpoint.provider: imported``, the file and its SHA-256), and
``replay`` refuses such a run: nothing was asked.

The file is CSV with a header:

- ``candidate``: a unique id per row;
- ``group``: the candidate's group;
- ``score``: a finite number, higher is better;
- optional ``qualified`` (true/false, yes/no, 1/0; empty: not rated),
  ``subtask`` (job, essay prompt: figures are computed within each),
  ``name`` (the units names are resampled by), ``item`` (the resume or
  essay, the second unit), ``pool`` (pools already compared: selection
  within them instead of simulated pools).

A malformed file stops before anything is written, naming file, line and column.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field

from biasaudit.engine.options import Flag
from biasaudit.errors import InputError, UsageError
from biasaudit.kinds._imported import (
    Imported,
    ScoreOptions,
    as_in_spec,
    finish_imported,
    imported_manifest,
)
from biasaudit.kinds.allocation.metrics_file import (
    AllocationMetrics,
    CandidateCounts,
    MetricOptions,
    ScoringSummary,
    allocation_results,
)
from biasaudit.kinds.allocation.spec import AllocationSpec
from biasaudit.kinds.candidates.task import PoolDesign
from biasaudit.kinds.common import NOTHING_SENT
from biasaudit.store.runs import RunDirectory, read_manifest
from biasaudit.store.tables import write_csv
from biasaudit.textfiles import read_table, require_columns, require_values

__all__ = ["ImportOptions", "ImportResult", "read_scores", "score"]

_TRUE = frozenset({"true", "yes", "1", "y", "t"})
_FALSE = frozenset({"false", "no", "0", "n", "f"})
_OPTIONAL = ("qualified", "subtask", "name", "item", "pool")


class ImportOptions(ScoreOptions):
    """How to audit imported scores (the allocation run's own options; their bounds
    are the audit spec's, :class:`~biasaudit.kinds.allocation.spec.AllocationSpec`)."""

    reference_group: str | None = Field(
        None, description="The group every other is compared with [default: W_M, else the first]."
    )
    pool: Literal["auto", "one_per_group", "random"] = Field(
        "auto",
        description="Simulated pools: one per group (every subtask has every group), random, "
        "or auto. A 'pool' column gives the pools instead.",
    )
    pool_size: int = Field(10, ge=2, le=1000, description="Random pools: candidates per pool.")
    k_max: int = as_in_spec(AllocationSpec, "k_max")
    headline_k: int = as_in_spec(AllocationSpec, "headline_k")
    rounds: int = as_in_spec(AllocationSpec, "rounds")
    seed: int = as_in_spec(AllocationSpec, "seed")
    bootstrap: int = as_in_spec(AllocationSpec, "bootstrap")
    gap_bootstrap: int = as_in_spec(AllocationSpec, "gap_bootstrap")
    conventions: Literal["biasaudit", "paper"] = as_in_spec(AllocationSpec, "conventions")
    value_range: Annotated[tuple[float, float] | None, Flag(command_line=False)] = Field(
        None, description="The range scores can take [default: the range seen]."
    )


ImportResult = Imported[AllocationMetrics]
"""A finished ``biasaudit score allocation``."""


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


def score(
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
        manifest = imported_manifest(
            run, source, kind="allocation", model=options.model, settings=_settings(options),
            command=command, rows=len(scores),
        )  # fmt: skip
        write_csv(scores, run.path / "scores.csv")
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
            headline_k=min(options.headline_k, k_max),
            notes=notes,
            conventions=options.conventions,
            **results.figures(),
        )
        run.write_json("metrics.json", metrics)
        finish_imported(run, manifest)
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


def _settings(options: ImportOptions) -> dict[str, Any]:
    found = {
        name: value for name, value in vars(options).items() if name not in ("runs_dir", "model")
    }
    if options.value_range is not None:
        found["value_range"] = list(options.value_range)
    return found
