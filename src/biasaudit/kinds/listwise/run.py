"""Running a listwise audit: the plan's requests through the engine, the answers read
into rankings, the figures, and the run directory (``answers.csv``, ``shown.csv``,
``metrics.json``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from biasaudit.engine.loop import run_async
from biasaudit.engine.session import RunSession
from biasaudit.kinds._runner import run_planned
from biasaudit.kinds.candidates.task import AllocationTask
from biasaudit.kinds.candidates.tasks import build_task
from biasaudit.kinds.common import request_counts
from biasaudit.kinds.listwise.metrics_file import AnswerCounts, ListwiseMetrics, metrics_fields
from biasaudit.kinds.listwise.plan import ListwisePlan, listwise_prompt
from biasaudit.kinds.listwise.spec import ListwiseSpec
from biasaudit.metrics import FEW_UNITS, listwise_figures
from biasaudit.providers import Provider
from biasaudit.store.runs import Manifest
from biasaudit.store.tables import write_csv

__all__ = ["ListwiseResult", "run"]


@dataclass(frozen=True)
class ListwiseResult:
    run_dir: Path
    manifest: Manifest
    metrics: ListwiseMetrics


def run(
    spec: ListwiseSpec,
    *,
    provider: Provider | None = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
) -> ListwiseResult:
    """Run the listwise audit ``spec`` describes.

    The task, its prompt and the provider (with its API key) are checked before the
    run directory exists: a usage error leaves nothing behind and sends nothing.
    """
    task = build_task(spec)
    provider = provider or spec.resolve_provider()
    plan = ListwisePlan(task, spec, listwise_prompt(task, spec), provider.capabilities)

    async def audit() -> ListwiseResult:
        ran = await run_planned(
            "listwise", spec, provider, plan, label=f"{task.name} (listwise)",
            stderr=stderr, command=command,
            write_results=lambda session: _write_results(session, task, spec, plan),
        )  # fmt: skip
        return ListwiseResult(ran.session.run.path, ran.session.manifest, ran.results)

    return run_async(audit())


def _write_results(
    session: RunSession, task: AllocationTask, spec: ListwiseSpec, plan: ListwisePlan
) -> ListwiseMetrics:
    answers = plan.answers()
    shown = plan.shown()
    write_csv(answers, session.run.path / "answers.csv")
    write_csv(shown, session.run.path / "shown.csv")
    notes: list[str] = []
    fields = {}
    k_max = 1 if plan.path == "logprobs" else min(spec.k_max, len(plan.labels))
    read = shown["p_first"] if plan.path == "logprobs" and not shown.empty else None
    if shown.empty or (shown["rank"].isna().all() and (read is None or read.isna().all())):
        notes.append("no answer ranked a shown candidate: no figure can be computed")
    else:
        try:
            figures = listwise_figures(
                shown.drop(columns=["candidate"]), reference=task.reference_group,
                k_max=k_max, categories=task.categories,
                impact_k=spec.headline_k, confidence=spec.confidence, replicates=spec.bootstrap,
                permutations=spec.bootstrap, seed=spec.seed,
            )  # fmt: skip
        except ValueError as error:  # e.g. the reference never in a ranked answer
            notes.append(f"no figures: {error}")
            figures = None
        fields = metrics_fields(figures) if figures is not None else {}
        fewest = int(figures.rates["units"].min()) if figures is not None else FEW_UNITS
        if fewest < FEW_UNITS:
            notes.append(
                f"a group has only {fewest} units (names, else items) behind its rates: "
                "intervals from so few are wide and cannot support a claim about a group (use "
                f"at least {FEW_UNITS} per group in the pools: more names, items or pools)"
            )
    failed = answers["error"].notna()
    metrics = ListwiseMetrics(
        task=task.name,
        model=session.provider.model_id,
        simulated=session.provider.simulated,
        model_versions=dict(session.engine.stats.model_versions),
        reference_group=task.reference_group,
        group_names=dict(task.group_names),
        listwise=spec.listwise,
        orders=spec.orders,
        pool_size=len(plan.labels),
        pools=len(plan.pools),
        orders_per_pool=len(plan.orders),
        samples=spec.samples,
        confidence=spec.confidence,
        k_max=k_max,
        headline_k=spec.headline_k,
        scoring=plan.path,
        requests=request_counts(session),
        counts=AnswerCounts(
            answers=int((~failed).sum()),
            ranked=int((answers["depth"] > 0).sum()),
            unread=int(answers["unread"].sum()),
            partial=int((answers["missing"] > 0).sum()),
            duplicates=int((answers["duplicates"] > 0).sum()),
            invented=int((answers["invented"] > 0).sum()),
            failed=int(failed.sum()),
        ),
        notes=notes,
        **fields,
    )
    session.run.write_json("metrics.json", metrics)
    return metrics
