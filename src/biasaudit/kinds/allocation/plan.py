"""From a task to requests, and from parsed answers back to candidate scores.

A scoring plan asks the probe's questions about a task's candidates, reads
each answer as it arrives (what it read goes into ``responses.jsonl``), and
at the end turns the answers into one score per candidate:

- pointwise: one request per candidate (continuation scoring: one per
  candidate and label), scored sum_y P_n(y) * gamma_y
  (:class:`~biasaudit.probes.PointwiseProbe`);
- pairwise: every ordered pair of every pool, scored by wins within the pool
  (:func:`biasaudit.metrics.pairwise_ranking_scores`): a candidate's score is
  its points per pair, in [0, 1]. A candidate that appears in several pools is
  scored once per appearance.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, Protocol

import pandas as pd

from biasaudit.engine.core import RequestResult
from biasaudit.kinds.allocation.spec import AllocationSpec
from biasaudit.kinds.candidates.task import AllocationTask, Candidate, Pool
from biasaudit.kinds.common import RequestPlan
from biasaudit.metrics import PairwiseOutputStats, pairwise_ranking_scores
from biasaudit.probes import (
    LabelScore,
    PairwiseAnswer,
    PairwiseProbe,
    PointwiseProbe,
    resolve_chat_template,
)
from biasaudit.providers import ModelRequest, Provider
from biasaudit.providers._types import ReasoningEffort

__all__ = [
    "PairwisePlan",
    "PointwisePlan",
    "ScoringPlan",
    "plan_requests",
    "plan_scoring",
    "shown_names",
]


class ScoringPlan(Protocol):
    """What the audit needs from a plan, whichever the method."""

    method: str
    effort: ReasoningEffort | None

    @property
    def requests(self) -> list[ModelRequest]:
        """Every request, made once (what a run sends)."""

    def iter_requests(self) -> Iterator[ModelRequest]:
        """Every request, made as it is read (what a dry run counts)."""

    def annotate(self, result: RequestResult) -> dict[str, Any]:
        """Read one result; return what ``responses.jsonl`` records about it."""

    def scores(self) -> pd.DataFrame:
        """One row per candidate (appearance), once every result is in."""


def _base_row(task: AllocationTask, candidate: Candidate, candidate_id: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "candidate_id": candidate_id,
        "group": candidate.group,
        "qualified": candidate.qualified,
        "subtask": candidate.subtask,
    }
    if candidate.name is not None:
        row["name"] = candidate.name
    row[task.item_column] = candidate.item
    return row


class PointwisePlan(RequestPlan):
    """One question per candidate; see the module docstring."""

    method = "pointwise"

    def __init__(self, task: AllocationTask, probe: PointwiseProbe) -> None:
        self.task, self.probe = task, probe
        # Continuation scoring: which candidate and label each request scores.
        self._labelled: dict[str, tuple[str, str]] = {}
        if probe.path == "continuation":
            self._labelled = {probe.continuation_id(c.id, label): (c.id, label)
                              for c in task.candidates for label in probe.labels}  # fmt: skip
        self._answers: dict[str, LabelScore] = {}
        self._label_logprobs: dict[str, dict[str, float]] = {}
        self._errors: dict[str, str] = {}
        self._refused: set[str] = set()

    def _each_request(self) -> Iterator[ModelRequest]:
        for candidate in self.task.candidates:
            yield from self.probe.requests(
                [(candidate.id, self.task.pointwise_messages(candidate))]
            )

    def annotate(self, result: RequestResult) -> dict[str, Any]:
        if self._labelled:
            return self._annotate_continuation(result)
        request_id = result.request.id
        response = result.response
        if response is None:
            self._errors[request_id] = result.error or "no answer"
            return {"probe": self.method}
        if response.refusal is not None:  # an answer, but outside the label set
            self._refused.add(request_id)
            return {"probe": self.method, "irregular": 1}
        answer = self.probe.parse(response)
        self._answers[request_id] = answer
        return {
            "probe": self.method,
            "scoring_path": answer.path,
            "parsed": answer.answer,
            "label_probabilities": answer.probabilities or None,
            "irregular": answer.irregular,
        }

    def _annotate_continuation(self, result: RequestResult) -> dict[str, Any]:
        """One label of one candidate, scored whole; the candidate's score waits for all."""
        candidate_id, label = self._labelled[result.request.id]
        if result.response is None:
            self._errors.setdefault(candidate_id, result.error or "no answer")
            return {"probe": self.method, "scoring_path": "continuation", "parsed": label}
        prompt = result.request.prompt or ""
        logprob = self.probe.label_logprob(result.response, prompt, label)
        if logprob is None:
            self._errors.setdefault(
                candidate_id,
                f"label {label!r}: the echoed tokens do not end with the label (it shares a "
                "token with the prompt's end, or the endpoint did not echo logprobs)",
            )
        else:
            self._label_logprobs.setdefault(candidate_id, {})[label] = logprob
        return {
            "probe": self.method,
            "scoring_path": "continuation",
            "parsed": label,
            "label_probabilities": None if logprob is None else {label: math.exp(logprob)},
            "irregular": int(logprob is None),
        }

    def scores(self) -> pd.DataFrame:
        if self._labelled:
            for candidate in self.task.candidates:
                found = self._label_logprobs.get(candidate.id, {})
                if len(found) == len(self.task.labels):
                    self._answers[candidate.id] = self.probe.from_continuations(found)
        rows = [self._row(candidate) for candidate in self.task.candidates]
        return pd.DataFrame(rows)

    def _row(self, candidate: Candidate) -> dict[str, Any]:
        row = _base_row(self.task, candidate, candidate.id)
        answer = self._answers.get(candidate.id)
        row |= {
            "score": answer.score if answer else math.nan,
            "path": self.probe.path,
            "answers": answer.n if answer else 0,
            "irregular": bool(answer.irregular) if answer else candidate.id in self._refused,
            "irregular_answers": answer.irregular if answer else int(candidate.id in self._refused),
            "refused": candidate.id in self._refused,
            "label_mass": answer.label_mass if answer else None,
        }
        row["score_se"] = self._standard_error(answer) if answer else None
        for label in self.task.labels:
            row[f"p_{label}"] = answer.probabilities.get(label) if answer else None
        row["error"] = self._errors.get(candidate.id)
        return row

    def _standard_error(self, answer: LabelScore) -> float | None:
        """Sample path: sqrt(Var(gamma) / n), the score's sampling error; 0 from logprobs."""
        if not answer.scored:
            return None
        if answer.path in ("logprobs", "continuation"):
            return 0.0
        labels = self.task.labels
        spread = sum(p * (labels[y] - answer.score) ** 2 for y, p in answer.probabilities.items())
        return math.sqrt(spread / answer.n)


