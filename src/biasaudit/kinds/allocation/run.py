"""``biasaudit run``: an allocation audit from spec to run directory.

spec → task (candidates, prompts) → scoring plan (probe requests) → engine →
parsed answers → candidate scores → metrics. The run directory holds, besides
what every run has (``manifest.json`` of kind ``allocation``,
``responses.jsonl`` with each answer as read, ``spec.json``):

- ``scores.csv``: one row per candidate (per pool appearance, pairwise):
  ``candidate_id, group, qualified, subtask``, the name and the resume or
  essay id, ``score``, ``path`` (logprobs, samples or pairwise), the irregular
  flag and count, label probabilities, and the error of a failed request;
- ``comparisons.csv`` (pairwise): one row per prompt and its parsed answer;
- ``metrics.json``: :class:`~biasaudit.kinds.allocation.metrics_file.AllocationMetrics`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

import pandas as pd

from biasaudit.engine.loop import synchronous
from biasaudit.engine.session import RunSession
from biasaudit.kinds._runner import run_planned
from biasaudit.kinds.allocation.metrics_file import (
    AllocationMetrics,
    CandidateCounts,
    MetricOptions,
    PairwiseSummary,
    ScoringSummary,
    allocation_results,
)
from biasaudit.kinds.allocation.plan import PairwisePlan, PointwisePlan, ScoringPlan, plan_scoring
from biasaudit.kinds.allocation.spec import AllocationSpec
from biasaudit.kinds.candidates.task import AllocationTask
from biasaudit.kinds.candidates.tasks import build_task
from biasaudit.kinds.common import request_counts
from biasaudit.metrics import PairwiseOutputStats
from biasaudit.providers import Provider
from biasaudit.store.runs import RunResult
from biasaudit.store.tables import write_csv

__all__ = ["AuditResult", "run", "run_audit"]


@dataclass(frozen=True)
class AuditResult(RunResult):
    """A finished audit: where its run is, its manifest and its metrics."""

    metrics: AllocationMetrics


async def run_audit(
    spec: AllocationSpec,
    *,
    provider: Provider | None = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
) -> AuditResult:
    """Build the task, ask the model, score the candidates, and write the run.

    The task's data and the provider (with its API key) are checked before the
    run directory exists: a usage error leaves nothing behind and sends nothing.
    ``provider`` replaces the one ``spec.model`` names (tests, custom adapters).
    """
    task = build_task(spec)
    task.prompt(spec.method)
    provider = provider or spec.resolve_provider()
    plan = plan_scoring(task, spec, provider)
    ran = await run_planned(
        "allocation", spec, provider, plan, label=task.name, stderr=stderr, command=command,
        write_results=lambda session: _write_results(session, task, spec, plan),
    )  # fmt: skip
    return AuditResult(ran.session.run.path, ran.session.manifest, ran.results)


run = synchronous(run_audit)
"""The audit ``spec`` describes, run to completion: :func:`run_audit`, not async."""


def _write_results(
    session: RunSession, task: AllocationTask, spec: AllocationSpec, plan: ScoringPlan
) -> AllocationMetrics:
    scores = plan.scores()
    write_csv(scores, session.run.path / "scores.csv")
    comparisons = None
    if isinstance(plan, PairwisePlan):
        comparisons = plan.comparisons()
        write_csv(comparisons, session.run.path / "comparisons.csv")
    metrics = _metrics(task, spec, plan, scores, comparisons, session)
    session.run.write_json("metrics.json", metrics)
    return metrics


def _metrics(
    task: AllocationTask,
    spec: AllocationSpec,
    plan: ScoringPlan,
    scores: pd.DataFrame,
    comparisons: pd.DataFrame | None,
    session: RunSession,
) -> AllocationMetrics:
    notes: list[str] = []
    options = _options(task, spec, plan, notes)
    results = allocation_results(
        scores, options, notes, item_column=task.item_column, comparisons=comparisons
    )
    return AllocationMetrics(
        task=task.name,
        method=spec.method,
        model=session.provider.model_id,
        simulated=session.provider.simulated,
        model_versions=dict(session.engine.stats.model_versions),
        reference_group=task.reference_group,
        group_names={g: task.display_name(g) for g in task.groups},
        k_max=options.k_max,
        confidence=spec.confidence,
        scoring=_scoring(plan, options),
        candidates=_candidate_counts(scores),
        requests=request_counts(session),
        headline_k=min(spec.headline_k, options.k_max),
        conventions=spec.conventions,
        qualified_rule=task.qualified_rule,
        pairwise=_pairwise(plan, spec.conventions),
        notes=notes,
        **results.figures(),
    )


def _options(
    task: AllocationTask, spec: AllocationSpec, plan: ScoringPlan, notes: list[str]
) -> MetricOptions:
    pairwise = isinstance(plan, PairwisePlan)
    pool_size = len(task.groups) if task.pool.kind == "one_per_group" else task.pool.size or 0
    k_max = min(spec.k_max, pool_size)
    if k_max < spec.k_max:
        notes.append(f"k_max lowered from {spec.k_max} to the pool size, {pool_size}")
    labels = list(task.labels.values())
    return MetricOptions(
        reference=task.reference_group,
        groups=task.groups,
        k_max=k_max,
        pool=task.pool,
        rounds=spec.rounds,
        value_range=(0.0, 1.0) if pairwise else (min(labels), max(labels)),
        seed=spec.seed,
        bootstrap=spec.bootstrap,
        gap_bootstrap=spec.gap_bootstrap,
        confidence=spec.confidence,
        pairwise=pairwise,
        conventions=spec.conventions,
        categories=task.categories,
    )


def _scoring(plan: ScoringPlan, options: MetricOptions) -> ScoringSummary:
    if isinstance(plan, PointwisePlan):
        probe = plan.probe
        return ScoringSummary(
            path=probe.path,
            samples=probe.samples if probe.path == "samples" else None,
            labels=dict(probe.labels),
            value_range=list(options.value_range),
            chat_template=probe.template.name if probe.template is not None else None,
        )
    return ScoringSummary(path="pairwise", value_range=list(options.value_range))


def _candidate_counts(scores: pd.DataFrame) -> CandidateCounts:
    failed = int(scores["error"].notna().sum()) if "error" in scores.columns else 0
    return CandidateCounts(
        total=len(scores),
        scored=int(scores["score"].notna().sum()),
        irregular=int(scores["irregular"].astype(bool).sum()),
        unscored=int(scores["score"].isna().sum()),
        failed=failed,
        refused=int(scores["refused"].astype(bool).sum()) if "refused" in scores.columns else 0,
    )


def regular_share(stats: PairwiseOutputStats, conventions: str) -> float | None:
    """The share of prompts answered regularly: parsed, ties included (biasaudit), or
    answered with a winner, ties left out (the paper's)."""
    if conventions == "paper" and stats.regular is not None and stats.ties is not None:
        return stats.regular * (1 - stats.ties)
    return stats.regular


def _pairwise(plan: ScoringPlan, conventions: str = "biasaudit") -> PairwiseSummary | None:
    """The pairwise output statistics; ``conventions="paper"``: "regular" is the share of
    prompts answered with a winner, ties left out, as the paper counts it."""
    if not isinstance(plan, PairwisePlan):
        return None
    stats = plan.output_stats
    comparisons = plan.comparisons()
    return PairwiseSummary(
        pools=len(plan.pools),
        n_prompts=stats.n_prompts,
        n_pairs=stats.n_pairs,
        regular=regular_share(stats, conventions),
        ties=stats.ties,
        flipped=stats.flipped,
        inconsistent=stats.inconsistent,
        unparsed=int(comparisons["choice"].isna().sum()),
        refused=int(comparisons["refused"].sum()),
    )
