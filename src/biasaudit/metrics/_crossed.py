"""The crossed data of an allocation audit: candidates as (name, item) pairs, their groups,
subtasks and qualification, the cells of one group and the reference per subtask, and a
figure's interval and row (:mod:`biasaudit.metrics._units` computes its figures from
them).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from biasaudit.metrics._resampling import Units
from biasaudit.metrics._small_samples import critical_value
from biasaudit.metrics._validate import FloatArray, as_float_array, as_label_array

__all__ = ["FEW_UNITS"]

# Fewer than this: the interval is reported, with a warning that it rests on few units
# (Student t intervals from so few clusters are honest but wide: nothing is flagged).
FEW_UNITS = 8

_SCORE_FIGURES = ("rabbi", "avg_gap", "jsd", "emd")

_JSD_BINS = 10

# Relabellings of the omnibus test from which their spread floors the SEs of _FLOORED.
_NULL_FLOOR_FROM = 19

# The figures of the qualified candidates, whose rates sit near 1 (see the module's notes).
_FLOORED = ("true_positive_rate", "eo_gap")


@dataclass(frozen=True)
class _Data:
    values: FloatArray
    groups: NDArray[np.intp]
    group_ids: pd.Index
    subtasks: NDArray[np.intp]
    subtask_ids: pd.Index
    qualified: NDArray[np.intp]  # 1 qualified, 0 not, -1 not rated
    units: Units
    reference: int


IMPACT_COLUMNS = ["category", "value", "k", "rate", "rate_low", "rate_high", "ratio", "low",
                  "high", "n", "flagged", "beyond_noise"]  # fmt: skip


def _data(
    scores: ArrayLike,
    groups: ArrayLike,
    reference: Hashable,
    subtasks: ArrayLike | None,
    qualified: ArrayLike | None,
    names: ArrayLike | None,
    items: ArrayLike | None,
) -> _Data:
    values = as_float_array(scores, "scores", finite=True)
    group_codes, group_ids = pd.factorize(as_label_array(groups, "groups"))
    if values.size != group_codes.size:
        raise ValueError("scores and groups differ in length")
    if reference not in group_ids:
        listed = ", ".join(repr(g) for g in group_ids)
        raise ValueError(f"reference must be one of the groups {listed}; got {reference!r}")
    if subtasks is None:
        subtask_codes, subtask_ids = np.zeros(values.size, dtype=np.intp), pd.Index([None])
    else:
        subtask_codes, subtask_ids = pd.factorize(as_label_array(subtasks, "subtasks"))
    flags = np.full(values.size, -1, dtype=np.intp)
    if qualified is not None:
        given = pd.Series(np.asarray(qualified, dtype=object))
        rated = given.notna().to_numpy()
        flags[rated] = given[rated].astype(bool).to_numpy().astype(np.intp)
    for name, column in (("subtasks", subtasks), ("qualified", qualified)):
        if column is not None and len(np.asarray(column, dtype=object)) != values.size:
            raise ValueError(f"{name} and scores differ in length")
    group_codes = group_codes.astype(np.intp)
    subtask_codes = subtask_codes.astype(np.intp)
    return _Data(
        values=values,
        groups=group_codes,
        group_ids=pd.Index(group_ids),
        subtasks=subtask_codes,
        subtask_ids=pd.Index(subtask_ids),
        qualified=flags,
        units=Units.of(group_codes, subtask_codes, flags, names, items),
        reference=int(pd.Index(group_ids).get_loc(reference)),
    )


def _row(
    figure: str,
    scope: str,
    group: Hashable,
    subtask: Hashable,
    k: int,
    estimate: float,
    interval: tuple[float, float] | None,
    p: float | None,
    n: int,
    units: int,
) -> dict[str, Any]:
    return {
        "figure": figure,
        "scope": scope,
        "group": group,
        "subtask": subtask,
        "k": k,
        "estimate": float(estimate),
        "low": None if interval is None else float(interval[0]),
        "high": None if interval is None else float(interval[1]),
        "p": p,
        "n": int(n),
        "units": int(units),
    }


@dataclass(frozen=True)
class _Cell:
    """The candidates of one group and the reference in one subtask."""

    group: NDArray[np.intp]  # positions of the group's candidates
    reference: NDArray[np.intp]

    @property
    def n(self) -> int:
        return int(self.group.size + self.reference.size)


def _subtask_cells(data: _Data, pair: NDArray[np.bool_], group: int) -> dict[int, _Cell]:
    cells = {}
    for subtask in range(len(data.subtask_ids)):
        here = pair & (data.subtasks == subtask)
        of_group = np.flatnonzero(here & (data.groups == group))
        of_reference = np.flatnonzero(here & (data.groups == data.reference))
        if of_group.size and of_reference.size:
            cells[subtask] = _Cell(of_group, of_reference)
    return cells


def _unit_counts(data: _Data, pair: NDArray[np.bool_], group: int) -> tuple[int, int]:
    units = data.units.units
    return (
        int(np.unique(units[pair & (data.groups == group)]).size),
        int(np.unique(units[pair & (data.groups == data.reference)]).size),
    )


# The range each figure can take: intervals are clipped to it.
_RANGES = {
    "rabbi": (-1.0, 1.0),
    "avg_gap": (-math.inf, math.inf),
    "jsd": (0.0, 1.0),
    "emd": (0.0, math.inf),
    "selection_rate": (0.0, 1.0),
    "true_positive_rate": (0.0, 1.0),
    "dp_gap": (-1.0, 1.0),
    "eo_gap": (-1.0, 1.0),
}


def _interval(
    estimate: float,
    replicates: FloatArray,
    confidence: float,
    figure: str,
    units: int,
    *,
    floor: float = 0.0,
) -> tuple[float, float] | None:
    """The estimate ± t times the replicates' standard deviation, within the figure's range.

    t is Student's with ``units - 1`` degrees of freedom, the fewest units
    behind the figure (:mod:`biasaudit.metrics._small_samples`).

    The normal ("standard") bootstrap interval (Efron & Tibshirani, "An
    Introduction to the Bootstrap", 1993, §13.2), not the percentile one: a
    resample of few items changes how the comparisons between items mix, so
    replicates of rank and selection figures can sit off-centre, and a
    percentile interval would then miss its own estimate.

    ``floor``: the least standard error the figure is given (the qualified candidates'
    selection figures: their spread over the omnibus test's relabellings,
    :meth:`_Selection._rows`).
    """
    usable = replicates[~np.isnan(replicates)]
    if usable.size < 20 or math.isnan(estimate):
        return None
    spread = critical_value(confidence, units) * max(float(np.std(usable, ddof=1)), floor)
    low, high = _RANGES[figure]
    return max(low, estimate - spread), min(high, estimate + spread)
