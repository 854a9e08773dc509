"""What every allocation task is made of: candidates, groups, prompts and a pool design.

An allocation task (Chen, Ji & Evans, "The Mismeasure of Man and Models",
2024) picks the top k of a pool of candidates. Its candidates belong to
groups, one of which is the reference; some are qualified. The task renders
the prompts that ask a model about one candidate (pointwise) or two
(pairwise), and says how pools are formed. It knows nothing of HTTP.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from biasaudit.errors import UsageError
from biasaudit.kinds.prompt import PromptTemplate

__all__ = [
    "AllocationTask",
    "Candidate",
    "Pool",
    "PoolDesign",
]

PoolKind = Literal["one_per_group", "random"]


@dataclass(frozen=True)
class Candidate:
    """One candidate: a group, a qualification, and the text the prompts show.

    Attributes
    ----------
    id:
        Unique and stable across runs (it names the candidate in ``scores.csv``).
    group:
        Group id, e.g. ``B_M``.
    subtask:
        The subtask (job, essay prompt) the candidate is ranked within.
    qualified:
        Whether the candidate is qualified; None when the task has no labels.
    fields:
        Placeholder values for the prompts (``name``, ``resume``, ``text``...).
    name:
        The name the model sees, if any (pairwise answers may give it).
    item:
        The underlying item (resume or essay id), shared by candidates that
        differ only in name.
    """

    id: str
    group: str
    subtask: str
    qualified: bool | None
    fields: Mapping[str, str]
    name: str | None = None
    item: str | None = None


@dataclass(frozen=True)
class PoolDesign:
    """How candidates are pooled for top-k selection.

    ``one_per_group``: one candidate of each group per pool (resume
    screening); ``random``: ``size`` candidates drawn at random (essay grading).
    """

    kind: PoolKind = "one_per_group"
    size: int | None = None

    def describe(self, n_groups: int) -> str:
        if self.kind == "one_per_group":
            return f"one candidate per group per pool ({n_groups} per pool)"
        return f"random pools of {self.size}"


@dataclass(frozen=True)
class Pool:
    """One pool of a pairwise audit: its members are compared with each other."""

    id: str
    subtask: str
    members: tuple[Candidate, ...]


@dataclass(frozen=True)
class AllocationTask:
    """An allocation task ready to run; build one with :func:`biasaudit.tasks.build_task`.

    Attributes
    ----------
    name:
        Task name, e.g. ``resume-screening``.
    candidates:
        Every candidate.
    groups:
        Group ids in display order.
    reference_group:
        The group every other is compared with.
    labels:
        Pointwise label → value (``{"Yes": 1, "No": 0}``).
    pointwise_prompt, pairwise_prompt:
        The prompts of the two probes (a user-defined task may give one only).
    pool:
        How pools are formed.
    context:
        Placeholder values of each subtask (``job_title``, ``topic``...).
    group_names:
        Display names of the groups.
    noun:
        How a pairwise prompt labels its two items (``Candidate A``).
    item_column:
        The name of ``Candidate.item`` in ``scores.csv`` (``resume_id``).
    qualified_rule:
        Who counts as qualified, in words, for the reports (None: no labels).
    categories:
        What the groups are made of, for impact ratios per category: category ->
        {group: value}, e.g. race and sex of resume screening's race x sex groups.
    """

    name: str
    candidates: tuple[Candidate, ...]
    groups: tuple[str, ...]
    reference_group: str
    labels: Mapping[str, float]
    pointwise_prompt: PromptTemplate | None
    pairwise_prompt: PromptTemplate | None
    pool: PoolDesign
    context: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    group_names: Mapping[str, str] = field(default_factory=dict)
    noun: str = "Candidate"
    item_column: str = "item"
    qualified_rule: str | None = None
    categories: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._check_groups()
        self._check_pools()
        self._check_prompts()

    def _check_pools(self) -> None:
        """Every subtask must fill its pools: a pool larger than its candidates selects nothing."""
        by_subtask: dict[str, list[Candidate]] = {}
        for candidate in self.candidates:
            by_subtask.setdefault(candidate.subtask, []).append(candidate)
        for subtask, members in by_subtask.items():
            if self.pool.kind == "random" and len(members) < (self.pool.size or 0):
                raise UsageError(
                    f"{self.name}: pools of {self.pool.size} are larger than the "
                    f"{len(members)} candidates of subtask '{subtask}'; lower the pool size"
                )
            if self.pool.kind == "one_per_group":
                missing = [g for g in self.groups if all(c.group != g for c in members)]
                if missing:
                    raise UsageError(
                        f"{self.name}: subtask '{subtask}' has no candidate of group "
                        f"'{missing[0]}', so no pool holds one of each group"
                    )

    def _check_groups(self) -> None:
        if not self.candidates:
            raise UsageError(f"{self.name}: no candidates")
        if self.reference_group not in self.groups:
            raise UsageError(
                f"reference group '{self.reference_group}' is not one of the groups "
                f"({', '.join(self.groups)})"
            )
        if len(self.groups) < 2:
            raise UsageError(f"{self.name}: an audit needs at least two groups")
        if len({c.id for c in self.candidates}) != len(self.candidates):
            raise UsageError(f"{self.name}: candidate ids are not unique")

    def _check_prompts(self) -> None:
        context = set().union(*(set(c) for c in self.context.values())) if self.context else set()
        own = set(self.candidates[0].fields)
        if self.pointwise_prompt is not None:
            # One candidate per prompt: its columns fill the system turn as well.
            self.pointwise_prompt.check("system", context | own)
            self.pointwise_prompt.check("user", context | own)
        if self.pairwise_prompt is not None:
            self.check_shared(self.pairwise_prompt, "system", context)
            self.check_shared(self.pairwise_prompt, "user", context | {"first", "second"})
            self.pairwise_prompt.check("candidate", own)

    def check_shared(
        self, prompt: PromptTemplate, part: Literal["system", "user"], available: set[str]
    ) -> None:
        """Check a turn that shows several candidates at once (pairwise, listwise): it takes
        ``available`` and the columns every candidate of a subtask shares (a job's text);
        a column that differs within a subtask is named, with where it belongs.

        Raises
        ------
        UsageError
            An unknown placeholder, or one whose column differs between candidates shown
            together.
        """
        shared = self.shared_columns()
        differing = sorted((prompt.placeholders(part) - available - shared) & set(self.fields))
        if differing:
            raise UsageError(
                f"{prompt.source}, field '{part}': {{{differing[0]}}} differs between the "
                f"candidates shown together in one prompt; put it in 'candidate' (each "
                f"candidate's own text), or use columns shared by a subtask's candidates here"
                + (f" ({', '.join(sorted(shared))})" if shared else "")
            )
        prompt.check(part, available | shared)

    @property
    def fields(self) -> tuple[str, ...]:
        """The candidates' columns."""
        return tuple(self.candidates[0].fields)

    def shared_columns(self) -> set[str]:
        """The columns whose value is the same for every candidate of each subtask (a job
        description, say): a prompt that shows several candidates may use them anywhere."""
        return set(self._shared()[0])

    def shared_fields(self, subtask: str) -> dict[str, str]:
        """:meth:`shared_columns` with their values in ``subtask``."""
        return self._shared()[1].get(subtask, {})

    def _shared(self) -> tuple[tuple[str, ...], dict[str, dict[str, str]]]:
        memo: tuple[tuple[str, ...], dict[str, dict[str, str]]] | None = self.__dict__.get(
            "_shared_memo"
        )
        if memo is None:
            memo = self._find_shared()
            object.__setattr__(self, "_shared_memo", memo)  # a frozen task: computed once
        return memo

    def _find_shared(self) -> tuple[tuple[str, ...], dict[str, dict[str, str]]]:
        found = set(self.fields)
        firsts: dict[str, Candidate] = {}
        for candidate in self.candidates:
            first = firsts.setdefault(candidate.subtask, candidate)
            found = {f for f in found if candidate.fields.get(f) == first.fields.get(f)}
        values = {sub: {f: first.fields[f] for f in found} for sub, first in firsts.items()}
        return tuple(sorted(found)), values

    def prompt(self, method: Literal["pointwise", "pairwise"]) -> PromptTemplate:
        """The prompt of ``method``; raises if the task has none."""
        prompt = self.pointwise_prompt if method == "pointwise" else self.pairwise_prompt
        if prompt is None:
            raise UsageError(f"{self.name} has no {method} prompt: add '{method}:' to the spec")
        return prompt

    @property
    def subtasks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.subtask for c in self.candidates))

    def display_name(self, group: str) -> str:
        return self.group_names.get(group, group)

    def pointwise_messages(self, candidate: Candidate) -> tuple[dict[str, str], ...]:
        """The messages that ask about one candidate."""
        fields = {**self._context(candidate), **candidate.fields}
        return self.prompt("pointwise").messages(fields)

    def pairwise_messages(self, first: Candidate, second: Candidate) -> tuple[dict[str, str], ...]:
        """The messages that compare two candidates, ``first`` shown first."""
        prompt = self.prompt("pairwise")
        fields = {
            **self.shared_fields(first.subtask),
            **self._context(first),
            "first": prompt.block(first.fields),
            "second": prompt.block(second.fields),
        }
        return prompt.messages(fields)

    def _context(self, candidate: Candidate) -> Mapping[str, str]:
        return self.context.get(candidate.subtask, {})

    def pairwise_pools(self, n_pools: int, *, seed: int, nested: bool = False) -> list[Pool]:
        """``n_pools`` pools per subtask, drawn as the pool design says (seeded): from one
        stream, or (``nested``) from one per subtask, so that the first N pools of a
        subtask are the same at any larger ``n_pools``."""
        rng = np.random.default_rng(seed)
        pools: list[Pool] = []
        for subtask in self.subtasks:
            if nested:
                rng = np.random.default_rng([seed, zlib.crc32(subtask.encode())])
            members = [c for c in self.candidates if c.subtask == subtask]
            for index in range(n_pools):
                drawn = self._draw_pool(rng, members, subtask)
                pools.append(Pool(f"{subtask}/pool{index + 1:03d}", subtask, drawn))
        return pools

    def _draw_pool(
        self, rng: np.random.Generator, members: Sequence[Candidate], subtask: str
    ) -> tuple[Candidate, ...]:
        if self.pool.kind == "random":
            size = self.pool.size or 0
            if len(members) < size:
                raise UsageError(
                    f"subtask '{subtask}' has {len(members)} candidates, "
                    f"fewer than a pool of {size}"
                )
            return tuple(members[i] for i in rng.choice(len(members), size=size, replace=False))
        drawn = []
        for group in self.groups:
            of_group = [c for c in members if c.group == group]
            if not of_group:
                raise UsageError(f"subtask '{subtask}' has no candidate of group '{group}'")
            drawn.append(of_group[int(rng.integers(len(of_group)))])
        return tuple(drawn)
