"""``biasaudit run grade-score``: a Grade Score audit from spec to run directory.

Iourovitski, "Grade Score: Quantifying LLM Performance in Option Selection"
(2024). spec → task (items, judge prompt) → plan (every order of every item,
replicated) → engine → parsed answers (chosen slot → original option) →
per-item Grade Score, entropy score and choice score
(:func:`~biasaudit.metrics.grade_score`) → their means over complete items
with bootstrap intervals over items, and the share of answers per slot with
its interval and a χ² test that no slot is preferred
(:func:`~biasaudit.metrics.grade_score_summary`).

The run directory holds, besides what every run has (``manifest.json`` of
kind ``grade-score``, ``responses.jsonl`` with each answer as read,
``spec.json``):

- ``trials.csv``: one row per request (columns: :mod:`biasaudit.kinds.grade_score.task`);
- ``items.csv``: one row per item: ``item_id, n_options, trials, failed,
  unparsed, usable``, how often each slot was chosen (``pos_1`` .. ``pos_n``,
  slot 1 shown first), how often each original option was
  (``option_0`` .. , index into the item's ``options``; ``option_random`` for
  the added unrelated option), ``most_chosen``, ``preferred``,
  ``agreement`` (share of usable answers choosing the preferred option),
  ``preferred_most_chosen``, ``entropy``, ``choice``, ``grade`` and ``random_source``;
- ``metrics.json``: :class:`GradeScoreMetrics`.

A failed request is left out of its item (``failed``); an unparseable answer
is counted (``unparsed``) and left out. An item with a usable answer to only
some of its requests (*partial*) is left out of the means, counted, with a
note: fewer answers than orders lower its entropy by construction (one answer:
entropy 0, Grade Score 0), so keeping it would report the parser's failures
as the judge's position bias. Its answers still count in the slot shares.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import pandas as pd

from biasaudit.engine.loop import synchronous
from biasaudit.engine.session import RunSession
from biasaudit.kinds._runner import run_planned
from biasaudit.kinds.common import RequestCounts
from biasaudit.kinds.grade_score.metrics_file import Agreement, GradeScoreMetrics, SlotTestResult
from biasaudit.kinds.grade_score.spec import GradeScoreSpec
from biasaudit.kinds.grade_score.task import (
    GradeItem,
    GradeScorePlan,
    GradeScoreTask,
    build_grade_score_task,
    plan_grade_score,
)
from biasaudit.metrics import (
    MIN_ITEMS,
    GradeScore,
    GradeScoreSummary,
    grade_score,
    grade_score_summary,
    item_interval,
)
from biasaudit.providers import Provider
from biasaudit.store.runs import RunResult
from biasaudit.store.tables import write_csv

__all__ = [
    "GradeScoreResult",
    "item_figures",
    "judge_settings",
    "run",
    "run_grade_audit",
]


@dataclass(frozen=True)
class GradeScoreResult(RunResult):
    """A finished Grade Score audit: its run, manifest, metrics and per-item figures."""

    metrics: GradeScoreMetrics
    items: pd.DataFrame


async def run_grade_audit(
    spec: GradeScoreSpec,
    *,
    provider: Provider | None = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
) -> GradeScoreResult:
    """Read the items, ask the judge every order, score the items, and write the run.

    Items, prompt and provider (with its API key) are checked before the run
    directory exists: a usage error leaves nothing behind and sends nothing.
    ``provider`` replaces the one ``spec.model`` names (tests, custom adapters).
    """
    task = build_grade_score_task(spec)
    plan = plan_grade_score(task, spec)
    provider = provider or spec.resolve_provider()
    ran = await run_planned(
        "grade-score", spec, provider, plan, stderr=stderr, command=command,
        write_results=lambda session: _write_results(session, task, spec, plan),
    )  # fmt: skip
    metrics, items = ran.results
    return GradeScoreResult(ran.session.run.path, ran.session.manifest, metrics, items)


run = synchronous(run_grade_audit)
"""The audit ``spec`` describes, run to completion: :func:`run_grade_audit`, not async."""


def _write_results(
    session: RunSession, task: GradeScoreTask, spec: GradeScoreSpec, plan: GradeScorePlan
) -> tuple[GradeScoreMetrics, pd.DataFrame]:
    trials = plan.trials()
    write_csv(trials, session.run.path / "trials.csv")
    items, scores = item_figures(task.items, trials)
    write_csv(items, session.run.path / "items.csv")
    metrics = _metrics(task, spec, plan, trials, items, scores, session)
    session.run.write_json("metrics.json", metrics)
    return metrics, items


def item_figures(
    items: Sequence[GradeItem], trials: pd.DataFrame
) -> tuple[pd.DataFrame, dict[str, GradeScore]]:
    """One row per item (columns: module docstring), and the Grade Score of each item.

    Items without a usable answer have a row but no Grade Score.
    """
    rows, scores = [], {}
    by_item = dict(tuple(trials.groupby("item_id", sort=False)))
    for item in items:
        asked = by_item[item.id]
        answered = asked[asked["error"].isna()]
        usable = answered[answered["slot"].notna()]
        row = _counts_row(item, asked, answered, usable)
        row |= {"entropy": None, "choice": None, "grade": None}
        if len(usable):
            positions = [None if pd.isna(s) else int(s) - 1 for s in answered["slot"]]
            options = [None if pd.isna(o) else int(o) for o in answered["option"]]
            scores[item.id] = grade_score(positions, options, item.n_options)
            score = scores[item.id]
            row |= {"entropy": score.entropy, "choice": score.choice, "grade": score.grade}
        rows.append(row | {"random_source": item.random_source})
    return pd.DataFrame(rows).astype({"preferred": "Int64"}), scores


def _counts_row(
    item: GradeItem, asked: pd.DataFrame, answered: pd.DataFrame, usable: pd.DataFrame
) -> dict[str, Any]:
    slots = usable["slot"].astype(int).value_counts()
    chosen = usable["option"].astype(int).value_counts()
    row: dict[str, Any] = {
        "item_id": item.id,
        "n_options": item.n_options,
        "trials": len(asked),
        "failed": len(asked) - len(answered),
        "unparsed": len(answered) - len(usable),
        "usable": len(usable),
    }
    row |= {f"pos_{slot}": int(slots.get(slot, 0)) for slot in range(1, item.n_options + 1)}
    for index in range(item.n_options):
        row[_option_column(item, index)] = int(chosen.get(index, 0))
    top = [int(i) for i in chosen.index[chosen == chosen.max()]] if len(chosen) else []
    row["most_chosen"] = " ".join(_option_name(item, i) for i in sorted(top)) or None
    row["preferred"] = item.preferred
    judged = item.preferred is not None and len(usable) > 0
    row["agreement"] = chosen.get(item.preferred, 0) / len(usable) if judged else None
    row["preferred_most_chosen"] = item.preferred in top if judged else None
    return row


def _option_column(item: GradeItem, index: int) -> str:
    return f"option_{_option_name(item, index)}"


def _option_name(item: GradeItem, index: int) -> str:
    return "random" if index == item.random_index else str(index)


def _metrics(
    task: GradeScoreTask,
    spec: GradeScoreSpec,
    plan: GradeScorePlan,
    trials: pd.DataFrame,
    items: pd.DataFrame,
    scores: dict[str, GradeScore],
    session: RunSession,
) -> GradeScoreMetrics:
    notes = _setting_notes(spec)
    if task.in_file is not None:
        notes.append(
            f"{len(task.items)} of the file's {task.in_file} items, drawn at random (--item-limit)"
        )
    stats = session.engine.stats
    return GradeScoreMetrics(
        model=session.provider.model_id,
        simulated=session.provider.simulated,
        model_versions=dict(stats.model_versions),
        items_source=task.source,
        prompt=task.prompt.name,
        prompt_description=task.prompt.description,
        random_option=spec.random_option,
        permutations=spec.permutations,
        orders=len(plan.orders),
        replicates=spec.replicates,
        temperature=spec.temperature,
        max_tokens=plan.probe.max_tokens,
        n_options=task.n_options,
        confidence=spec.confidence,
        **score_fields(
            trials,
            items,
            scores,
            confidence=spec.confidence,
            n_options=task.n_options,
            random_option=spec.random_option,
            notes=notes,
            conventions=spec.conventions,
        ),
        conventions=spec.conventions,
        items_total=len(task.items),
        requests=RequestCounts(
            requests=stats.total,
            sent=stats.sent,
            cache_hits=stats.cache_hits,
            failures=stats.failures,
            refusals=stats.refusals,
        ),
        notes=notes,
    )


def judge_settings(metrics: GradeScoreMetrics) -> str:
    """How the judge was asked, in one phrase (imported answers say so)."""
    if metrics.temperature is None:
        return f"{metrics.prompt_description}"
    return (
        f"prompt {metrics.prompt} ({metrics.prompt_description}); temperature "
        f"{metrics.temperature:g}, up to {metrics.max_tokens} tokens"
    )


def score_fields(
    trials: pd.DataFrame,
    items: pd.DataFrame,
    scores: dict[str, GradeScore],
    *,
    confidence: float,
    n_options: int,
    random_option: bool,
    notes: list[str],
    conventions: str = "biasaudit",
) -> dict[str, Any]:
    """Every figure of ``metrics.json`` that follows from the trials and items (the means
    over complete items, the slots, agreement, counts); notes on partial items added.

    ``conventions="paper"``: the means take every item as GradeLab does, partial ones as
    scored and one with no usable answer as 0."""
    complete = _complete(items, scores)
    if conventions == "paper":
        counted = [scores.get(str(i)) or _zero(n_options) for i in items["item_id"]]
        summary = grade_score_summary(counted, confidence=confidence) if counted else None
        return {**_fields(trials, items, scores, summary, confidence, n_options, random_option),
                "partial": 0}  # fmt: skip
    notes[:0] = _item_notes(items, scores, complete)
    summary = (
        grade_score_summary(list(complete.values()), confidence=confidence) if complete else None
    )
    return {
        **_fields(trials, items, scores, summary, confidence, n_options, random_option),
        "partial": len(scores) - len(complete),
    }


def _zero(n_options: int) -> GradeScore:
    """An item without a usable answer, as GradeLab scores it."""
    return GradeScore(0.0, 0.0, 0.0, 0, 0, (0,) * n_options)


def _fields(
    trials: pd.DataFrame,
    items: pd.DataFrame,
    scores: dict[str, GradeScore],
    summary: GradeScoreSummary | None,
    confidence: float,
    n_options: int,
    random_option: bool,
) -> dict[str, Any]:
    usable = trials[trials["slot"].notna()]
    random_share = None
    if random_option and len(usable):
        random_share = float(usable["random"].astype(bool).mean())
    return {
        **_summary_fields(summary, n_options),
        **_slot_fields(scores, confidence, n_options),
        "trials": len(trials),
        "usable": len(usable),
        "unparsed": int(items["unparsed"].sum()),
        "refused": int(trials["refused"].sum()) if "refused" in trials.columns else 0,
        "failed": int(items["failed"].sum()),
        "agreement": _agreement(items, scores, confidence),
        "random_option_share": random_share,
    }


def _complete(items: pd.DataFrame, scores: dict[str, GradeScore]) -> dict[str, GradeScore]:
    """The items every request of which gave a usable answer."""
    whole = set(items.loc[items["usable"] == items["trials"], "item_id"].astype(str))
    return {item: score for item, score in scores.items() if str(item) in whole}


def _slot_fields(
    scores: dict[str, GradeScore], confidence: float, n_options: int
) -> dict[str, Any]:
    """Slot shares, their intervals and the test, over every usable answer (partial items
    included: an answer's slot says as much about position bias whatever its item's fate)."""
    if not scores:
        return {"position_histogram": [0.0] * n_options}
    summary = grade_score_summary(list(scores.values()), confidence=confidence)
    test = summary.slot_test
    return {
        "position_histogram": list(summary.position_histogram),
        "position_counts": list(summary.position_counts),
        "position_ci": None
        if any(math.isnan(low) for low, _ in summary.position_ci)
        else [[low, high] for low, high in summary.position_ci],
        "slot_test": None
        if test is None
        else SlotTestResult(statistic=test.statistic, df=test.df, p=test.p, n=test.n),
        "slot_p": summary.slot_p,
    }


def _summary_fields(summary: GradeScoreSummary | None, n_options: int) -> dict[str, Any]:
    if summary is None:
        return {
            "grade_score": None, "entropy": None, "choice": None, "items": 0,
        }  # fmt: skip
    return {
        "grade_score": summary.grade_score,
        "grade_score_ci": _interval(summary.grade_score_ci),
        "entropy": summary.entropy,
        "entropy_ci": _interval(summary.entropy_ci),
        "choice": summary.choice,
        "choice_ci": _interval(summary.choice_ci),
        "items": summary.items,
    }


def _interval(bounds: tuple[float, float]) -> list[float] | None:
    """JSON has no NaN: an interval that cannot be computed (one item) is None."""
    return None if any(math.isnan(b) for b in bounds) else [bounds[0], bounds[1]]


def _agreement(
    items: pd.DataFrame, scores: dict[str, GradeScore], confidence: float
) -> Agreement | None:
    judged = items[items["agreement"].notna() & items["item_id"].isin(list(scores))]
    if judged.empty:
        return None
    rates = judged["agreement"].astype(float).tolist()
    return Agreement(
        items=len(judged),
        rate=sum(rates) / len(rates),
        rate_ci=_interval(item_interval(rates, confidence=confidence)),
        most_chosen=float(judged["preferred_most_chosen"].astype(bool).mean()),
    )


def _item_notes(
    items: pd.DataFrame, scores: dict[str, GradeScore], complete: dict[str, GradeScore]
) -> list[str]:
    notes = []
    partial = [str(i) for i in scores if i not in complete]
    if partial:
        shown = ", ".join(partial[:5]) + (", ..." if len(partial) > 5 else "")
        notes.append(
            f"{len(partial)} partial item(s), with usable answers to some requests only, left "
            f"out of the means (fewer answers than orders lower the entropy by construction); "
            f"their answers count in the slot shares: {shown}"
        )
    unscored = [str(i) for i in items["item_id"] if i not in scores]
    if unscored:
        shown = ", ".join(unscored[:5]) + (", ..." if len(unscored) > 5 else "")
        notes.append(
            f"{len(unscored)} item(s) without a usable answer, left out of the means: {shown}"
        )
    if 0 < len(complete) < MIN_ITEMS:
        notes.append(
            f"too few items for an interval: {len(complete)} complete (at least {MIN_ITEMS})"
        )
    return notes


def _setting_notes(spec: GradeScoreSpec) -> list[str]:
    if spec.temperature == 0 and spec.replicates > 1:
        return [
            "replicates at temperature 0 repeat one greedy answer where the model is deterministic"
        ]
    return []