class PairwisePlan(RequestPlan):
    """Every ordered pair of every pool; see the module docstring."""

    method = "pairwise"

    def __init__(self, task: AllocationTask, probe: PairwiseProbe, pools: list[Pool]) -> None:
        self.task, self.probe, self.pools = task, probe, pools
        self._pairs: dict[str, tuple[Pool, int, int]] = {}
        for pool in pools:
            for i in range(len(pool.members)):
                for j in range(len(pool.members)):
                    if i != j:
                        self._pairs[f"{pool.id}:{i + 1}>{j + 1}"] = (pool, i, j)
        self._answers: dict[str, PairwiseAnswer] = {}
        self._refused: set[str] = set()
        self._output_stats: PairwiseOutputStats | None = None

    def _each_request(self) -> Iterator[ModelRequest]:
        for request_id, (pool, i, j) in self._pairs.items():
            messages = self.task.pairwise_messages(pool.members[i], pool.members[j])
            yield self.probe.request(request_id, messages)

    def annotate(self, result: RequestResult) -> dict[str, Any]:
        pool, i, j = self._pairs[result.request.id]
        answer = PairwiseAnswer(None)
        if result.response is not None and result.response.refusal is not None:
            self._refused.add(result.request.id)
        elif result.ok and result.response is not None:
            first, second = pool.members[i], pool.members[j]
            answer = self.probe.parse(
                result.response.text, first_name=first.name, second_name=second.name
            )
        self._answers[result.request.id] = answer
        return {"probe": self.method, "parsed": answer.choice}

    def comparisons(self) -> pd.DataFrame:
        """One row per prompt: pool, the appearance ids shown first and second, the answer."""
        rows = []
        for request_id, (pool, i, j) in self._pairs.items():
            answer = self._answers.get(request_id, PairwiseAnswer(None))
            rows.append(
                {
                    "pool": pool.id,
                    "subtask": pool.subtask,
                    "first": _appearance(pool, i),
                    "second": _appearance(pool, j),
                    "choice": answer.choice,
                    "parsed_as": answer.parsed_as,
                    "refused": request_id in self._refused,
                }
            )
        return pd.DataFrame(rows)

    @property
    def output_stats(self) -> PairwiseOutputStats:
        """Parse, tie and order-consistency statistics over all prompts."""
        if self._output_stats is None:
            self.scores()
        assert self._output_stats is not None
        return self._output_stats

    def scores(self) -> pd.DataFrame:
        comparisons = self.comparisons()
        ranked = pairwise_ranking_scores(
            comparisons["first"], comparisons["second"], comparisons["choice"]
        )
        self._output_stats = ranked.stats
        unparsed = pd.concat(
            [comparisons.loc[comparisons["choice"].isna(), side] for side in ("first", "second")]
        ).value_counts()
        rows = []
        for pool in self.pools:
            for i, candidate in enumerate(pool.members):
                appearance = _appearance(pool, i)
                row = _base_row(self.task, candidate, appearance)
                row |= {
                    "pool": pool.id,
                    "score": float(ranked.win_rate[appearance]),
                    "points": float(ranked.points[appearance]),
                    "pairs": int(ranked.pairs[appearance]),
                    "path": "pairwise",
                    "irregular": bool(unparsed.get(appearance, 0)),
                    "irregular_answers": int(unparsed.get(appearance, 0)),
                }
                rows.append(row)
        return pd.DataFrame(rows)


