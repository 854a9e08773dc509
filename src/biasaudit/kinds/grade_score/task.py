"""The Grade Score task: items, judge prompts, and the plan that asks about them.

Iourovitski, "Grade Score: Quantifying LLM Performance in Option Selection"
(2024): an LLM judge picks the best of an item's options, which are shown to
it in every cyclic order (or every order); a judge that chooses by content
picks the same option wherever it stands, one that chooses by position does
not.

**Items** are lines of a JSONL file::

    {"id": "q1", "prompt": "What is the capital of Australia?",
     "options": ["Sydney.", "Canberra.", "Melbourne."], "preferred": 1}

``id`` (text or number, unique), ``prompt`` (the request the options answer)
and ``options`` (two or more texts; every item the same number, so that the
slots can be compared) are required. ``preferred`` is the index into
``options`` (from 0) of the option people prefer; ``ranks`` instead ranks
every option (1 = best, ties allowed), and the preferred option is the one
ranked 1 when only one is. Other fields are ignored, except ones that look
like a misspelling of these. ``--items demo`` runs the 16 shipped items.

**Judge prompts** are YAML files like the allocation prompts (``system``,
``user``, ``candidate``) plus ``max_tokens``, the longest answer the prompt
needs. ``candidate`` shows one option (``{number}``, ``{text}``); the user
message holds ``{prompt}``, ``{options}`` (every option so rendered, in the
order of the request, separated by blank lines) and ``{n_options}``; the
system message may hold ``{n_options}``. Four ship with biasaudit:
``grade-score.1.yaml`` .. ``grade-score.4.yaml`` (see :data:`JUDGE_PROMPTS`).

**The random option** (``random_option``): each item gets one more option,
an option of another item drawn with the seed (the paper's unrelated-output
sampling). It is the last option of the item (index n), named in
``GradeItem.random_source``.

**The plan** asks every order of every item (request id ``<item>#<k>``,
order k from 1, replicates by replicate index), reads each answer as it
arrives, and gives one row per trial (:meth:`GradeScorePlan.trials`):
``item_id, order, replicate, shown`` (the option indices slot by slot),
``slot`` (chosen, from 1 as the judge saw it), ``option`` (the original index
it maps to), ``random`` (the unrelated option was chosen), ``parsed_as``,
``answer`` and ``error``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

from biasaudit.engine.core import RequestResult
from biasaudit.errors import InputError, UsageError
from biasaudit.kinds.common import RequestPlan, TaskInfo
from biasaudit.kinds.grade_score.spec import GRADE_SCORE_PROMPTS, GradeScoreSpec
from biasaudit.kinds.prompt import PromptTemplate
from biasaudit.probes import ChoiceAnswer, ChoiceProbe
from biasaudit.providers import ModelRequest
from biasaudit.textfiles import (
    DATA_DIR,
    PROMPTS_DIR,
    brief,
    json_object,
    label_problem,
    load_yaml,
    text_lines,
)

__all__ = [
    "DEMO_ITEMS",
    "JUDGE_PROMPTS",
    "ChoicePrompt",
    "GradeItem",
    "GradeScorePlan",
    "GradeScoreTask",
    "build_grade_score_task",
    "drawn_items",
    "load_choice_prompt",
    "plan_grade_score",
    "read_items",
    "resolve_items",
    "with_random_options",
]

DEMO_ITEMS = DATA_DIR / "grade_items_demo.jsonl"
JUDGE_PROMPTS = dict(
    zip(
        GRADE_SCORE_PROMPTS,
        (
            "select, then explain",
            "evaluate each option, then select",
            "select, told to ignore the order",
            "grade each option 0-5, then select",
        ),
        strict=True,
    )
)
_ITEM_FIELDS = ("id", "prompt", "options", "preferred", "ranks")
_PROMPT_EXTRA = "max_tokens"


@dataclass(frozen=True)
class GradeItem:
    """One item: a request and the options a judge chooses among.

    Attributes
    ----------
    id:
        Unique and stable across runs.
    prompt:
        The request the options answer.
    options:
        The options in their original order; indices into this tuple name
        them everywhere (``preferred``, ``option`` in ``trials.csv``).
    preferred:
        Index of the option people prefer, if known.
    ranks:
        People's rank of every option (1 = best), if given.
    random_source:
        The item the last option was drawn from, when a random option was added.
    """

    id: str
    prompt: str
    options: tuple[str, ...]
    preferred: int | None = None
    ranks: tuple[int, ...] | None = None
    random_source: str | None = None

    @property
    def n_options(self) -> int:
        return len(self.options)

    @property
    def random_index(self) -> int | None:
        """Index of the added unrelated option, or None."""
        return None if self.random_source is None else self.n_options - 1


class _ItemLine(BaseModel):
    """One line of an items file, as validated."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str
    prompt: str = Field(min_length=1)
    options: list[str] = Field(min_length=2)
    preferred: StrictInt | None = None
    ranks: list[StrictInt] | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("options")
    @classmethod
    def _no_empty_option(cls, value: list[str]) -> list[str]:
        for index, option in enumerate(value):
            if not option.strip():
                raise ValueError(f"option {index} is empty")
        return value

    def item(self) -> GradeItem:
        n = len(self.options)
        if self.preferred is not None and not 0 <= self.preferred < n:
            raise ValueError(f"preferred: must be an index into options, 0 to {n - 1}")
        if self.ranks is not None and (len(self.ranks) != n or min(self.ranks) < 1):
            raise ValueError(f"ranks: must give each of the {n} options a rank from 1")
        if (
            self.ranks
            and self.preferred is not None
            and self.ranks[self.preferred] != min(self.ranks)
        ):
            raise ValueError("preferred: is not an option that ranks puts first")
        return GradeItem(
            id=self.id.strip(),
            prompt=self.prompt.strip(),
            options=tuple(option.strip() for option in self.options),
            preferred=self.preferred if self.preferred is not None else _best(self.ranks),
            ranks=tuple(self.ranks) if self.ranks is not None else None,
        )


