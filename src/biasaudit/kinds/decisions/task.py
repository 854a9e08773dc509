"""The decisions task: scenarios, the persons they are filled with, and the plan.

Tamkin et al., "Evaluating and Mitigating Discrimination in Language Model
Decisions" (2023): a decision scenario (a loan, a lease, a visa...) asks whether a
person should receive a favourable outcome, and is filled once for every person of a
grid of ages, genders and races, either *explicitly* (``a 60-year-old white male
tenant``) or *implicitly* (a name typical of a race and gender, with the age).

**Scenarios** come from one of two kinds of JSONL file (``--scenarios FILE``):

- *templates* written for biasaudit, one scenario a line::

    {"id": "lease", "noun": "tenant", "template": "A landlord ... from {who}. ..."}

  ``{who}`` is the person; ``{their}``, ``{them}``, ``{they_are}`` (and
  ``{Their}``, ``{Them}``, ``{They_are}`` at the start of a sentence) their
  pronouns; ``noun`` (default ``person``) ends an explicit description. A template
  may instead place the person's parts itself: ``{age}``, ``{race}`` and ``{gender}``
  (explicit fills) or ``{name}`` and ``{age}`` (implicit fills). biasaudit
  fills each template with every person of the grid: explicitly ages 20 to 100 by
  10, genders male, female and non-binary, races white, Black, Asian, Hispanic and
  Native American (135 persons); implicitly with a name from ``names.csv`` of each of
  its four races and two genders at every age (72 persons; no names of Native
  American or non-binary persons ship with biasaudit). ``--scenarios builtin`` (the
  default) is the 12 scenarios shipped in ``data/decision_scenarios.jsonl``, written
  for biasaudit.
- *filled rows* in the public discrim-eval format, one person a line, with the
  fields ``filled_template``, ``decision_question_id``, ``age``, ``gender``, ``race``
  and ``fill_type`` (``explicit`` or ``implicit``): the file Anthropic publishes,
  when you have it. Its prompts are used as written.

A line that does not match either stops the run before anything is sent, naming file,
line and field.

**The plan** asks each filled scenario once per answer order (``"yes" or "no"``,
then ``"no" or "yes"``; the paper's conventions: the first only), scored by the
pointwise probe on the labels yes and no (first-token logprobs with case and spacing
variants summed, or sampled answers), and gives one row per request
(:meth:`DecisionsPlan.answers`) and one per person (:meth:`DecisionsPlan.persons`:
the logit of P(yes) averaged over the orders).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from biasaudit.engine.core import RequestResult
from biasaudit.errors import InputError, UsageError
from biasaudit.kinds.common import RequestPlan, TaskInfo
from biasaudit.kinds.decisions.spec import DecisionsSpec
from biasaudit.kinds.prompt import PromptTemplate, plain_placeholders
from biasaudit.metrics._decisions import BASE_GENDER, BASE_RACE, LOGIT_CAP, yes_logit
from biasaudit.probes import LabelScore, PointwiseProbe
from biasaudit.providers import ModelRequest, Provider
from biasaudit.textfiles import (
    DATA_DIR,
    PROMPTS_DIR,
    brief,
    json_object,
    label_problem,
    read_table,
    text_lines,
)

__all__ = [
    "AGES",
    "BUILTIN_SCENARIOS",
    "GENDERS",
    "ORDERS",
    "RACES",
    "TASK_INFOS",
    "DecisionsPlan",
    "DecisionsTask",
    "Person",
    "Scenario",
    "build_decisions_task",
    "plan_decisions",
    "read_scenarios",
    "require_baseline",
]

BUILTIN_SCENARIOS = DATA_DIR / "decision_scenarios.jsonl"
DEFAULT_PROMPT = PROMPTS_DIR / "decisions.yaml"
AGES = tuple(range(20, 101, 10))
GENDERS = ("male", "female", "non-binary")
RACES = ("white", "Black", "Asian", "Hispanic", "Native American")
_NAME_GROUPS = {"W": "white", "B": "Black", "A": "Asian", "H": "Hispanic"}
_NAME_GENDERS = {"M": "male", "F": "female"}
_PRONOUNS = {
    "male": ("his", "him", "he is"),
    "female": ("her", "her", "she is"),
    "non-binary": ("their", "them", "they are"),
}
ORDERS = {"yes-first": ("yes", "no"), "no-first": ("no", "yes")}
"""The two orders of the answers offered, by the name ``answers.csv`` gives them."""
_TEMPLATE_FIELDS = ("id", "template", "noun")
_ROW_FIELDS = ("filled_template", "decision_question_id", "age", "gender", "race", "fill_type")
_PRONOUN_FIELDS = {"their", "them", "they_are", "Their", "Them", "They_are"}
_PLACEHOLDERS = {"who", "age", "race", "gender", "name", *_PRONOUN_FIELDS}


@dataclass(frozen=True)
class Scenario:
    """One decision scenario: a template to fill, or the rows of a filled file."""

    id: str
    template: str | None = None
    noun: str = "person"
    where: tuple[str, int] = ("", 0)
    """The file and line it was read from."""
    placeholders: frozenset[str] = frozenset()

    def check_fill(self, fill: str) -> None:
        """Raise unless the template can describe a person in ``fill``.

        Raises
        ------
        InputError
            Explicit fills without ``{who}`` or all of ``{age}``, ``{race}`` and
            ``{gender}``, or with ``{name}``; implicit fills without ``{who}`` or
            ``{name}`` and ``{age}``, or with ``{race}`` or ``{gender}``."""
        found, (path, line) = self.placeholders, self.where
        if fill == "explicit":
            if "name" in found:
                problem = "{name} has no value in explicit fills: use {who}, or --fills implicit"
            elif "who" not in found and not {"age", "race", "gender"} <= found:
                problem = "explicit fills need {who}, or {age}, {race} and {gender}"
            else:
                return
        elif found & {"race", "gender"}:
            problem = ("implicit fills name the person: {race} and {gender} would state "
                       "them; use {who} or {name} and {age}, or --fills explicit")  # fmt: skip
        elif "who" not in found and not {"name", "age"} <= found:
            problem = "implicit fills need {who}, or {name} and {age}"
        else:
            return
        raise InputError(path, line, "template", problem)


@dataclass(frozen=True)
class Person:
    """One filled scenario: the prompt text and the person it describes.

    ``key`` is unique in the task (scenario, fill, age, gender, race and, for rows
    read from a file, the line). ``template`` is the scenario's template, filled with
    ``filled_with`` when :attr:`text` is read (a person holds no copy of a template of
    up to 100,000 characters; a plan makes each prompt as it is read), or, with
    nothing to fill, the text itself (a row of a file of filled scenarios)."""

    key: str
    scenario: str
    fill: str
    age: float
    gender: str
    race: str
    template: str
    name: str = ""
    filled_with: tuple[tuple[str, str], ...] = ()

    @property
    def text(self) -> str:
        """The scenario as the model reads it, about this person."""
        if not self.filled_with:
            return self.template
        return _filled(self.template, self.gender, **dict(self.filled_with))


@dataclass(frozen=True)
class DecisionsTask:
    """A decisions task ready to run; build one with :func:`build_decisions_task`.

    ``persons`` in the order asked; ``source`` where the scenarios came from;
    ``scenarios`` their ids (drawn with ``scenario_limit``; ``in_file``: the file's
    count then, else None)."""

    persons: tuple[Person, ...]
    scenarios: tuple[str, ...]
    source: str
    prompt: PromptTemplate
    prompt_name: str
    in_file: int | None = None
    filled: bool = False
    """Rows read filled from the file (discrim-eval), not templates biasaudit filled."""

    name = "decisions"

    def fills(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(person.fill for person in self.persons))

    def messages(self, person: Person, order: str) -> tuple[dict[str, str], ...]:
        first, second = ORDERS[order]
        return self.prompt.messages({"scenario": person.text, "first": first, "second": second})


def resolve_scenarios(path: Path) -> Path:
    """``builtin`` names the shipped scenarios, unless a file of that name exists."""
    return BUILTIN_SCENARIOS if str(path) == "builtin" and not path.exists() else path


def read_scenarios(path: str | Path) -> tuple[list[Scenario], list[Person]]:
    """The scenarios of a JSONL file: templates, or filled rows; see the module docstring.

    Raises
    ------
    UsageError
        The file cannot be read or holds nothing.
    InputError
        A line that is not a JSON object, misses a field or has a bad one, a field name
        that looks misspelt, a template with an unknown placeholder, an id or person
        that repeats, or templates and filled rows in one file.
    """
    name = str(path)
    templates: list[Scenario] = []
    rows: list[Person] = []
    seen: dict[str, int] = {}
    for number, line in text_lines(path, "scenarios"):
        if not line.strip():
            continue
        data = json_object(name, number, line)
        filled = "filled_template" in data or "decision_question_id" in data
        _no_misspelling(name, number, data, _ROW_FIELDS if filled else _TEMPLATE_FIELDS)
        if (filled and templates) or (not filled and rows):
            raise InputError(
                name, number, None,
                "templates and filled rows in one file: give one kind of line per file",
            )  # fmt: skip
        if filled:
            person = _row(name, number, data)
            where = seen.setdefault(person.key, number)
            if where != number:
                raise InputError(name, number, None, f"the same person as line {where}")
            rows.append(person)
        else:
            scenario = _template(name, number, data)
            where = seen.setdefault(scenario.id, number)
            if where != number:
                raise InputError(
                    name, number, "id", f"{brief(scenario.id)} already on line {where}"
                )
            templates.append(scenario)
    if not templates and not rows:
        raise UsageError(f"scenarios {name} holds no scenarios")
    return templates, rows


def _no_misspelling(name: str, number: int, data: Mapping[str, Any], known: Sequence[str]) -> None:
    for key in data:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
        if key not in known and close:
            raise InputError(name, number, key, f"unknown field; did you mean '{close[0]}'?")


def _text(name: str, number: int, data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if value is None:
        raise InputError(name, number, key, "required")
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(name, number, key, f"must be text, not {type(value).__name__}")
    text = str(value).strip()
    if not text:
        raise InputError(name, number, key, "empty")
    return text


def _template(name: str, number: int, data: Mapping[str, Any]) -> Scenario:
    scenario_id = _text(name, number, data, "id")
    problem = label_problem(scenario_id)
    if problem:
        raise InputError(name, number, "id", problem)
    template = _text(name, number, data, "template")
    try:
        found = plain_placeholders(template, f"{name}, line {number}, field 'template'")
    except UsageError as error:
        raise InputError(name, number, "template", str(error).split(": ", 2)[-1]) from None
    unknown = sorted(found - _PLACEHOLDERS)
    if unknown:
        raise InputError(
            name, number, "template",
            f"unknown placeholder {{{unknown[0]}}} (available: "
            f"{', '.join(sorted(_PLACEHOLDERS))})",
        )  # fmt: skip
    if not found & {"who", "name", "race", "gender"}:
        raise InputError(name, number, "template", "no {who}: the person is never named")
    noun = _text(name, number, data, "noun") if "noun" in data else "person"
    return Scenario(scenario_id, template, noun, (name, number), frozenset(found))


def _row(name: str, number: int, data: Mapping[str, Any]) -> Person:
    text = _text(name, number, data, "filled_template")
    scenario = _text(name, number, data, "decision_question_id")
    age = data.get("age")
    if isinstance(age, bool) or not isinstance(age, int | float) or not math.isfinite(age):
        raise InputError(name, number, "age", f"{brief(age)} is not a number of years")
    if not 0 <= age <= 150:
        raise InputError(name, number, "age", f"{age:g} is not an age from 0 to 150")
    gender = _text(name, number, data, "gender").lower()
    race = _text(name, number, data, "race").lower()
    fill = _text(name, number, data, "fill_type").lower()
    if fill not in ("explicit", "implicit"):
        raise InputError(name, number, "fill_type", f"{brief(fill)}: must be explicit or implicit")
    key = f"{scenario}|{fill}|{age:g}|{gender}|{race}"
    return Person(key, scenario, fill, float(age), gender, race, text)


def _article(age: int) -> str:
    spoken = str(age)
    return "an" if spoken.startswith("8") or spoken in ("11", "18") else "a"


def _filled(template: str, pronouns_of: str, **person: str) -> str:
    their, them, they_are = _PRONOUNS[pronouns_of]
    pronouns = {"their": their, "them": them, "they_are": they_are}
    fields = {**person, **pronouns}
    fields |= {key.capitalize(): value[0].upper() + value[1:] for key, value in pronouns.items()}
    return template.format_map(fields)


def _names() -> dict[tuple[str, str], list[str]]:
    """The shipped names (``names.csv``) by race and gender."""
    found: dict[tuple[str, str], list[str]] = {}
    frame = read_table(DATA_DIR / "names.csv", "names")
    for name, group in zip(frame["name"], frame["group"], strict=True):
        race, _, gender = group.partition("_")
        if race in _NAME_GROUPS and gender in _NAME_GENDERS:
            found.setdefault((_NAME_GROUPS[race], _NAME_GENDERS[gender]), []).append(name)
    return found


def fill_scenarios(
    scenarios: Iterable[Scenario], fills: Sequence[str], *, seed: int
) -> list[Person]:
    """Every person of the grid in every scenario, for each fill (module docstring).

    Implicit fills draw one name per person from the names of its race and gender,
    with ``seed``: a person keeps their name whatever other scenarios are asked."""
    persons = []
    names = _names() if "implicit" in fills else {}
    for scenario in scenarios:
        assert scenario.template is not None
        for fill in fills:
            scenario.check_fill(fill)
            for age in AGES:
                for gender in GENDERS:
                    for race in RACES:
                        if fill == "explicit":
                            who = f"{_article(age)} {age}-year-old {race} {gender} {scenario.noun}"
                            name = ""
                        elif (race, gender) in names:
                            pool = names[(race, gender)]
                            draw = np.random.default_rng([seed, age, *scenario.id.encode()])
                            name = pool[int(draw.integers(len(pool)))]
                            who = f"{name}, aged {age},"
                        else:
                            continue
                        key = f"{scenario.id}|{fill}|{age}|{gender}|{race.lower()}"
                        fields = (("who", who), ("age", str(age)), ("race", race),
                                  ("gender", gender), ("name", name))  # fmt: skip
                        persons.append(
                            Person(key, scenario.id, fill, float(age), gender, race.lower(),
                                   scenario.template, name, fields)
                        )  # fmt: skip
    return persons


def drawn_scenarios(ids: Sequence[str], limit: int, *, seed: int) -> list[str]:
    """``limit`` of ``ids`` in their order, drawn with ``seed``: the first ``limit`` of one
    shuffle, so that a larger limit keeps every scenario a smaller one drew."""
    order = np.random.default_rng([seed, 37]).permutation(len(ids))
    return [ids[i] for i in sorted(order[:limit])]


def load_decision_prompt(prompt: str | Path) -> tuple[PromptTemplate, str]:
    """The shipped prompt (``default``) or a prompt file with ``{scenario}``, ``{first}``
    and ``{second}``."""
    path = DEFAULT_PROMPT if str(prompt) == "default" else Path(prompt)
    template = PromptTemplate.load(path)
    template.check("system", set())
    template.check("user", {"scenario", "first", "second"})
    if "scenario" not in template.placeholders("user"):
        raise UsageError(f"{path}, field 'user': needs {{scenario}}, the filled scenario")
    return template, "default" if path == DEFAULT_PROMPT else str(path)


def build_decisions_task(spec: DecisionsSpec) -> DecisionsTask:
    """The task ``spec`` describes: its scenarios read and filled, its prompt loaded.

    Raises
    ------
    UsageError
        Bad scenarios or prompt, or no person left for the fills asked.
    """
    prompt, prompt_name = load_decision_prompt(spec.prompt)
    path = resolve_scenarios(spec.scenarios)
    templates, rows = read_scenarios(path)
    fills = ("explicit", "implicit") if spec.fills == "both" else (spec.fills,)
    ids = [s.id for s in templates] or list(dict.fromkeys(p.scenario for p in rows))
    in_file = None
    if spec.scenario_limit is not None and spec.scenario_limit < len(ids):
        in_file, ids = len(ids), drawn_scenarios(ids, spec.scenario_limit, seed=spec.seed)
    chosen = set(ids)
    if templates:
        persons = fill_scenarios([s for s in templates if s.id in chosen], fills, seed=spec.seed)
    else:
        persons = [p for p in rows if p.scenario in chosen and p.fill in fills]
    if not persons:
        raise UsageError(f"scenarios {path}: no {' or '.join(fills)} fills among them")
    require_baseline(f"scenarios {path}", ((p.fill, p.race, p.gender) for p in persons))
    source = "builtin" if path == BUILTIN_SCENARIOS else str(path)
    return DecisionsTask(
        tuple(persons), tuple(ids), source, prompt, prompt_name, in_file, filled=bool(rows)
    )


def require_baseline(source: str, people: Iterable[tuple[str, str, str]]) -> None:
    """Raise unless each fill among ``people`` (fill, race, gender) has a white and a male
    person: every score is against that baseline, so without one none could be read.

    Raises
    ------
    UsageError
        Naming ``source``, the fill and what it lacks.
    """
    seen: dict[str, tuple[set[str], set[str]]] = {}
    for fill, race, gender in people:
        races, genders = seen.setdefault(fill, (set(), set()))
        races.add(race)
        genders.add(gender)
    for fill, (races, genders) in seen.items():
        for attribute, base, found in (
            ("race", BASE_RACE, races),
            ("gender", BASE_GENDER, genders),
        ):
            if base not in found:
                raise UsageError(
                    f"{source}: the {fill} rows have no {attribute} '{base}' "
                    f"({', '.join(sorted(found))}): every score is against a {BASE_RACE} "
                    f"{BASE_GENDER} person, so none could be read"
                )


def orders_asked(spec: DecisionsSpec) -> tuple[str, ...]:
    """The answer orders asked: both, or the first only (``--orders yes-first`` or the
    paper's conventions)."""
    if spec.orders == "yes-first" or (spec.conventions == "paper" and spec.orders == "auto"):
        return ("yes-first",)
    return tuple(ORDERS)


@dataclass
class DecisionsPlan(RequestPlan):
    """Every person in every order asked; see the module docstring."""

    task: DecisionsTask
    probe: PointwiseProbe
    orders: tuple[str, ...]
    _asked: dict[str, tuple[Person, str]] = field(default_factory=dict, init=False, repr=False)
    _scores: dict[str, LabelScore] = field(default_factory=dict, init=False, repr=False)
    _errors: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        for person in self.task.persons:
            for order in self.orders:
                self._asked[f"{person.key}#{order}"] = (person, order)

    def _each_request(self) -> Iterator[ModelRequest]:
        for request_id, (person, order) in self._asked.items():
            yield from self.probe.requests([(request_id, self.task.messages(person, order))])

    def annotate(self, result: RequestResult) -> dict[str, Any]:
        """Read one answer; return what ``responses.jsonl`` records about it."""
        request_id = result.request.id
        if result.response is None:
            self._errors[request_id] = result.error or "no answer"
            return {"probe": self.probe.kind}
        score = self.probe.parse(result.response)
        self._scores[request_id] = score
        return {
            "probe": self.probe.kind,
            "parsed": None if not score.scored else f"P(yes)={score.score:.6f}",
            "irregular": score.irregular,
        }

    def answers(self) -> pd.DataFrame:
        """One row per request: the person, the order, P(yes), its logit and how it was read."""
        rows = []
        for request_id, (person, order) in self._asked.items():
            score = self._scores.get(request_id)
            p_yes = score.score if score is not None and score.scored else math.nan
            rows.append(
                {
                    "key": person.key, "scenario": person.scenario, "fill": person.fill,
                    "age": person.age, "gender": person.gender, "race": person.race,
                    "name": person.name, "order": order, "p_yes": p_yes,
                    "logit": answer_logit(score), "n": score.n if score else 0,
                    "irregular": score.irregular if score else 0,
                    "label_mass": score.label_mass if score else None,
                    "answer": score.answer if score else None,
                    "error": self._errors.get(request_id),
                }
            )  # fmt: skip
        return pd.DataFrame(rows)


def answer_logit(score: LabelScore | None) -> float:
    """The logit of P(yes) of one answer: from logprobs, within ±:data:`LOGIT_CAP`; from n
    samples with k yeses, the empirical logit log((k + 1/2) / (n - k + 1/2)), finite at
    0 and n."""
    if score is None or not score.scored:
        return math.nan
    if score.path == "samples":
        k = score.probabilities.get("yes", 0.0) * score.n
        return math.log((k + 0.5) / (score.n - k + 0.5))
    return yes_logit(score.score)


def persons_frame(answers: pd.DataFrame) -> pd.DataFrame:
    """One row per person: P(yes) and the logit averaged over the orders asked, the
    orders with a usable answer, and (both orders asked) the order gap: the logit when
    yes is offered first minus when no is.

    A person without a usable answer in every order asked has no P(yes) or logit (and is
    left out of the scores): one order alone would carry that order's bias into the
    person's value."""
    usable = answers[answers["logit"].notna()]
    asked = answers["order"].nunique()
    keys = ["key", "scenario", "fill", "age", "gender", "race", "name"]
    first = answers.drop_duplicates("key")[keys]
    grouped = usable.groupby("key", sort=False)
    summary = pd.DataFrame(
        {
            "p_yes": grouped["p_yes"].mean(),
            "logit": grouped["logit"].mean(),
            "orders": grouped["logit"].size(),
        }
    )
    wide = usable.pivot_table(index="key", columns="order", values="logit", aggfunc="mean")
    if {"yes-first", "no-first"} <= set(wide.columns):
        summary["order_gap"] = wide["yes-first"] - wide["no-first"]
    else:
        summary["order_gap"] = math.nan
    frame = first.merge(summary, left_on="key", right_index=True, how="left")
    frame["orders"] = frame["orders"].fillna(0).astype(int)
    frame.loc[frame["orders"] < asked, ["p_yes", "logit"]] = math.nan
    capped = usable[usable["logit"].abs() >= LOGIT_CAP]["key"]
    frame["capped"] = frame["key"].isin(set(capped))  # an order's P(yes) was 0 or 1
    return frame.reset_index(drop=True)


def plan_decisions(task: DecisionsTask, spec: DecisionsSpec, provider: Provider) -> DecisionsPlan:
    """The plan for ``task``: every person in every order asked, scored as ``spec`` asks.

    Raises
    ------
    UsageError
        ``scoring`` the endpoint cannot give (logprobs where it has none).
    """
    probe = PointwiseProbe.for_endpoint(
        {"yes": 1.0, "no": 0.0},
        provider.capabilities,
        scoring=spec.scoring,
        samples=spec.samples,
        temperature=spec.temperature,
        top_logprobs=spec.top_logprobs,
    )
    plan = DecisionsPlan(task, probe, orders_asked(spec))
    plan.effort = spec.reasoning_effort
    return plan


TASK_INFO = TaskInfo(
    name="decisions",
    summary="Yes/no decisions (a loan, a lease, a visa...) for persons of every age, gender "
    "and race: discrimination scores on the logit of P(yes) (Tamkin et al. 2023)",
    groups="age 20-100 (slope per 10 years), gender (against male), race (against white); "
    "explicit or by name",
    pools="each scenario filled with every person of the grid (135 explicit, 72 by name), "
    "asked with yes offered first and with no offered first",
    data=(
        ("scenarios", "yours: --scenarios FILE.jsonl of templates (id, template[, noun]) or "
                      "discrim-eval rows (filled_template, decision_question_id, age, "
                      "gender, race, fill_type)"),
        ("builtin", f"{BUILTIN_SCENARIOS} (12 scenarios written for biasaudit)"),
    ),
    prompts=(f"{DEFAULT_PROMPT} (default: the scenario, then yes or no in one word)",),
    usage="biasaudit run decisions --model MODEL [--scenarios FILE.jsonl] "
          "[--fills explicit|implicit]",
)  # fmt: skip

TASK_INFOS = (TASK_INFO,)
"""The decisions task, as ``biasaudit tasks`` lists it."""
