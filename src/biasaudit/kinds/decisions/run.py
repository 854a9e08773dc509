"""``biasaudit run decisions``: a decisions audit from spec to run directory.

Tamkin et al., "Evaluating and Mitigating Discrimination in Language Model
Decisions" (2023). spec → task (scenarios filled with every person) → plan (each
person in each answer order) → engine → P(yes) normalised over yes and no, and its
logit → per fill, the discrimination scores (:func:`~biasaudit.metrics.discrimination_scores`:
each scenario's least-squares fit averaged, t intervals over scenarios; beside them
the paper's mixed model fitted by statsmodels, :func:`~biasaudit.metrics.mixed_model_scores`),
the mean P(yes) and the answer-order gap, each with its interval over scenarios.

The run directory holds, besides what every run has (``manifest.json`` of kind
``decisions``, ``responses.jsonl``, ``spec.json``):

- ``answers.csv``: one row per request
  (:meth:`~biasaudit.kinds.decisions.task.DecisionsPlan.answers`);
- ``persons.csv``: one row per person, the orders averaged
  (:func:`~biasaudit.kinds.decisions.task.persons_frame`);
- ``scenarios.csv``: one row per fill and scenario: its persons, mean P(yes), order gap
  and its own coefficient of every term (the per-scenario breakdown);
- ``metrics.json``: :class:`~biasaudit.kinds.decisions.metrics_file.DecisionsMetrics`.

A failed request, or an answer that puts no probability on yes or no, leaves the
person without that order. A person without a usable answer in every order asked is
left out of the fits, since one order alone would carry its order bias into the
person's value; they are counted in a note. A scenario that then lacks a race, a gender
or a second age is left out of the scores (named in a note).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TextIO

import pandas as pd

from biasaudit.engine.loop import synchronous
from biasaudit.engine.session import RunSession
from biasaudit.kinds._runner import run_planned
from biasaudit.kinds.common import request_counts
from biasaudit.kinds.decisions.metrics_file import (
    DecisionsMetrics,
    FillScores,
    Score,
    with_score_verdicts,
)
from biasaudit.kinds.decisions.spec import DecisionsSpec
from biasaudit.kinds.decisions.task import (
    DecisionsPlan,
    DecisionsTask,
    build_decisions_task,
    persons_frame,
    plan_decisions,
)
from biasaudit.metrics import discrimination_scores, mixed_model_scores, scenario_mean
from biasaudit.providers import Provider
from biasaudit.store.runs import RunResult
from biasaudit.store.tables import write_csv

__all__ = ["DecisionsResult", "baseline", "fill_scores", "run", "run_decisions_audit"]


@dataclass(frozen=True)
class DecisionsResult(RunResult):
    """A finished decisions audit: its run, manifest, metrics and persons."""

    metrics: DecisionsMetrics
    persons: pd.DataFrame


async def run_decisions_audit(
    spec: DecisionsSpec,
    *,
    provider: Provider | None = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
) -> DecisionsResult:
    """Read and fill the scenarios, ask every person in every order, score, write the run.

    Scenarios, prompt and provider (with its API key) are checked before the run
    directory exists: a usage error leaves nothing behind and sends nothing.
    """
    task = build_decisions_task(spec)
    provider = provider or spec.resolve_provider()
    plan = plan_decisions(task, spec, provider)
    ran = await run_planned(
        "decisions", spec, provider, plan, stderr=stderr, command=command,
        write_results=lambda session: _write_results(session, task, spec, plan),
    )  # fmt: skip
    metrics, persons = ran.results
    return DecisionsResult(ran.session.run.path, ran.session.manifest, metrics, persons)


run = synchronous(run_decisions_audit)
"""The audit ``spec`` describes, run to completion: :func:`run_decisions_audit`, not async."""


def _write_results(
    session: RunSession, task: DecisionsTask, spec: DecisionsSpec, plan: DecisionsPlan
) -> tuple[DecisionsMetrics, pd.DataFrame]:
    answers = plan.answers()
    write_csv(answers, session.run.path / "answers.csv")
    persons = persons_frame(answers)
    write_csv(persons, session.run.path / "persons.csv")
    notes: list[str] = []
    fills, scenarios = fill_scores(
        persons, confidence=spec.confidence, conventions=spec.conventions, notes=notes
    )
    write_csv(scenarios, session.run.path / "scenarios.csv")
    if task.in_file is not None:
        notes.append(
            f"{len(task.scenarios)} of the file's {task.in_file} scenarios, drawn at random "
            "(--scenario-limit)"
        )
    irregular = int((answers["irregular"] > 0).sum())
    if irregular:
        notes.append(f"{irregular} answer(s) began with neither yes nor no (counted; P(yes) "
                     "read from the probability the answer left on them, if any)")  # fmt: skip
    metrics = DecisionsMetrics(
        model=session.provider.model_id,
        simulated=session.provider.simulated,
        model_versions=dict(session.engine.stats.model_versions),
        scenarios_source=task.source,
        prompt=task.prompt_name,
        orders=list(plan.orders),
        scoring=plan.probe.path,
        samples=plan.probe.samples if plan.probe.path == "samples" else None,
        age_scale=age_scale(spec.conventions),
        baseline=baseline(spec.conventions),
        confidence=spec.confidence,
        conventions=spec.conventions,
        fills=fills,
        scenarios_total=len(task.scenarios),
        persons_total=len(task.persons),
        requests=request_counts(session),
        notes=notes,
    )
    session.run.write_json("metrics.json", metrics)
    return metrics, persons


def age_scale(conventions: str) -> Literal["decade", "sd"]:
    """Age per 10 years from 60 (biasaudit), or standardised (the paper's ``scale()``)."""
    return "sd" if conventions == "paper" else "decade"


def baseline(conventions: str) -> str:
    """The person every score is measured against."""
    age = "of the mean age (60 for ages 20-100)" if conventions == "paper" else "aged 60"
    return f"a white male person {age}"


def fill_scores(
    persons: pd.DataFrame,
    *,
    confidence: float,
    conventions: str = "biasaudit",
    notes: list[str],
    mixed_model: bool = True,
) -> tuple[dict[str, FillScores], pd.DataFrame]:
    """The figures of each fill from the persons' logits, and the per-scenario breakdown
    (``scenarios.csv``); notes on scenarios and persons left out added to ``notes``.

    ``conventions="paper"``: the mixed model's estimates and Wald intervals are the
    scores, age standardised; else the scenarios' own fits averaged (t over scenarios),
    age per 10 years, the mixed model's estimates beside them."""
    from biasaudit.metrics import critical_value

    found: dict[str, FillScores] = {}
    breakdowns = []
    scale = age_scale(conventions)
    for fill, part in persons.groupby("fill", sort=False):
        usable = part[part["logit"].notna()]
        if usable.empty:
            found[str(fill)] = FillScores(fill=str(fill), scenarios=0, persons=len(part), usable=0)
            notes.append(f"{fill}: no usable answer")
            continue
        try:
            scores = discrimination_scores(usable, confidence=confidence, age_scale=scale)
        except ValueError as error:
            found[str(fill)] = FillScores(fill=str(fill), scenarios=0, persons=len(part),
                                          usable=len(usable))  # fmt: skip
            notes.append(f"{fill}: no scores: {error}")
            continue
        notes += [f"{fill}: {note}" for note in scores.notes]
        mixed = mixed_model_scores(usable, age_scale=scale, paper=conventions == "paper") \
            if mixed_model and len(usable["scenario"].unique()) >= 2 else None  # fmt: skip
        by_scenario = usable.groupby("scenario", sort=False)
        p_mean, p_ci, _ = scenario_mean(by_scenario["p_yes"].mean().tolist(),
                                        confidence=confidence)  # fmt: skip
        gaps = by_scenario["order_gap"].mean()
        gap, gap_ci, gap_p = scenario_mean(gaps.tolist(), confidence=confidence)
        rows = []
        for score in scores.scores:
            estimate: float | None = score.estimate
            se: float | None = score.se
            ci, p = score.ci, score.p
            mm = mm_se = None
            if mixed is not None and mixed.error is None:
                mm, mm_se = mixed.estimates.get(score.term), mixed.se.get(score.term)
            if conventions == "paper":
                estimate, se = mm, mm_se
                z = critical_value(confidence)
                ci = (math.nan, math.nan) if estimate is None or se is None else (
                    estimate - z * se, estimate + z * se)  # fmt: skip
                p = _wald_p(estimate, se) or math.nan
            rows.append(Score(
                attribute=score.attribute, level=score.level, estimate=_finite(estimate),
                ci=_bounds(ci), se=_finite(se), p=_finite(p), scenarios=score.scenarios,
                rows=score.rows, mixed_model=_finite(mm), mixed_model_se=_finite(mm_se),
            ))  # fmt: skip
        found[str(fill)] = FillScores(
            fill=str(fill),
            scenarios=int(by_scenario.ngroups),
            persons=len(part),
            usable=len(usable),
            capped=int(usable["capped"].sum()) if "capped" in usable else 0,
            p_yes=_finite(p_mean),
            p_yes_ci=_bounds(p_ci),
            scores=rows,
            order_gap=None if gaps.isna().all() else _finite(gap),
            order_gap_ci=None if gaps.isna().all() else _bounds(gap_ci),
            order_gap_p=None if gaps.isna().all() else _finite(gap_p),
            mixed_model_converged=None if mixed is None else mixed.converged,
            mixed_model_notes=[] if mixed is None else _mixed_notes(mixed),
            left_out=list(scores.left_out),
        )
        breakdown = scores.per_scenario.copy()
        breakdown.insert(0, "fill", fill)
        breakdown["order_gap"] = breakdown["scenario"].map(gaps.rename(index=str))
        breakdowns.append(breakdown)
    with_score_verdicts(found)
    skipped = int(persons["logit"].isna().sum())
    if skipped:
        some = int(((persons["orders"] > 0) & persons["logit"].isna()).sum())
        notes.append(
            f"{skipped} person(s) without a usable answer in every order asked, left out"
            + (f" ({some} with one order only: alone, its order bias would shift them)"
               if some else "")
        )  # fmt: skip
    if not breakdowns:  # the columns still, so that the file reads back
        return found, pd.DataFrame(columns=["fill", "scenario", "rows", "p_yes", "order_gap"])
    return found, pd.concat(breakdowns, ignore_index=True)


def _mixed_notes(mixed: Any) -> list[str]:
    notes = [f"fitted with {mixed.method}"]
    if mixed.error:
        notes.append(mixed.error)
    return notes + list(mixed.warnings)


def _wald_p(estimate: float | None, se: float | None) -> float | None:
    if estimate is None or se is None or not se > 0:
        return None
    from biasaudit.metrics import two_sided_p

    return two_sided_p(estimate / se)  # normal: a Wald test


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _bounds(bounds: Sequence[float] | None) -> list[float] | None:
    if bounds is None or any(not math.isfinite(b) for b in bounds):
        return None
    return [float(bounds[0]), float(bounds[1])]
