"""``biasaudit run ruted``: a RUTEd gender-occupation audit from spec to run directory.

Lum et al., "Bias in Language Models: Beyond Trick Tests and Towards RUTEd
Evaluation" (ACL 2025). spec → task (occupations, context prompts) → plan
(the next word after "The {occupation} is"; replicate bedtime stories, user
personas and ESL exercises) → engine → each answer read (next-word shares,
pronoun verdicts) → per-occupation male shares → neutrality, skew and
stereotype per context with their intervals (:mod:`biasaudit.kinds.ruted.metrics_file`).

The run directory holds, besides what every run has (``manifest.json`` of
kind ``ruted``, ``responses.jsonl`` with each answer as read, ``spec.json``):

- ``occupations.csv``: one row per (context, occupation), templates pooled:
  ``context, occupation, majority``, the replicate counts ``male, female,
  none`` (no gendered pronoun), ``tied``, ``failed``, ``n`` (gendered),
  ``p_male``, ``d`` = 2p - 1, ``stereotypical`` (±d, + for the majority
  gender); from logprobs ``male_mass, female_mass, top_mass, coverage,
  p_male_low, p_male_high, missing_words``; and the error of a failed request;
- ``replicates.csv``: one row per replicate read: ``context, template,
  occupation, replicate, male_pronouns, female_pronouns, verdict``
  (male, female, tie, none);
- ``similarity.csv``: the mode-collapse check (RUTEd §4.4), where it ran:
  ``context, occupation, similarity``, the mean cosine similarity of each
  prompt's replicate texts (sentence embeddings; the ``embeddings`` extra);
- ``metrics.json``: :class:`~biasaudit.kinds.ruted.metrics_file.RutedMetrics`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

import pandas as pd

from biasaudit.engine.loop import synchronous
from biasaudit.engine.session import RunSession
from biasaudit.errors import BiasauditError, LogprobsUnavailableError, UsageError
from biasaudit.kinds._runner import run_planned
from biasaudit.kinds.common import request_counts
from biasaudit.kinds.ruted import embeddings
from biasaudit.kinds.ruted.metrics_file import (
    ContextMetrics,
    RutedMetrics,
    context_metrics,
    intervals_over,
    mass_notes,
    mode_collapse_check,
    occupations_csv,
    ties_as_female,
)
from biasaudit.kinds.ruted.plan import RutedPlan, plan_ruted
from biasaudit.kinds.ruted.spec import RutedSpec
from biasaudit.kinds.ruted.task import RutedTask, build_ruted_task
from biasaudit.providers import Provider
from biasaudit.store.runs import RunResult
from biasaudit.store.tables import write_csv

__all__ = ["RutedResult", "run", "run_ruted_audit"]

_SOURCES = {
    "continuation": "continuation logprobs",
    "completions": "completions logprobs",
    "chat": "chat logprobs",
    "samples": "sampled next words",
}


@dataclass(frozen=True)
class RutedResult(RunResult):
    """A finished RUTEd audit: where its run is, its manifest and its metrics."""

    metrics: RutedMetrics


async def run_ruted_audit(
    spec: RutedSpec,
    *,
    provider: Provider | None = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
) -> RutedResult:
    """Build the task, ask the model, read the answers, and write the run.

    The occupations, the prompts and the provider (with its API key) are
    checked before the run directory exists: a usage error leaves nothing
    behind and sends nothing. ``provider`` replaces the one ``spec.model``
    names (tests, custom adapters).
    """
    task = build_ruted_task(spec)
    if spec.mode_collapse == "on" and task.generation_contexts:
        missing = embeddings.missing_embedder()
        if missing is not None:
            raise UsageError(f"--mode-collapse on: {missing}")
    provider = provider or spec.resolve_provider()
    plan = plan_ruted(task, spec, provider.capabilities)
    ran = await run_planned(
        "ruted", spec, provider, plan, stderr=stderr, command=command,
        write_results=lambda session: _write_results(session, task, spec, plan),
        explain_abort=lambda error: _next_word_hint(error.cause, plan),
    )  # fmt: skip
    return RutedResult(ran.session.run.path, ran.session.manifest, ran.results)


run = synchronous(run_ruted_audit)
"""The audit ``spec`` describes, run to completion: :func:`run_ruted_audit`, not async."""


def _write_results(
    session: RunSession, task: RutedTask, spec: RutedSpec, plan: RutedPlan
) -> RutedMetrics:
    rows = plan.occupation_rows()
    write_csv(occupations_csv(rows), session.run.path / "occupations.csv")
    write_csv(plan.replicate_rows(), session.run.path / "replicates.csv")
    notes: list[str] = []
    counted = ties_as_female(rows) if spec.conventions == "paper" else rows
    contexts = {
        context: _context(context, counted[counted["context"] == context], task, spec, plan, notes)
        for context in task.contexts
    }
    status, similarity, by_occupation = mode_collapse_check(
        plan.texts(), spec.mode_collapse, spec.confidence
    )
    for context, figures in similarity.items():
        contexts[context].similarity = figures
    if status is not None and status.startswith("skipped:"):
        notes.append(f"mode-collapse check {status}")
    if similarity:
        write_csv(by_occupation, session.run.path / "similarity.csv")
    metrics = RutedMetrics(
        model=session.provider.model_id,
        simulated=session.provider.simulated,
        model_versions=dict(session.engine.stats.model_versions),
        confidence=spec.confidence,
        occupations=len(task.occupations),
        male_majority=sum(o.majority == "male" for o in task.occupations),
        occupations_source=task.occupations_source,
        replicates=spec.replicates,
        templates=list(task.templates) if task.generation_contexts else [],
        temperature=spec.temperature,
        conventions=spec.conventions,
        intervals_over=intervals_over(spec.conventions),
        contexts=contexts,
        mode_collapse=status,
        requests=request_counts(session),
        notes=notes,
    )
    session.run.write_json("metrics.json", metrics)
    return metrics


def _context(
    context: str,
    rows: pd.DataFrame,
    task: RutedTask,
    spec: RutedSpec,
    plan: RutedPlan,
    notes: list[str],
) -> ContextMetrics:
    if context == "standard":
        assert plan.nextword is not None
        source = _SOURCES[plan.nextword.path]
        replicates = spec.replicates * len(task.occupations) if plan.sampled_standard else 0
        found = context_metrics(
            rows,
            source=source,
            confidence=spec.confidence,
            replicates=replicates,
            top_logprobs=plan.nextword.top_logprobs,
            over=intervals_over(spec.conventions),
        )
    else:
        found = context_metrics(
            rows,
            source="generations",
            confidence=spec.confidence,
            templates=task.templates,
            max_tokens=task.prompts[context].max_tokens,
            replicates=spec.replicates * len(task.occupations) * len(task.templates),
            over=intervals_over(spec.conventions),
        )
    notes.extend(_notes(context, found, spec))
    return found


def _notes(context: str, found: ContextMetrics, spec: RutedSpec) -> list[str]:
    notes = []
    if found.source == "sampled next words":
        notes.append(
            f"{context}: the endpoint gives no logprobs, so next-word shares are estimated "
            f"from {spec.replicates} sampled first words per occupation "
            f"(temperature {spec.temperature:g})"
        )
    if found.partly_covered:
        notes.append(
            f"{context}: {found.partly_covered} occupations have listed words outside the top-N "
            f"alternatives; the shares count what was seen (coverage "
            f"{100 * (found.coverage or 0):.1f}%, lowest {100 * (found.coverage_min or 0):.1f}%), "
            "and the bounds give what the unseen mass allows"
        )
    floor, value = found.neutrality_floor, found.neutrality
    if floor is not None and value is not None and value < 2 * floor:
        notes.append(
            f"{context}: neutrality {value:.3f} is within twice what sampling noise alone gives "
            f"a perfectly neutral model from these replicates ({floor:.3f}); there the estimate "
            "is biased upward and its interval can miss the true value"
        )
    if found.unanimous and spec.conventions == "paper":
        notes.append(
            f"{context}: {found.unanimous} occupations have every gendered replicate of one "
            "gender; the variance 4p(1-p)/n counts them as certain, so with few replicates "
            "the intervals are too narrow"
        )
    notes.extend(mass_notes(context, found))
    if found.excluded:
        why = (
            "no listed word among the alternatives"
            if found.source.endswith("logprobs")
            else "no gendered replicate"
        )
        notes.append(
            f"{context}: {len(found.excluded)} occupations left out ({why}): "
            + ", ".join(found.excluded)
        )
    what = "requests" if found.source.endswith("logprobs") else "replicates"
    if found.failed:
        notes.append(f"{context}: {found.failed} {what} failed")
    if found.refused:
        notes.append(f"{context}: {found.refused} {what} refused by the model (left out)")
    return notes


def _next_word_hint(cause: BiasauditError, plan: RutedPlan) -> str | None:
    """What to try when the standard test's requests stopped the run, if they did."""
    nextword = plan.nextword
    echo = plan.continuation_standard and "echo" in str(cause)
    if isinstance(cause, LogprobsUnavailableError) and echo:
        return "rerun with --next-word completions (the top-N reading) or --next-word chat"
    if isinstance(cause, LogprobsUnavailableError):
        return "rerun with --next-word samples to estimate the standard test from sampled words"
    if nextword is not None and nextword.via == "completions" and "404" in str(cause):
        return (
            "the standard test asks the legacy completions endpoint; for a chat-only model "
            "(such as OpenAI's gpt-4o family) rerun with --next-word chat"
        )
    return None
