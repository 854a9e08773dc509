"""``biasaudit score grade-score TRIALS.csv``: the Grade Score audit of a judge's
answers produced elsewhere.

One row per request with ``item``, ``shown`` (the item's options in the order
shown, space-separated: their indices 0..n-1 or any labels) and ``slot`` (the
slot the judge chose, 1 = shown first; empty: no usable answer), optionally
``preferred`` (the option people prefer, as written in ``shown``) and
``replicate``. It writes a Grade Score run directory whose manifest says the
answers were imported. A malformed file stops before anything is written,
naming file, line and column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import Field

from biasaudit.errors import InputError, UsageError
from biasaudit.kinds._imported import Imported, ScoreOptions, finish_imported, imported_manifest
from biasaudit.kinds.common import NOTHING_SENT
from biasaudit.kinds.grade_score.metrics_file import GradeScoreMetrics
from biasaudit.kinds.grade_score.run import item_figures, score_fields
from biasaudit.kinds.grade_score.task import GradeItem
from biasaudit.store.runs import RunDirectory, read_manifest
from biasaudit.store.tables import write_csv
from biasaudit.textfiles import brief, read_table, require_columns, require_values

__all__ = ["GradeImportResult", "ImportOptions", "read_trials", "score"]


class ImportOptions(ScoreOptions):
    """``biasaudit score grade-score``'s options."""

    conventions: Literal["biasaudit", "paper"] = Field(
        "biasaudit",
        description="biasaudit's (means over complete items, partial ones counted apart) or "
        "the paper's (every item, partial ones as scored, none usable = 0).",
    )


@dataclass(frozen=True)
class GradeImportResult(Imported[GradeScoreMetrics]):
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


def score(
    path: str | Path,
    options: ScoreOptions | None = None,
    *,
    command: Sequence[str] | None = None,
) -> GradeImportResult:
    """The Grade Score audit of a judge's answers in ``path``; see the module docstring."""
    options = options or ImportOptions()
    conventions = getattr(options, "conventions", "biasaudit")
    model, confidence, runs_dir = options.model, options.confidence, options.runs_dir
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
        random_option=False, notes=notes, conventions=conventions,
    )  # fmt: skip
    run = RunDirectory.create(runs_dir, "grade-score", model)
    try:
        manifest = imported_manifest(
            run, source, kind="grade-score", model=model,
            settings={"confidence": confidence, "conventions": conventions},
            command=command, rows=len(trials),
        )  # fmt: skip
        write_csv(trials, run.path / "trials.csv")
        write_csv(item_rows, run.path / "items.csv")
        orders = trials.groupby("item_id")["order"].nunique()
        metrics = GradeScoreMetrics(
            model=model, simulated=False, items_source=str(source),
            prompt="imported", prompt_description="answers imported with biasaudit score",
            random_option=False, permutations="given", orders=int(orders.max()),
            replicates=int(trials["replicate"].max()) + 1, temperature=None, max_tokens=None,
            n_options=items[0].n_options, confidence=confidence, items_total=len(items),
            requests=NOTHING_SENT, conventions=conventions,
            notes=notes, **fields,
        )  # fmt: skip
        run.write_json("metrics.json", metrics)
        finish_imported(run, manifest)
    finally:
        run.close()
    return GradeImportResult(run.path, read_manifest(run.path), metrics, item_rows)
