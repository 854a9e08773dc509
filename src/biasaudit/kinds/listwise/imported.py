"""``biasaudit score listwise RANKINGS.csv``: the listwise figures of rankings produced
elsewhere (another harness, a published audit's stored answers).

The file is CSV with a header, one row per candidate shown in an answer:

- ``pool``: the pool (its answers are its orders);
- ``order``: which answer of the pool (an order shown, or a repeat of one);
- ``slot``: where the candidate was shown, 1 = first;
- ``candidate``: who (unique within an answer);
- ``group``: the candidate's group;
- ``rank``: the rank the answer gave, 1 = best; empty: not ranked (a top-1 answer
  ranks one candidate; an answer that ranked no one counts as unread); or, instead,
  ``p_first``: each candidate's chance of being put first (read from logprobs; a
  share in [0, 1], an answer's summing to 1; top-1 figures only);
- optional ``subtask`` (a job), ``name`` and ``item`` (the units intervals
  resample; without them, the candidate), and ``race`` / ``sex`` (or any other
  column named with ``--category``) for impact ratios per category.

It writes the run directory a listwise audit writes (``shown.csv``,
``metrics.json``, the reports); the manifest says the rankings were imported. A
malformed file stops before anything is written, naming file, line and column.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import Field, field_validator

from biasaudit.errors import InputError, UsageError
from biasaudit.kinds._imported import (
    Imported,
    ScoreOptions,
    as_in_spec,
    finish_imported,
    imported_manifest,
)
from biasaudit.kinds.common import NOTHING_SENT
from biasaudit.kinds.listwise.metrics_file import AnswerCounts, ListwiseMetrics, metrics_fields
from biasaudit.kinds.listwise.spec import ListwiseSpec
from biasaudit.metrics import FEW_UNITS, listwise_figures
from biasaudit.store.runs import RunDirectory, read_manifest
from biasaudit.store.tables import write_csv
from biasaudit.textfiles import brief, read_table, require_columns, require_values

__all__ = ["ImportOptions", "ListwiseImportResult", "read_rankings", "score"]

_REQUIRED = ["pool", "order", "slot", "candidate", "group"]


class ImportOptions(ScoreOptions):
    """``biasaudit score listwise``'s options."""

    reference_group: str | None = Field(
        None, description="The group every ΔDP is taken against [default: W_M, else the first]."
    )
    k_max: int = as_in_spec(ListwiseSpec, "k_max")
    headline_k: int = as_in_spec(ListwiseSpec, "headline_k")
    category: tuple[str, ...] = Field(
        ("race", "sex"),
        description="Columns that give each group's category for impact ratios, "
        "comma-separated (those present are used).",
    )
    bootstrap: int = as_in_spec(ListwiseSpec, "bootstrap")
    seed: int = as_in_spec(ListwiseSpec, "seed")

    @field_validator("category", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value


ListwiseImportResult = Imported[ListwiseMetrics]
"""A finished ``biasaudit score listwise``."""


def read_rankings(path: Path) -> pd.DataFrame:
    """The rows of a rankings file as :func:`biasaudit.metrics.listwise_figures` takes
    them (plus ``candidate`` and any category columns); see the module docstring.

    Raises
    ------
    InputError
        An empty required cell, a slot or rank that is not a whole number from 1, a
        candidate or slot given twice in one answer, named by line and column.
    UsageError
        The file cannot be read or lacks a required column.
    """
    frame = read_table(path, "rankings")
    chances = "p_first" in frame.columns and "rank" not in frame.columns
    require_columns(frame, [*_REQUIRED, "p_first" if chances else "rank"], what="rankings",
                    path=path)  # fmt: skip
    require_values(frame, _REQUIRED, what="rankings", path=path)
    slots = _whole(frame, "slot", path, empty_ok=False)
    ranks = [float("nan")] * len(frame) if chances else _whole(frame, "rank", path, empty_ok=True)
    answer = frame["pool"] + "\x1f" + frame["order"]
    for column in ("candidate", "slot"):
        repeated = pd.Series(list(zip(answer, frame[column], strict=True))).duplicated()
        if repeated.any():
            row = int(repeated.to_numpy().argmax())
            raise InputError(
                str(path), row + 2, column,
                f"{brief(frame[column].iloc[row])} appears twice in one answer "
                f"(pool {brief(frame['pool'].iloc[row])}, order {brief(frame['order'].iloc[row])})",
            )  # fmt: skip
    _check_places(frame, answer, slots, ranks, path)
    found = pd.DataFrame(
        {"answer": answer, "pool": frame["pool"], "group": frame["group"], "slot": slots,
         "rank": ranks, "candidate": frame["candidate"]}
    )  # fmt: skip
    if chances:
        found["p_first"] = _shares(frame, path)
    for column in ("subtask", "name", "item"):
        if column in frame.columns:
            require_values(frame, [column], what="rankings", path=path)
            found[column] = frame[column]
    for column in frame.columns:
        if column not in found.columns and column not in ("order", "model"):
            found[column] = frame[column]
    return found


def _check_places(
    frame: pd.DataFrame, answer: pd.Series, slots: list[float], ranks: list[float], path: Path
) -> None:
    """Refuse what no answer can hold: a slot or rank beyond the candidates shown in its
    answer, or one rank given to two candidates of an answer.

    Raises
    ------
    InputError
        Named by the first offending line and column.
    """
    places = pd.DataFrame({"answer": answer.to_numpy(), "slot": slots, "rank": ranks})
    shown = places.groupby("answer", sort=False)["slot"].transform("size").to_numpy()
    for column in ("slot", "rank"):
        values = places[column].to_numpy(float)
        beyond = values > shown  # NaN (not ranked) compares False
        if beyond.any():
            row = int(beyond.argmax())
            raise InputError(
                str(path), row + 2, column,
                f"{int(values[row])} is beyond the {int(shown[row])} candidates shown in its "
                f"answer (pool {brief(frame['pool'].iloc[row])}, order "
                f"{brief(frame['order'].iloc[row])})",
            )  # fmt: skip
    ranked = places[places["rank"].notna()]
    twice = ranked.duplicated(["answer", "rank"]).to_numpy()
    if twice.any():
        row = int(ranked.index[twice.argmax()])
        raise InputError(
            str(path), row + 2, "rank",
            f"rank {int(ranks[row])} is given to two candidates of one answer (pool "
            f"{brief(frame['pool'].iloc[row])}, order {brief(frame['order'].iloc[row])})",
        )  # fmt: skip


def _shares(frame: pd.DataFrame, path: Path) -> list[float]:
    values: list[float] = []
    for row, text in enumerate(frame["p_first"]):
        try:
            value = float(text) if text != "" else float("nan")
        except ValueError:
            value = -1.0
        if not (value != value or 0.0 <= value <= 1.0):  # NaN (empty) is an unread answer
            raise InputError(
                str(path), row + 2, "p_first", f"{brief(text)} is not a share in [0, 1]"
            )
        values.append(value)
    return values


def _whole(frame: pd.DataFrame, column: str, path: Path, *, empty_ok: bool) -> list[float]:
    values: list[float] = []
    for row, text in enumerate(frame[column]):
        if text == "" and empty_ok:
            values.append(float("nan"))
        elif (whole := _whole_number(text)) is not None and whole >= 1:
            values.append(float(whole))
        else:
            raise InputError(
                str(path), row + 2, column, f"{brief(text)} is not a whole number from 1"
            )
    return values


def _whole_number(text: str) -> int | None:
    """``3``, or ``3.0`` as pandas writes a column with empty cells; else None."""
    if text.isdigit():
        return int(text)
    head, dot, tail = text.partition(".")
    if dot and head.isdigit() and tail and set(tail) == {"0"}:
        return int(head)
    return None


def score(
    path: str | Path,
    options: ImportOptions | None = None,
    *,
    command: Sequence[str] | None = None,
) -> ListwiseImportResult:
    """The listwise figures of the rankings in ``path``; see the module docstring."""
    options = options or ImportOptions()
    source = Path(path)
    shown = read_rankings(source)
    groups = list(dict.fromkeys(shown["group"]))
    reference = options.reference_group or ("W_M" if "W_M" in groups else groups[0])
    if reference not in groups:
        raise UsageError(f"{source}: the reference group {reference!r} is not a group of the file")
    categories = {}
    for column in options.category:
        if column in shown.columns:
            values = shown.groupby("group")[column].agg(lambda v: sorted(set(v)))
            mixed = [g for g, found in values.items() if len(found) != 1]
            if mixed:
                raise UsageError(
                    f"{source}: column '{column}' gives group {mixed[0]!r} more than one value"
                )
            categories[column] = {g: found[0] for g, found in values.items() if found[0]}
    sizes = shown.groupby("answer")["slot"].count()
    figures = None
    notes = [f"rankings imported with biasaudit score from {source}: no request was sent"]
    chances = "p_first" in shown.columns
    read = shown["p_first"] if chances else shown["rank"]
    if read.notna().any():
        try:
            figures = listwise_figures(
                shown[[c for c in ("answer", "pool", "group", "slot", "rank", "p_first",
                                   "subtask", "name", "item") if c in shown.columns]],
                reference=reference, k_max=min(options.k_max, int(sizes.max())),
                categories=categories, impact_k=options.headline_k,
                confidence=options.confidence, replicates=options.bootstrap,
                permutations=options.bootstrap, seed=options.seed,
            )  # fmt: skip
        except ValueError as error:
            raise UsageError(f"{source}: {error}") from None
        fewest = int(figures.rates["units"].min())
        if fewest < FEW_UNITS:
            notes.append(
                f"a group has only {fewest} units (names, else items or candidates) behind "
                "its rates: intervals from so few are wide and cannot support a claim"
            )
    else:
        notes.append("no row holds a rank: no figure can be computed")
    depth = shown.groupby("answer")["p_first" if "p_first" in shown.columns else "rank"].count()
    run = RunDirectory.create(options.runs_dir, "listwise", options.model)
    try:
        manifest = imported_manifest(
            run, source, kind="listwise", model=options.model,
            settings={"confidence": options.confidence, "bootstrap": options.bootstrap},
            command=command, rows=len(shown),
        )  # fmt: skip
        write_csv(shown, run.path / "shown.csv")
        pools = shown["pool"].nunique()
        metrics = ListwiseMetrics(
            task="imported", model=options.model, simulated=False,
            reference_group=reference,
            listwise="top1" if chances or depth.max() <= 1 else "full",
            scoring="logprobs" if chances else "samples",
            orders="given", pool_size=int(sizes.max()), pools=int(pools),
            orders_per_pool=round(shown["answer"].nunique() / pools), samples=1,
            confidence=options.confidence,
            k_max=min(options.k_max, int(sizes.max())), headline_k=options.headline_k,
            requests=NOTHING_SENT,
            counts=AnswerCounts(
                answers=int(depth.size), ranked=int((depth > 0).sum()),
                unread=int((depth == 0).sum()), partial=int(((depth > 1) &
                                                            (depth < sizes)).sum()),
                duplicates=0, invented=0, failed=0,
            ),
            notes=notes, **(metrics_fields(figures) if figures is not None else {}),
        )  # fmt: skip
        run.write_json("metrics.json", metrics)
        finish_imported(run, manifest)
    finally:
        run.close()
    return ListwiseImportResult(run.path, read_manifest(run.path), metrics)
