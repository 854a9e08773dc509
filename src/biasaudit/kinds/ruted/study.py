"""``biasaudit study`` of RUTEd runs: does the trick test rank models as realistic use does?

Lum et al., "Bias in Language Models: Beyond Trick Tests and Towards RUTEd
Evaluation" (ACL 2025), compare models across contexts. Given one RUTEd run
per model:

- **Table 1**: for each metric (neutrality, skew, stereotype), the Spearman
  rank correlation over models between the standard test and each RUTEd
  context (:func:`~biasaudit.metrics.spearman`, with its two-sided p-value);
- **Table 2**: the same between every two RUTEd contexts;
- **model selection**: for each metric, whether the model the standard test
  finds least biased is the least biased in each context. Least biased
  means the lowest neutrality, and the skew and stereotype closest to 0
  (lowest absolute value); models tied for least biased all count. By
  chance alone, one pick in M agrees (M models).

A correlation needs three or more models, each context's values not all
equal; otherwise it is left blank (NaN), never an error.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from biasaudit.errors import UsageError
from biasaudit.kinds.common import StudyRun, load_study_metrics
from biasaudit.kinds.ruted.metrics_file import (
    METRICS,
    RutedMetrics,
    contexts_present,
    least_biased_value,
)
from biasaudit.metrics import spearman

__all__ = ["RutedStudyResult", "run_study"]


@dataclass(frozen=True)
class RutedStudyResult:
    """What ``biasaudit study`` finds over RUTEd runs.

    Attributes
    ----------
    runs:
        The runs, in the order given.
    contexts:
        The contexts every run has, in the order standard, bedtime, personas, esl.
    values:
        One row per model (label), one column per (metric, context).
    with_standard:
        Table 1: one row per (metric, context): ``rho``, ``p_value``, ``n`` (models).
    between_contexts:
        Table 2: one row per (metric, first, second): ``rho``, ``p_value``, ``n``.
    least_biased:
        One row per (metric, context): ``models`` (the least biased, ";"-joined)
        and ``agrees`` (whether the standard test's pick is among them; None
        for the standard test itself).
    """

    runs: tuple[StudyRun[RutedMetrics], ...]
    contexts: list[str]
    values: pd.DataFrame
    with_standard: pd.DataFrame
    between_contexts: pd.DataFrame
    least_biased: pd.DataFrame


def _load(path: Path) -> RutedMetrics:
    return load_study_metrics(path, RutedMetrics, "a RUTEd run")


def _labelled(paths: Sequence[Path]) -> tuple[StudyRun[RutedMetrics], ...]:
    loaded = [(path, _load(path)) for path in paths]
    models = [metrics.model for _, metrics in loaded]
    runs = []
    for path, metrics in loaded:
        unique = models.count(metrics.model) == 1
        label = metrics.model if unique else f"{metrics.model} ({path.name})"
        runs.append(StudyRun(path, label, metrics))
    return tuple(runs)


def _values(runs: Sequence[StudyRun[RutedMetrics]], contexts: list[str]) -> pd.DataFrame:
    columns = pd.MultiIndex.from_product([METRICS, contexts], names=["metric", "context"])
    rows = {
        run.label: [getattr(run.metrics.contexts[c], m) for m in METRICS for c in contexts]
        for run in runs
    }
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns).astype(float)


def _correlation(values: pd.DataFrame, metric: str, first: str, second: str) -> dict[str, float]:
    pair = values[[(metric, first), (metric, second)]].dropna()
    try:
        result = spearman(pair[(metric, first)], pair[(metric, second)])
        return {"rho": result.r, "p_value": result.p_value, "n": len(pair)}
    except ValueError:  # fewer than 3 models, or one context's values all equal
        return {"rho": math.nan, "p_value": math.nan, "n": len(pair)}


def _least_biased(
    values: pd.DataFrame, contexts: list[str], conventions: str = "biasaudit"
) -> pd.DataFrame:
    rows = []
    for metric in METRICS:
        picks: dict[str, set[str]] = {}
        for context in contexts:
            distance = {
                label: least_biased_value(metric, value, conventions)
                for label, value in values[(metric, context)].items()
            }
            best = min(distance.values())
            picks[context] = (
                {label for label, d in distance.items() if d <= best + 1e-12}
                if math.isfinite(best)
                else set()
            )
        standard = picks.get("standard")
        for context in contexts:
            agrees = (
                None
                if context == "standard" or standard is None
                else bool(picks[context] & standard)
            )
            chosen = [label for label in values.index if label in picks[context]]
            rows.append(
                {"metric": metric, "context": context, "models": ";".join(chosen), "agrees": agrees}
            )
    return pd.DataFrame(rows)


def _conventions(runs: Sequence[StudyRun[RutedMetrics]]) -> str:
    """The papers' conventions when every run chose them, else biasaudit's."""
    return "paper" if all(run.metrics.conventions == "paper" for run in runs) else "biasaudit"


def run_study(run_dirs: Sequence[str | Path], *, ndcg_at: int = 3) -> RutedStudyResult:
    """Compare the RUTEd runs in ``run_dirs`` (one per model); see the module docstring.

    ``ndcg_at`` is the allocation study's cutoff: this study ranks no models by NDCG.

    Raises
    ------
    UsageError
        No runs, a folder that is not a RUTEd run, or runs with no context in common.
    """
    if not run_dirs:
        raise UsageError("give at least one RUTEd run directory")
    runs = _labelled([Path(path) for path in run_dirs])
    contexts = contexts_present([run.metrics for run in runs])
    if not contexts:
        raise UsageError("the runs have no context in common")
    values = _values(runs, contexts)
    others = [c for c in contexts if c != "standard"]
    with_standard = pd.DataFrame(
        [
            {"metric": m, "context": c, **_correlation(values, m, "standard", c)}
            for m in METRICS
            for c in (others if "standard" in contexts else [])
        ],
        columns=["metric", "context", "rho", "p_value", "n"],
    )
    between = pd.DataFrame(
        [
            {"metric": m, "first": a, "second": b, **_correlation(values, m, a, b)}
            for m in METRICS
            for a, b in itertools.combinations(others, 2)
        ],
        columns=["metric", "first", "second", "rho", "p_value", "n"],
    )
    return RutedStudyResult(
        runs=runs,
        contexts=contexts,
        values=values,
        with_standard=with_standard,
        between_contexts=between,
        least_biased=_least_biased(values, contexts, _conventions(runs)),
    )
