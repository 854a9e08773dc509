"""``biasaudit study`` over Grade Score runs: models x judge prompts x random option.

The comparison of Iourovitski, "Grade Score: Quantifying LLM Performance in
Option Selection" (2024), Tables 1-3: for every run, its mean Grade Score,
entropy score and choice score over items, with their intervals, laid out
with one row per model and one column per (judge prompt, random option).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from biasaudit.errors import UsageError
from biasaudit.kinds.common import load_study_metrics
from biasaudit.kinds.grade_score.run import GradeScoreMetrics

__all__ = ["SCORES", "GradeStudyResult", "GradeStudyRun", "load_grade_metrics", "run_grade_study"]

SCORES = ("grade_score", "entropy", "choice")


@dataclass(frozen=True)
class GradeStudyRun:
    """One Grade Score run of the study."""

    path: Path
    label: str
    metrics: GradeScoreMetrics


@dataclass(frozen=True)
class GradeStudyResult:
    """The runs of a Grade Score study and their scores.

    Attributes
    ----------
    runs:
        The runs, in the order given.
    table:
        One row per run: ``model`` (its label), ``prompt``, ``random_option``,
        for each score of :data:`SCORES` the mean and ``<score>_ci``, and
        ``items``, ``unparsed``, ``items_source``.
    settings:
        The (prompt, random option) columns, in order: prompts as given,
        each without the random option first.
    """

    runs: tuple[GradeStudyRun, ...]
    table: pd.DataFrame
    settings: tuple[tuple[str, bool], ...]


def load_grade_metrics(path: Path) -> GradeScoreMetrics:
    """The metrics of the Grade Score run in ``path``.

    Raises
    ------
    UsageError
        No ``metrics.json``, or not a Grade Score run's.
    """
    return load_study_metrics(path, GradeScoreMetrics, "a Grade Score run")


def _labelled(paths: Sequence[Path]) -> tuple[GradeStudyRun, ...]:
    seen: set[tuple[str, str, bool]] = set()
    runs = []
    for path in paths:
        metrics = load_grade_metrics(path)
        key = (metrics.model, metrics.prompt, metrics.random_option)
        label = metrics.model if key not in seen else f"{metrics.model} ({path.name})"
        seen.add(key)
        runs.append(GradeStudyRun(path, label, metrics))
    return tuple(runs)


def _row(run: GradeStudyRun) -> dict[str, object]:
    m = run.metrics
    row: dict[str, object] = {
        "model": run.label,
        "prompt": m.prompt,
        "random_option": m.random_option,
    }
    for score in SCORES:
        row[score] = getattr(m, score)
        row[f"{score}_ci"] = getattr(m, f"{score}_ci")
    return row | {"items": m.items, "unparsed": m.unparsed, "items_source": m.items_source}


def run_grade_study(run_dirs: Sequence[str | Path], *, ndcg_at: int = 3) -> GradeStudyResult:
    """Lay the Grade Score runs in ``run_dirs`` side by side; see the module docstring.

    ``ndcg_at`` is the allocation study's cutoff: this study ranks no models by NDCG.

    Raises
    ------
    UsageError
        No runs, or a folder that is not a Grade Score run.
    """
    if not run_dirs:
        raise UsageError("give at least one Grade Score run directory")
    runs = _labelled([Path(path) for path in run_dirs])
    table = pd.DataFrame([_row(run) for run in runs])
    prompts = list(dict.fromkeys(table["prompt"]))
    present = set(zip(table["prompt"], table["random_option"], strict=True))
    settings = tuple(
        (prompt, random) for prompt in prompts for random in (False, True)
        if (prompt, random) in present
    )  # fmt: skip
    return GradeStudyResult(runs, table, settings)
