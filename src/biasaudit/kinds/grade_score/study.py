"""``biasaudit study`` over Grade Score runs: models x judge prompts x random option.

The comparison of Iourovitski, "Grade Score: Quantifying LLM Performance in
Option Selection" (2024), Tables 1-3: for every run, its mean Grade Score,
entropy score and choice score over items, with their intervals, laid out
with one row per (model, item set) and one column per (judge prompt, random
option); beside them, how often each run agreed with people's preferred option,
how many answers named no option, and how often the random option was chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from biasaudit.errors import UsageError
from biasaudit.kinds.common import StudyRun, load_study_metrics
from biasaudit.kinds.grade_score.metrics_file import GradeScoreMetrics

__all__ = [
    "SCORES",
    "GradeStudyResult",
    "GradeStudyRun",
    "load_grade_metrics",
    "run_study",
    "short_name",
]

SCORES = ("grade_score", "entropy", "choice")


@dataclass(frozen=True)
class GradeStudyRun(StudyRun[GradeScoreMetrics]):
    """One Grade Score run of the study: ``label`` names its row (the model, and its
    item set where the runs use several), ``prompt`` its judge prompt as a column names it."""

    prompt: str = ""


@dataclass(frozen=True)
class GradeStudyResult:
    """The runs of a Grade Score study and their scores.

    Attributes
    ----------
    runs:
        The runs, in the order given.
    table:
        One row per run: ``model`` (its row's label), ``prompt`` (as its column
        names it), ``random_option``, for each score of :data:`SCORES` the mean and
        ``<score>_ci``, ``items``, ``unparsed``, ``unparsed_share`` (of ``trials``),
        ``agreement`` with ``agreement_ci`` and ``agreement_items`` (items that name a
        preferred option), ``random_share`` (of ``usable`` answers), ``items_source``
        and ``simulated``.
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


def short_name(source: str) -> str:
    """A prompt or item file as a column or row names it: its file name without the
    extension (``red`` for ``prompts/red.yaml``); a shipped one (``1``, ``demo``) as it is."""
    path = Path(source)
    return path.stem if path.suffix or len(path.parts) > 1 else source


def _names(sources: Sequence[str]) -> dict[str, str]:
    """Each source's short name; the whole path where two short names would clash."""
    short = {source: short_name(source) for source in dict.fromkeys(sources)}
    clashing = {n for n in short.values() if list(short.values()).count(n) > 1}
    return {source: (source if name in clashing else name) for source, name in short.items()}


def _labelled(paths: Sequence[Path]) -> tuple[GradeStudyRun, ...]:
    found = [(path, load_grade_metrics(path)) for path in paths]
    items = _names([m.items_source for _, m in found])
    prompts = _names([m.prompt for _, m in found])
    several = len(items) > 1
    seen: set[tuple[str, str, str, bool]] = set()
    runs = []
    for path, metrics in found:
        row = metrics.model + (f" on {items[metrics.items_source]}" if several else "")
        key = (metrics.model, metrics.items_source, metrics.prompt, metrics.random_option)
        label = row if key not in seen else f"{row} ({path.name})"
        seen.add(key)
        runs.append(GradeStudyRun(path, label, metrics, prompts[metrics.prompt]))
    return tuple(runs)


def _row(run: GradeStudyRun) -> dict[str, object]:
    m = run.metrics
    row: dict[str, object] = {
        "model": run.label,
        "prompt": run.prompt,
        "random_option": m.random_option,
    }
    for score in SCORES:
        row[score] = getattr(m, score)
        row[f"{score}_ci"] = getattr(m, f"{score}_ci")
    agreement = m.agreement
    return row | {
        "items": m.items,
        "unparsed": m.unparsed,
        "items_source": m.items_source,
        "simulated": m.simulated,
        "trials": m.trials,
        "unparsed_share": m.unparsed / m.trials if m.trials else None,
        "agreement": None if agreement is None else agreement.rate,
        "agreement_ci": None if agreement is None else agreement.rate_ci,
        "agreement_items": None if agreement is None else agreement.items,
        "random_share": m.random_option_share,
        "usable": m.usable,
    }


def run_study(run_dirs: Sequence[str | Path], *, ndcg_at: int = 3) -> GradeStudyResult:
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