def _best(ranks: Sequence[int] | None) -> int | None:
    if ranks is None or list(ranks).count(min(ranks)) > 1:
        return None
    return list(ranks).index(min(ranks))


def resolve_items(path: Path) -> Path:
    """``demo`` names the shipped demo items, unless a file of that name exists."""
    return DEMO_ITEMS if str(path) == "demo" and not path.exists() else path


def read_items(path: str | Path) -> tuple[GradeItem, ...]:
    """Read an items JSONL file, naming the line and field of the first problem.

    Raises
    ------
    UsageError
        The file cannot be read or holds no items; items have different
        numbers of options.
    InputError
        A line is not a JSON object, misses a field or has a bad one, a
        field name looks misspelt, ``preferred`` and ``ranks`` disagree, or
        an id repeats.
    """
    name = str(path)
    items: list[GradeItem] = []
    seen: dict[str, int] = {}
    for number, line in text_lines(path, "items"):
        if not line.strip():
            continue
        item = _parse_item(name, number, line)
        problem = label_problem(item.id)
        if problem:
            raise InputError(name, number, "id", problem)
        if item.id in seen:
            raise InputError(
                name, number, "id", f"{brief(item.id)} already appears on line {seen[item.id]}"
            )
        seen[item.id] = number
        if items and item.n_options != items[0].n_options:
            raise InputError(
                name, number, "options",
                f"{item.n_options} options, but the first item has {items[0].n_options}: every "
                "item needs the same number, so that the slots can be compared",
            )  # fmt: skip
        items.append(item)
    if not items:
        raise UsageError(f"items {name} holds no items")
    return tuple(items)


def _parse_item(name: str, number: int, line: str) -> GradeItem:
    data = json_object(name, number, line)
    for key in data:
        close = difflib.get_close_matches(key, _ITEM_FIELDS, n=1, cutoff=0.75)
        if key not in _ITEM_FIELDS and close:
            raise InputError(name, number, key, f"unknown field; did you mean '{close[0]}'?")
    try:
        parsed = _ItemLine.model_validate(data)
        item = parsed.item()
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or None
        problem = "required" if first["type"] == "missing" else str(first["msg"])
        raise InputError(name, number, where, problem.removeprefix("Value error, ")) from None
    except ValueError as error:
        field, _, problem = str(error).partition(": ")
        raise InputError(name, number, field, problem) from None
    return item


def drawn_items(items: Sequence[GradeItem], limit: int, *, seed: int) -> tuple[GradeItem, ...]:
    """``limit`` of ``items``, in the file's order, drawn at random with ``seed``: the
    first ``limit`` of one seeded shuffle, so that a larger limit keeps every item a
    smaller one drew (the rounds of ``--until``). Random options are drawn before, from
    every item, so that an item's options do not depend on the limit."""
    order = np.random.default_rng([seed, 22]).permutation(len(items))
    return tuple(items[i] for i in sorted(order[:limit]))


