"""User-defined allocation tasks, described in a YAML spec (``task: allocation``).

The candidates are rows of a CSV file; every column is a prompt placeholder.
The spec names the group column, who is qualified, the reference group, the
pointwise labels and their values, the prompts, and the pool design::

    task: allocation
    name: scholarship-screening
    model: sim/biased
    candidates: applicants.csv          # columns: id, group, name, statement, score
    id_column: id
    name_column: name
    qualified: {column: score, at_least: median}
    reference_group: W_M
    labels: {"Yes": 1, "No": 0}
    pointwise:
      system: You screen applications for a scholarship.
      user: "Applicant {name}: {statement}\\nShould they be shortlisted? Answer Yes or No."
    pairwise:
      system: You screen applications for a scholarship.
      candidate: "{name}: {statement}"
      user: |
        Candidate A:
        {first}

        Candidate B:
        {second}

        Which applicant is stronger? Answer A or B.
    pool: {design: random, size: 8}
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from biasaudit.errors import UsageError
from biasaudit.kinds.candidates.spec import CustomData, PromptSpec, QualifiedSpec
from biasaudit.kinds.candidates.task import AllocationTask, Candidate, PoolDesign
from biasaudit.kinds.prompt import PromptTemplate
from biasaudit.textfiles import read_table, require_columns, require_values

__all__ = ["build_custom_task"]

_TRUE = frozenset({"true", "1", "yes", "y", "t"})
_FALSE = frozenset({"false", "0", "no", "n", "f"})
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SUBTASK = "all"


def _prompt(prompt: PromptSpec | None, role: str) -> PromptTemplate | None:
    if prompt is None:
        return None
    if prompt.file is not None:
        return PromptTemplate.load(prompt.file)
    data = prompt.model_dump(exclude={"file"}, exclude_none=True)
    return PromptTemplate.from_mapping(data, f"spec field '{role}'")


def _qualified(
    frame: pd.DataFrame, rule: QualifiedSpec | str | None, path: Path
) -> list[bool] | None:
    if rule is None:
        return None
    spec = QualifiedSpec(column=rule) if isinstance(rule, str) else rule
    require_columns(frame, [spec.column], what="candidates", path=path)
    values = frame[spec.column]
    if spec.at_least is None:
        lowered = values.str.lower()
        bad = ~lowered.isin(_TRUE | _FALSE)
        if bad.any():
            raise UsageError(
                f"candidates {path}, column '{spec.column}': {values[bad].iloc[0]!r} is not "
                "true/false; give 'qualified: {column: ..., at_least: ...}' for numbers"
            )
        return list(lowered.isin(_TRUE))
    numbers = pd.to_numeric(values, errors="coerce")
    if numbers.isna().any():
        raise UsageError(f"candidates {path}, column '{spec.column}': not all numbers")
    threshold = numbers.median() if spec.at_least == "median" else spec.at_least
    return list(numbers >= threshold)


def _check_columns(frame: pd.DataFrame, spec: CustomData, path: Path) -> None:
    named = [spec.group_column, spec.id_column, spec.name_column, spec.subtask_column]
    require_columns(frame, [c for c in named if c], what="candidates", path=path)
    for column in frame.columns:
        if not _IDENTIFIER.match(column):
            raise UsageError(
                f"candidates {path}: column '{column}' cannot be a prompt placeholder; "
                "use letters, digits and underscores"
            )
    require_values(frame, [c for c in named if c], what="candidates", path=path)
    if spec.id_column and frame[spec.id_column].duplicated().any():
        raise UsageError(f"candidates {path}, column '{spec.id_column}': ids are not unique")


def build_custom_task(spec: CustomData) -> AllocationTask:
    """The task a ``task: allocation`` spec describes."""
    path = spec.candidates
    frame = read_table(path, "candidates")
    _check_columns(frame, spec, path)
    qualified = _qualified(frame, spec.qualified, path)
    ids = (
        list(frame[spec.id_column])
        if spec.id_column
        else [f"c{i + 1:05d}" for i in range(len(frame))]
    )
    subtasks = list(frame[spec.subtask_column]) if spec.subtask_column else [_SUBTASK] * len(frame)
    records = frame.to_dict(orient="records")
    candidates = tuple(
        Candidate(
            id=ids[i],
            group=str(record[spec.group_column]),
            subtask=subtasks[i],
            qualified=None if qualified is None else qualified[i],
            fields={str(k): str(v) for k, v in record.items()},
            name=str(record[spec.name_column]) if spec.name_column else None,
            item=ids[i],
        )
        for i, record in enumerate(records)
    )
    if spec.pool.design == "random" and spec.pool.size is None:
        raise UsageError("spec, field 'pool.size': required for random pools")
    return AllocationTask(
        name=spec.name,
        candidates=candidates,
        groups=tuple(dict.fromkeys(c.group for c in candidates)),
        reference_group=spec.reference_group,
        # The labels and prompts of the methods the spec's kind asks with.
        labels=getattr(spec, "labels", {}),
        pointwise_prompt=_prompt(getattr(spec, "pointwise", None), "pointwise"),
        pairwise_prompt=_prompt(getattr(spec, "pairwise", None), "pairwise"),
        pool=PoolDesign(spec.pool.design, spec.pool.size),
        context={subtask: dict(spec.context) for subtask in dict.fromkeys(subtasks)},
        noun=spec.noun,
        item_column=spec.id_column or "item",
    )
