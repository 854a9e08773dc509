"""``biasaudit study``: do the bias metrics of several runs predict their allocation gaps?

The comparison of Chen, Ji & Evans, "The Mismeasure of Man and Models"
(2024), Table 1 and the model-selection figure. Each point is one (model,
subtask, group) of the runs given: its RABBI, δ, JSD and EMD, and its ΔDP and
ΔEO at each k. ΔEO is paired with the metrics on qualified candidates only, as
the paper pairs them (§4.4), ΔDP with the metrics on all candidates.

- **Predictive validity**: the Pearson correlation of each metric with each
  gap over all points, with its p-value
  (:func:`~biasaudit.metrics.predictive_validity`; JSD and EMD carry no sign
  and are correlated with the gap's absolute value).
- **Model selection**: within each setting (task, method, subtask) holding
  two or more models, models are ranked by the RMS over groups of each
  metric and of each gap; the NDCG@N of the metric's ranking against the
  gap's (:func:`~biasaudit.metrics.model_selection_ndcg`) is averaged over
  settings.

:func:`study_kind` tells allocation runs from Grade Score runs, which
:mod:`biasaudit.kinds.grade_score.study` lays side by side instead, and from RUTEd runs,
whose metrics :mod:`biasaudit.kinds.ruted.study` correlates across contexts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from biasaudit.errors import UsageError
from biasaudit.kinds.allocation.metrics_file import AllocationMetrics
from biasaudit.kinds.common import StudyRun, load_study_metrics
from biasaudit.metrics import distribution_shape, model_selection_ndcg, predictive_validity
from biasaudit.store.tables import read_run_table

__all__ = ["METRICS", "StudyResult", "run_study"]

METRICS = {"rabbi": True, "avg_gap": True, "jsd": False, "emd": False}  # name: directional
GAPS = ("dp", "eo")


@dataclass(frozen=True)
class StudyResult:
    """Points, correlations and NDCG of a study.

    Attributes
    ----------
    runs:
        The runs, in the order given.
    points:
        One row per (run, subtask, group): ``model, task, method, subtask,
        group``, the four metrics and ``dp_<k>`` / ``eo_<k>``.
    correlations:
        One row per (metric, gap, k): ``r``, ``p_value``, ``n`` (points).
    selection:
        One row per (metric, gap, k): ``ndcg``, ``settings`` averaged over,
        ``models`` (fewest in a setting), ``at`` (the cutoff).
    k_max:
        The largest k every run has.
    ndcg_curve:
        One row per (metric, gap, k, at) for the cutoffs 1..10 (at most the
        models of the smallest setting): ``ndcg``, ``settings``.
    group_correlations:
        One row per (group, metric, gap, k): the Pearson ``r``, ``p_value`` and
        ``n`` over that group's points alone, as the allocational papers plot
        them group by group.
    shapes:
        One row per (run, group): ``n``, ``mean``, ``skewness`` and
        ``kurtosis`` (excess) of the group's scores (``scores.csv``).
    ndcg_at:
        The cutoff N of ``selection``'s NDCG@N.
    """

    runs: tuple[StudyRun[AllocationMetrics], ...]
    points: pd.DataFrame
    correlations: pd.DataFrame
    selection: pd.DataFrame
    k_max: int
    ndcg_curve: pd.DataFrame = field(default_factory=pd.DataFrame)
    group_correlations: pd.DataFrame = field(default_factory=pd.DataFrame)
    shapes: pd.DataFrame = field(default_factory=pd.DataFrame)
    ndcg_at: int = 3


def _load(path: Path) -> AllocationMetrics:
    return load_study_metrics(path, AllocationMetrics, "an allocation run")


def _labelled(paths: Sequence[Path]) -> tuple[StudyRun[AllocationMetrics], ...]:
    loaded = [(path, _load(path)) for path in paths]
    seen: dict[tuple[str, str, str], int] = {}
    runs = []
    for path, metrics in loaded:
        key = (metrics.model, metrics.task, metrics.method)
        seen[key] = seen.get(key, 0) + 1
        label = metrics.model if seen[key] == 1 else f"{metrics.model} ({path.name})"
        runs.append(StudyRun(path, label, metrics))
    return tuple(runs)


def _points(runs: Sequence[StudyRun[AllocationMetrics]], k_max: int) -> pd.DataFrame:
    rows = []
    for run in runs:
        m = run.metrics
        subtasks = {s: v.groups for s, v in m.subtasks.items()} or {m.task: m.groups}
        for subtask, groups in subtasks.items():
            for group, figures in groups.items():
                row: dict[str, Any] = {
                    "model": run.label, "task": m.task, "method": m.method,
                    "subtask": subtask, "group": group,
                }  # fmt: skip
                row |= {name: getattr(figures, name) for name in METRICS}
                row |= {f"{name}_qualified": getattr(figures, f"{name}_qualified", None)
                        for name in METRICS}  # fmt: skip
                for k in range(1, k_max + 1):
                    row[f"dp_{k}"] = figures.dp_gap.get(str(k))
                    row[f"eo_{k}"] = figures.eo_gap.get(str(k))
                rows.append(row)
    return pd.DataFrame(rows).astype({f"{g}_{k}": float for g in GAPS for k in range(1, k_max + 1)})


def _metric_column(points: pd.DataFrame, metric: str, gap: str) -> str:
    """ΔEO is judged against the metric on qualified candidates (Chen, Ji & Evans, 2024,
    §4.4); runs from before biasaudit reported those fall back to all candidates."""
    column = f"{metric}_qualified"
    if gap == "eo" and column in points.columns and points[column].notna().any():
        return column
    return metric


def _correlations(points: pd.DataFrame, k_max: int) -> pd.DataFrame:
    return pd.DataFrame(_correlation_rows(points, k_max))


def _group_correlations(points: pd.DataFrame, k_max: int) -> pd.DataFrame:
    rows = []
    for group, own in points.groupby("group", sort=False):
        rows += [{"group": group, **row} for row in _correlation_rows(own, k_max)]
    return pd.DataFrame(rows)


def _correlation_rows(points: pd.DataFrame, k_max: int) -> list[dict[str, Any]]:
    rows = []
    for metric, directional in METRICS.items():
        for gap in GAPS:
            column = _metric_column(points, metric, gap)
            for k in range(1, k_max + 1):
                pair = points[[column, f"{gap}_{k}"]].astype(float).dropna()
                row = {"metric": metric, "gap": gap, "k": k, "n": len(pair)}
                try:
                    result = predictive_validity(
                        pair[column], pair[f"{gap}_{k}"], directional=directional
                    )
                    row |= {"r": result.r, "p_value": result.p_value}
                except ValueError:  # fewer than 3 points, or a constant column
                    row |= {"r": math.nan, "p_value": math.nan}
                rows.append(row)
    return rows


class _Setting:
    """One (task, method, subtask) of two or more models, with its wide tables (model by
    group) built once per column: the selection curve reads each many times."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self.models = int(frame["model"].nunique())
        self._wide: dict[str, pd.DataFrame] = {}

    def wide(self, column: str) -> pd.DataFrame:
        if column not in self._wide:
            found = self.frame.pivot(index="model", columns="group", values=column)
            self._wide[column] = found.astype(float)
        return self._wide[column]


