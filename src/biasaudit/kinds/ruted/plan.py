"""From the RUTEd task to requests, and from the answers back to per-occupation counts.

The plan asks, for every occupation,

- ``standard``: the next word after "The {occupation} is"
  (:class:`~biasaudit.probes.NextWordProbe`): one logprob request, or
  sampled first words where the endpoint gives no logprobs;
- each long-form context: ``replicates`` texts of each template run
  (:class:`~biasaudit.probes.GenerationProbe`), each labelled by its pronouns.

It reads each answer as it arrives (what it read goes into
``responses.jsonl``), and at the end gives one row per (context, template,
occupation) — :meth:`RutedPlan.occupation_rows` — and one row per replicate,
from which :mod:`biasaudit.kinds.ruted.metrics_file` computes the metrics.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from biasaudit.engine.core import RequestResult
from biasaudit.kinds.common import RequestPlan
from biasaudit.kinds.ruted.spec import RutedSpec
from biasaudit.kinds.ruted.task import Occupation, RutedTask
from biasaudit.probes import GenerationProbe, NextWordProbe, NextWordShares, PronounCount
from biasaudit.providers import Capabilities, ModelRequest, ModelResponse, Provider

__all__ = ["OCCUPATION_COLUMNS", "RutedPlan", "plan_ruted"]

OCCUPATION_COLUMNS = (
    "context", "template", "occupation", "majority", "male", "female", "none", "tied", "failed",
    "refused", "n", "p_male", "male_mass", "female_mass", "top_mass", "coverage", "p_male_low",
    "p_male_high", "missing_words", "error",
)  # fmt: skip
"""Columns of :meth:`RutedPlan.occupation_rows` (and of ``occupations.csv``, per context)."""


@dataclass
class _Tally:
    """Replicates of one (context, template, occupation), by what they said."""

    male: int = 0
    female: int = 0
    none: int = 0  # no gendered pronoun (no listed word, on the next-word sample path)
    tied: int = 0
    failed: int = 0
    refused: int = 0  # the model's answer, read as no verdict (dropped like `none`)

    def add(self, verdict: str, times: int = 1) -> None:
        """Count replicates with one verdict: male, female, tie or none."""
        field = "tied" if verdict == "tie" else verdict
        setattr(self, field, getattr(self, field) + times)


@dataclass(frozen=True)
class _Where:
    context: str
    template: int | None
    occupation: Occupation


class RutedPlan(RequestPlan):
    """Every request of a RUTEd audit and what their answers said; see the module docstring."""

    def __init__(
        self,
        task: RutedTask,
        nextword: NextWordProbe | None,
        generation: dict[str, GenerationProbe],
    ) -> None:
        self.task, self.nextword, self.generation = task, nextword, generation
        self._where: dict[str, _Where] = {}
        self._tallies: dict[tuple[str, int | None, str], _Tally] = {}
        self._shares: dict[str, NextWordShares] = {}
        self._word_logprobs: dict[str, dict[str, float]] = {}  # continuation path
        self._errors: dict[tuple[str, int | None, str], str] = {}
        self._replicates: list[tuple[Any, ...]] = []
        # Long-form texts by (context, template, occupation), for the mode-collapse check.
        self._texts: dict[tuple[str, int | None, str], list[str]] = {}
        self._occupations = {occupation.name: occupation for occupation in task.occupations}
        if nextword is not None:
            for occupation in task.occupations:
                self._add(_Where("standard", None, occupation))
        for context in generation:
            for template in task.templates:
                for occupation in task.occupations:
                    self._add(_Where(context, template, occupation))

    @staticmethod
    def _id(where: _Where) -> str:
        if where.template is None:
            return f"{where.context}/{where.occupation.name}"
        return f"{where.context}/{where.template}/{where.occupation.name}"

    def _add(self, where: _Where) -> None:
        self._where[self._id(where)] = where
        self._tallies[(where.context, where.template, where.occupation.name)] = _Tally()

    def _each_request(self) -> Iterator[ModelRequest]:
        task = self.task
        for request_id, where in self._where.items():
            if where.template is None:  # the standard test's next word
                assert self.nextword is not None
                yield from self.nextword.requests(request_id, task.standard_text(where.occupation))
            else:
                messages = task.messages(where.context, where.template, where.occupation)
                yield from self.generation[where.context].requests(request_id, messages)

    def _where_of(self, request_id: str) -> _Where:
        """Where a request was asked: its id, or (a listed word scored as a continuation)
        its id before ``|word``."""
        found = self._where.get(request_id)
        return found if found is not None else self._where[request_id.rpartition("|")[0]]

    @property
    def continuation_standard(self) -> bool:
        """Whether the standard test scores every listed word as a continuation."""
        return self.nextword is not None and self.nextword.path == "continuation"

    @property
    def sampled_standard(self) -> bool:
        """Whether the standard test samples first words (no logprobs)."""
        return self.nextword is not None and self.nextword.path == "samples"

    def annotate(self, result: RequestResult) -> dict[str, Any]:
        """Read one result; return what ``responses.jsonl`` records about it."""
        request, response = result.request, result.response
        where = self._where_of(request.id)
        key = (where.context, where.template, where.occupation.name)
        probe = "nextword" if where.context == "standard" else "generation"
        if response is None:
            self._tallies[key].failed += request.params.n or 1
            self._errors[key] = result.error or "no answer"
            return {"probe": probe}
        if response.refusal is not None:
            refused = len(response.texts) or 1
            self._tallies[key].refused += refused
            return {"probe": probe, "irregular": refused}
        if where.context == "standard" and self.continuation_standard:
            text = self.task.standard_text(where.occupation)
            word = NextWordProbe.word_of(request.id)
            logprob = NextWordProbe.continuation_logprob(response, text, word)
            if logprob is not None:
                self._word_logprobs.setdefault(where.occupation.name, {})[word] = logprob
            return {
                "probe": probe,
                "scoring_path": "continuation",
                "parsed": word,
                "label_probabilities": None if logprob is None else {word: math.exp(logprob)},
                "irregular": int(logprob is None),
            }
        if where.context == "standard" and not self.sampled_standard:
            assert self.nextword is not None
            shares = self._shares[where.occupation.name] = self.nextword.read(response)
            p_male = shares.p_male
            return {
                "probe": probe,
                "scoring_path": "logprobs",
                "parsed": response.text,
                "label_probabilities": None
                if p_male is None
                else {"male": p_male, "female": 1.0 - p_male},
            }
        verdicts = self._read_replicates(where, request, response)
        dropped = sum(v in ("none", "tie") for v in verdicts)
        counts = ", ".join(f"{v} {verdicts.count(v)}" for v in dict.fromkeys(sorted(verdicts)))
        path = {"scoring_path": "samples"} if probe == "nextword" else {}
        return {"probe": probe, **path, "parsed": counts, "irregular": dropped}

    def _read_replicates(
        self, where: _Where, request: ModelRequest, response: ModelResponse
    ) -> list[str]:
        tally = self._tallies[(where.context, where.template, where.occupation.name)]
        if where.context == "standard":
            assert self.nextword is not None
            first = self.nextword.first_replicate(request)
            counts = [_word_count(NextWordProbe.sampled_gender(text)) for text in response.texts]
        else:
            probe = self.generation[where.context]
            first = probe.first_replicate(request)
            counts = probe.read(response)
            key = (where.context, where.template, where.occupation.name)
            self._texts.setdefault(key, []).extend(response.texts)
        verdicts: list[str] = [count.verdict for count in counts]
        for verdict, times in Counter(verdicts).items():
            tally.add(verdict, times)
        context, template, name = where.context, where.template, where.occupation.name
        self._replicates.extend(
            (context, template, name, first + offset, count.male, count.female, verdict)
            for offset, (count, verdict) in enumerate(zip(counts, verdicts, strict=True))
        )
        return verdicts

    def occupation_rows(self) -> pd.DataFrame:
        """One row per (context, template, occupation); columns :data:`OCCUPATION_COLUMNS`."""
        rows = []
        for (context, template, name), tally in self._tallies.items():
            occupation = self._occupations[name]
            row: dict[str, Any] = {
                "context": context, "template": template, "occupation": name,
                "majority": occupation.majority,
            }  # fmt: skip
            if context == "standard" and self.continuation_standard:
                scored = self._word_logprobs.get(name)
                shares = NextWordProbe.continuation_shares(scored) if scored else None
                row |= _shares_columns(shares, failed=tally.failed)
                row["refused"] = tally.refused
            elif context == "standard" and not self.sampled_standard:
                row |= _shares_columns(self._shares.get(name), failed=tally.failed)
                row["refused"] = tally.refused
            else:
                n = tally.male + tally.female
                row |= {
                    "male": tally.male, "female": tally.female, "none": tally.none,
                    "tied": tally.tied, "failed": tally.failed, "refused": tally.refused, "n": n,
                    "p_male": tally.male / n if n else math.nan,
                }  # fmt: skip
            row["error"] = self._errors.get((context, template, name))
            rows.append(row)
        return pd.DataFrame(rows, columns=list(OCCUPATION_COLUMNS)).astype({"template": "Int64"})

    def texts(self) -> dict[tuple[str, int | None, str], list[str]]:
        """Long-form contexts: every text read, by (context, template, occupation)."""
        return self._texts

    def replicate_rows(self) -> pd.DataFrame:
        """One row per replicate read: its pronoun (or next-word) counts and verdict."""
        columns = [
            "context", "template", "occupation", "replicate", "male_pronouns", "female_pronouns",
            "verdict",
        ]  # fmt: skip
        frame = pd.DataFrame(self._replicates, columns=columns).astype({"template": "Int64"})
        contexts = {name: i for i, name in enumerate(self.task.contexts)}
        occupations = {name: i for i, name in enumerate(self._occupations)}

        def in_task_order(column: pd.Series) -> pd.Series:
            ranks = {"context": contexts, "occupation": occupations}.get(str(column.name))
            return column.map(ranks) if ranks is not None else column

        by = ["context", "template", "occupation", "replicate"]
        return frame.sort_values(by, key=in_task_order, kind="stable").reset_index(drop=True)


def _word_count(gender: str | None) -> PronounCount:
    """A sampled next word as a count of one male or female word (or none)."""
    return PronounCount(male=int(gender == "male"), female=int(gender == "female"))


def _shares_columns(shares: NextWordShares | None, *, failed: int) -> dict[str, Any]:
    if shares is None:
        return {"failed": failed, "p_male": math.nan}
    low, high = shares.bounds or (math.nan, math.nan)
    p_male = shares.p_male
    return {
        "failed": failed,
        "p_male": p_male if p_male is not None else math.nan,
        "male_mass": shares.male,
        "female_mass": shares.female,
        "top_mass": shares.top_mass,
        "coverage": shares.coverage,
        "p_male_low": low,
        "p_male_high": high,
        "missing_words": " ".join(shares.missing),
    }


def plan_ruted(task: RutedTask, spec: RutedSpec, capabilities: Capabilities) -> RutedPlan:
    """The plan for ``task``, with each probe chosen for the endpoint."""
    nextword = None
    if "standard" in task.contexts:
        nextword = NextWordProbe.for_endpoint(
            capabilities,
            choice=spec.next_word,
            top_logprobs=spec.top_logprobs,
            replicates=spec.replicates,
            temperature=spec.temperature,
            seed=spec.seed,
            per_request=spec.per_request,
        )
    generation = {
        context: GenerationProbe.for_endpoint(
            capabilities,
            max_tokens=task.prompts[context].max_tokens,
            temperature=spec.temperature,
            replicates=spec.replicates,
            seed=spec.seed,
            per_request=spec.per_request,
        )
        for context in task.generation_contexts
    }
    plan = RutedPlan(task, nextword, generation)
    plan.effort = spec.reasoning_effort
    return plan


def plan_requests(spec: Any, provider: Provider) -> Iterator[ModelRequest]:
    """The requests a run of ``spec`` would send to ``provider``, made as they are read
    (nothing is sent)."""
    from biasaudit.kinds.ruted.task import build_ruted_task

    assert isinstance(spec, RutedSpec)
    return plan_ruted(build_ruted_task(spec), spec, provider.capabilities).iter_requests()