def _appearance(pool: Pool, index: int) -> str:
    return f"{pool.id}/{index + 1}"


def plan_scoring(task: AllocationTask, spec: AllocationSpec, provider: Provider) -> ScoringPlan:
    """The plan for ``spec.method``, with the probe chosen for the provider's endpoint.

    Raises
    ------
    UsageError
        Continuation scoring without a chat template that can be read or rendered.
    """
    plan: ScoringPlan
    if spec.method == "pairwise":
        pools = task.pairwise_pools(spec.pools, seed=spec.seed,
                                    nested=spec.pools_drawn == "nested")  # fmt: skip
        plan = PairwisePlan(task, PairwiseProbe(noun=task.noun), pools)
    else:
        template = None
        if spec.scoring == "continuation":
            own = provider.chat_template() if spec.chat_template in (None, "model") else None
            template = resolve_chat_template(spec.chat_template, own)
        probe = PointwiseProbe.for_endpoint(
            task.labels,
            provider.capabilities,
            scoring=spec.scoring,
            samples=spec.samples,
            temperature=spec.temperature,
            top_logprobs=spec.top_logprobs,
            template=template,
        )
        plan = PointwisePlan(task, probe)
    plan.effort = spec.reasoning_effort
    return plan


def plan_requests(spec: Any, provider: Provider) -> Iterator[ModelRequest]:
    """The requests a run of ``spec`` would send to ``provider``, made as they are read
    (nothing is sent)."""
    from biasaudit.kinds.candidates.tasks import build_task

    assert isinstance(spec, AllocationSpec)
    task = build_task(spec)
    task.prompt(spec.method)
    return plan_scoring(task, spec, provider).iter_requests()


def shown_names(spec: Any) -> tuple[str, ...]:
    """The candidates' names an audit of ``spec`` shows the model."""
    from biasaudit.kinds.candidates.tasks import build_task

    return tuple(dict.fromkeys(c.name for c in build_task(spec).candidates if c.name))