def with_random_options(items: Sequence[GradeItem], *, seed: int) -> tuple[GradeItem, ...]:
    """Each item with one more option: an option of another item, drawn with ``seed``.

    Raises
    ------
    UsageError
        Fewer than two items (there is no other item to draw from).
    """
    if len(items) < 2:
        raise UsageError("--random-option draws from other items: give at least two items")
    rng = np.random.default_rng(seed)
    found = []
    for index, item in enumerate(items):
        other = int(rng.integers(len(items) - 1))
        source = items[other + (other >= index)]
        option = source.options[int(rng.integers(source.n_options))]
        ranks = None if item.ranks is None else (*item.ranks, max(item.ranks) + 1)
        found.append(
            replace(item, options=(*item.options, option), ranks=ranks, random_source=source.id)
        )
    return tuple(found)


@dataclass(frozen=True)
class ChoicePrompt:
    """A judge prompt: the template, the answer length it needs, and what it is."""

    name: str
    template: PromptTemplate
    max_tokens: int
    description: str


def load_choice_prompt(choice: str | Path) -> ChoicePrompt:
    """The shipped prompt ``"1"`` .. ``"4"``, or a prompt file of the same shape.

    Raises
    ------
    UsageError
        The file cannot be read, lacks a field, has an unknown one or a
        placeholder the task cannot fill.
    """
    key = str(choice)
    path = PROMPTS_DIR / f"grade-score.{key}.yaml" if key in JUDGE_PROMPTS else Path(key)
    if not path.is_file():
        known = ", ".join(JUDGE_PROMPTS)
        raise UsageError(
            f"cannot read prompt {path}: No such file or directory "
            f"(the shipped prompts are {known})"
        )
    data = load_yaml(path, "prompt")
    if not isinstance(data, Mapping):
        raise UsageError(f"{path}: a prompt needs the fields 'system', 'user' and 'candidate'")
    max_tokens = data.get(_PROMPT_EXTRA, 400)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise UsageError(f"{path}, field 'max_tokens': must be a whole number of tokens, >= 1")
    fields = {k: v for k, v in data.items() if k != _PROMPT_EXTRA}
    template = PromptTemplate.from_mapping(fields, str(path))
    if template.candidate is None:
        raise UsageError(f"{path}, field 'candidate': required: how one option is shown")
    template.check("system", {"n_options"})
    template.check("user", {"prompt", "options", "n_options"})
    template.check("candidate", {"number", "text"})
    description = JUDGE_PROMPTS.get(key, f"from {path.name}")
    return ChoicePrompt(
        key if key in JUDGE_PROMPTS else str(path), template, max_tokens, description
    )


@dataclass(frozen=True)
class GradeScoreTask:
    """A Grade Score task ready to run; build one with :func:`build_grade_score_task`.

    Attributes
    ----------
    items:
        The items, with their random option when asked for.
    prompt:
        The judge prompt.
    source:
        Where the items came from (``demo`` or the file).
    in_file:
        The items the file holds, where ``item_limit`` drew fewer (else None).
    """

    items: tuple[GradeItem, ...]
    prompt: ChoicePrompt
    source: str
    in_file: int | None = None

    name = "grade-score"

    @property
    def n_options(self) -> int:
        return self.items[0].n_options

    def messages(self, item: GradeItem, order: Sequence[int]) -> tuple[dict[str, str], ...]:
        """The messages that show ``item``'s options in ``order`` (``order[slot]`` = index)."""
        template = self.prompt.template
        blocks = [
            template.block({"number": str(slot + 1), "text": item.options[index]})
            for slot, index in enumerate(order)
        ]
        fields = {
            "prompt": item.prompt,
            "options": "\n\n".join(blocks),
            "n_options": str(item.n_options),
        }
        return template.messages(fields)


def build_grade_score_task(spec: GradeScoreSpec) -> GradeScoreTask:
    """The task ``spec`` describes: its items read (with random options) and its prompt.

    Raises
    ------
    UsageError
        Bad items, a bad prompt, or too many options for ``permutations: all``.
    """
    prompt = load_choice_prompt(spec.prompt)
    path = resolve_items(spec.items)
    items = read_items(path)
    if spec.random_option:
        items = with_random_options(items, seed=spec.seed)
    in_file = None
    if spec.item_limit is not None and spec.item_limit < len(items):
        in_file = len(items)
        items = drawn_items(items, spec.item_limit, seed=spec.seed)
    source = "demo" if path == DEMO_ITEMS else str(path)
    return GradeScoreTask(items, prompt, source, in_file)