def _settings(points: pd.DataFrame) -> list[_Setting]:
    found = [_Setting(frame) for _, frame in points.groupby(["task", "method", "subtask"],
                                                            sort=False)]  # fmt: skip
    return [setting for setting in found if setting.models >= 2]


def _ndcg_in_setting(
    setting: _Setting, metric: str, gap: str, at: int, convention: str = "biasaudit"
) -> float | None:
    wide_metric, wide_gap = setting.wide(metric), setting.wide(gap)
    if wide_metric.isna().any().any() or wide_gap.isna().any().any():
        return None
    if (wide_gap**2).mean(axis=1).nunique() < 2:  # every model equally fair: no ideal order
        return None
    found = model_selection_ndcg(
        wide_metric, wide_gap, min(at, len(wide_metric)), convention=convention
    )
    return None if math.isnan(found) else found


def _selection(
    points: pd.DataFrame,
    settings: list[_Setting],
    k_max: int,
    at: int,
    convention: str = "biasaudit",
) -> pd.DataFrame:
    fewest = min((s.models for s in settings), default=0)
    rows = []
    for metric in METRICS:
        for gap in GAPS:
            column = _metric_column(points, metric, gap)
            for k in range(1, k_max + 1):
                scores = [
                    _ndcg_in_setting(s, column, f"{gap}_{k}", at, convention) for s in settings
                ]
                found = [score for score in scores if score is not None]
                rows.append(
                    {
                        "metric": metric, "gap": gap, "k": k,
                        "ndcg": sum(found) / len(found) if found else math.nan,
                        "settings": len(found),
                        "models": fewest,
                        "at": min(at, fewest) if fewest else at,
                    }
                )  # fmt: skip
    return pd.DataFrame(rows)


def run_study(run_dirs: Sequence[str | Path], *, ndcg_at: int = 3) -> StudyResult:
    """Compare the runs in ``run_dirs``; see the module docstring.

    Raises
    ------
    UsageError
        No runs, or a folder that is not an allocation run.
    """
    if not run_dirs:
        raise UsageError("give at least one allocation run directory")
    if ndcg_at < 1:
        raise UsageError("--ndcg-at must be at least 1")
    runs = _labelled([Path(path) for path in run_dirs])
    k_max = min(run.metrics.k_max for run in runs)
    points = _points(runs, k_max)
    convention = "paper" if all(run.metrics.conventions == "paper" for run in runs) else "biasaudit"
    settings = _settings(points)
    curve = [
        _selection(points, settings, k_max, at, convention).assign(at=at)
        for at in range(1, _NDCG_CURVE_MAX + 1)
    ]
    return StudyResult(
        runs=runs,
        points=points,
        correlations=_correlations(points, k_max),
        selection=_selection(points, settings, k_max, ndcg_at, convention),
        k_max=k_max,
        ndcg_curve=pd.concat(curve, ignore_index=True),
        group_correlations=_group_correlations(points, k_max),
        shapes=_shapes(runs),
        ndcg_at=ndcg_at,
    )


_NDCG_CURVE_MAX = 10


def _shapes(runs: Sequence[StudyRun[AllocationMetrics]]) -> pd.DataFrame:
    """Skewness and kurtosis of each group's scores, per run (``scores.csv``)."""
    frames = []
    for run in runs:
        try:
            scores = read_run_table(run.path / "scores.csv", ("group", "score"))
        except UsageError:  # a damaged table: no shapes for this run
            continue
        scored = scores[scores["score"].notna()]
        if scored.empty:
            continue
        shape = distribution_shape(scored["score"], scored["group"]).reset_index()
        frames.append(shape.assign(model=run.label))
    if not frames:
        return pd.DataFrame(columns=["model", "group", "n", "mean", "skewness", "kurtosis"])
    return pd.concat(frames, ignore_index=True)[
        ["model", "group", "n", "mean", "skewness", "kurtosis"]
    ]