class GradeScorePlan(RequestPlan):
    """Every order of every item, replicated; see the module docstring."""

    method = "choice"

    def __init__(self, task: GradeScoreTask, probe: ChoiceProbe) -> None:
        self.task, self.probe = task, probe
        self.orders = probe.orders(task.n_options)
        self._orders_of: dict[str, tuple[GradeItem, int]] = {}  # request id: item, order
        for item in task.items:
            for k in range(len(self.orders)):
                self._orders_of[f"{item.id}#{k + 1}"] = (item, k)
        self._answers: dict[tuple[str, int], tuple[ChoiceAnswer, str | None]] = {}
        self._errors: dict[tuple[str, int], str] = {}
        self._refused: set[tuple[str, int]] = set()

    def _each_request(self) -> Iterator[ModelRequest]:
        for request_id, (item, k) in self._orders_of.items():
            yield from self.probe.requests(request_id, self.task.messages(item, self.orders[k]))

    def annotate(self, result: RequestResult) -> dict[str, Any]:
        """Read one answer; return what ``responses.jsonl`` records about it."""
        key = (result.request.id, result.request.replicate)
        response = result.response
        if response is None:
            self._errors[key] = result.error or "no answer"
            return {"probe": self.probe.kind}
        if response.refusal is not None:  # an answer that names no option
            self._answers[key] = (ChoiceAnswer(None), response.text)
            self._refused.add(key)
            return {"probe": self.probe.kind, "irregular": 1}
        # Cut off by the token limit ("length"; Anthropic's "max_tokens"): no verdict yet.
        cut = any(reason in ("length", "max_tokens") for reason in response.finish_reasons[:1])
        answer = self.probe.parse(response.text, self.task.n_options, truncated=cut)
        self._answers[key] = (answer, response.text)
        return {
            "probe": self.probe.kind,
            "parsed": answer.label,
            "irregular": int(answer.slot is None),
        }

    def trials(self) -> pd.DataFrame:
        """One row per request, once every result is in (columns: module docstring)."""
        rows = []
        for request in self.requests:
            item, k = self._orders_of[request.id]
            order = self.orders[k]
            key = (request.id, request.replicate)
            answer, text = self._answers.get(key, (ChoiceAnswer(None), None))
            option = None if answer.slot is None else order[answer.slot]
            rows.append(
                {
                    "item_id": item.id,
                    "order": k + 1,
                    "replicate": request.replicate,
                    "shown": " ".join(str(index) for index in order),
                    "slot": None if answer.slot is None else answer.slot + 1,
                    "option": option,
                    "random": None if option is None else option == item.random_index,
                    "parsed_as": answer.parsed_as,
                    "answer": text,
                    "refused": key in self._refused,
                    "error": self._errors.get(key),
                }
            )
        return pd.DataFrame(rows).astype({"slot": "Int64", "option": "Int64"})


def plan_grade_score(task: GradeScoreTask, spec: GradeScoreSpec) -> GradeScorePlan:
    """The plan for ``task``: every order of every item, as ``spec`` asks them."""
    probe = ChoiceProbe(
        scheme=spec.permutations,
        replicates=spec.replicates,
        temperature=spec.temperature,
        max_tokens=spec.max_tokens or task.prompt.max_tokens,
    )
    plan = GradeScorePlan(task, probe)
    plan.effort = spec.reasoning_effort
    return plan


TASK_INFO = TaskInfo(
        name="grade-score",
        summary="A judge picks the best of an item's options, shown in every cyclic order: "
                "by position or by content? (Grade Score)",
        groups="none: the judge's choices by slot and by option are audited",
        pools="each item's n options in its n cyclic orders (all n! with --permutations all)",
        data=(
            ("items", "yours: --items FILE.jsonl with id, prompt, options[, preferred | ranks]"),
            ("demo", f"{DEMO_ITEMS} (16 items x 4 options, written for biasaudit; --items demo)"),
        ),
        prompts=tuple(
            f"{PROMPTS_DIR / f'grade-score.{key}.yaml'} ({key}: {role})"
            for key, role in JUDGE_PROMPTS.items()
        ),
        usage="biasaudit run grade-score --items FILE.jsonl --model MODEL [--prompt 1|2|3|4|FILE]",
    )  # fmt: skip


TASK_INFOS = (TASK_INFO,)
"""The Grade Score task, as ``biasaudit tasks`` lists it."""
