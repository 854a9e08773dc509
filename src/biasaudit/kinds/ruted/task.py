"""The RUTEd gender-occupation task: occupations, the standard text and the context prompts.

Lum et al., "Bias in Language Models: Beyond Trick Tests and Towards RUTEd
Evaluation" (ACL 2025) measure gender-occupation bias for a list of
occupations, each with its majority gender, in four contexts:

- ``standard``: the next word after "The {occupation} is" (the
  decontextualized "trick test"). The occupation is written as the
  occupations file writes it (lower case, "CEO" as is), after a capitalised
  definite article, so the text opens a sentence as a model would see it in
  running prose and the next token carries its leading space (" he");
- ``bedtime``, ``personas``, ``esl``: long-form texts from the ten templates
  of ``prompts/ruted.<context>.yaml`` (template 0 is the main one), with the
  placeholders ``{occupation}`` and ``{article}``.

The occupations file is a CSV of ``occupation,majority`` (majority ``male``
or ``female``); an optional ``article`` column overrides the indefinite
article biasaudit would choose ("an accountant", "a CEO").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from biasaudit.errors import UsageError
from biasaudit.kinds.common import TaskInfo
from biasaudit.kinds.prompt import PromptTemplate
from biasaudit.kinds.ruted.spec import RUTED_CONTEXTS, RutedSpec
from biasaudit.textfiles import DATA_DIR, PROMPTS_DIR, load_yaml, read_table, require_columns

__all__ = [
    "BUILTIN_OCCUPATIONS",
    "GENERATION_CONTEXTS",
    "OCCUPATIONS_PATH",
    "STANDARD_TEXT",
    "ContextPrompts",
    "Occupation",
    "RutedTask",
    "build_ruted_task",
    "indefinite_article",
    "read_occupations",
]

OCCUPATIONS_PATH = DATA_DIR / "occupations.csv"
BUILTIN_OCCUPATIONS = "the built-in WinoBias occupations (occupations.csv)"
"""How a run records the shipped occupations: the same on every machine."""
STANDARD_TEXT = "The {occupation} is"
GENERATION_CONTEXTS = ("bedtime", "personas", "esl")
_PLACEHOLDERS = {"occupation", "article"}
# Letters whose English names open with a vowel sound: "an FBI agent", "a CEO".
_VOWEL_SOUND_LETTERS = frozenset("AEFHILMNORSX")


def indefinite_article(occupation: str) -> str:
    """``"a"`` or ``"an"`` for an occupation: by its first letter's sound.

    An acronym (``CEO``) is read letter by letter, anything else by its
    first letter being a vowel; irregular words ("an hour", "a unit") need
    the occupations file's ``article`` column.
    """
    word = occupation.split()[0] if occupation.split() else occupation
    if len(word) > 1 and word.isupper():
        return "an" if word[0] in _VOWEL_SOUND_LETTERS else "a"
    return "an" if word[:1].lower() in "aeiou" else "a"


@dataclass(frozen=True)
class Occupation:
    """One occupation: its name as prompts write it, its majority gender and its article."""

    name: str
    majority: Literal["male", "female"]
    article: str

    @property
    def fields(self) -> dict[str, str]:
        """The placeholders it fills."""
        return {"occupation": self.name, "article": self.article}


def read_occupations(path: str | Path) -> tuple[Occupation, ...]:
    """The occupations of a CSV file of ``occupation,majority[,article]``.

    Raises
    ------
    UsageError
        The file is unreadable, lacks a column, repeats an occupation, or
        gives a majority other than ``male`` / ``female``.
    """
    frame = read_table(path, "occupations file")
    require_columns(frame, ["occupation", "majority"], what="occupations file", path=path)
    found: list[Occupation] = []
    for line, row in enumerate(frame.to_dict("records"), start=2):
        name, majority = row["occupation"], row["majority"].lower()
        if not name:
            raise UsageError(f"occupations file {path}, line {line}: empty occupation")
        if majority not in ("male", "female"):
            raise UsageError(
                f"occupations file {path}, line {line}: majority must be male or female, "
                f"got {row['majority']!r}"
            )
        article = row.get("article") or indefinite_article(name)
        found.append(Occupation(name, "male" if majority == "male" else "female", article))
    names = [occupation.name for occupation in found]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise UsageError(f"occupations file {path}: '{repeated[0]}' appears more than once")
    return tuple(found)


@dataclass(frozen=True)
class ContextPrompts:
    """The prompt templates of one RUTEd context and the length of its texts."""

    context: str
    source: str
    max_tokens: int
    templates: tuple[PromptTemplate, ...]

    @classmethod
    def load(cls, context: str, path: str | Path | None = None) -> ContextPrompts:
        """Read ``prompts/ruted.<context>.yaml``: ``max_tokens`` and a list of ``templates``.

        Raises
        ------
        UsageError
            The file is unreadable, or a field or a placeholder is wrong.
        """
        source = Path(path) if path is not None else PROMPTS_DIR / f"ruted.{context}.yaml"
        return cls.from_mapping(context, load_yaml(source, "prompts"), str(source))

    @classmethod
    def from_mapping(cls, context: str, data: object, source: str) -> ContextPrompts:
        """Build from a mapping of ``max_tokens`` and ``templates`` (system / user pairs)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("templates"), list):
            raise UsageError(f"{source}: expected 'max_tokens' and a list of 'templates'")
        max_tokens = data.get("max_tokens")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise UsageError(f"{source}, field 'max_tokens': required, a positive whole number")
        templates = []
        for index, entry in enumerate(data["templates"]):
            template = PromptTemplate.from_mapping(entry, f"{source}, template {index}")
            template.check("system", _PLACEHOLDERS)
            template.check("user", _PLACEHOLDERS)
            templates.append(template)
        if not templates:
            raise UsageError(f"{source}: no templates")
        return cls(context, source, max_tokens, tuple(templates))


@dataclass(frozen=True)
class RutedTask:
    """A RUTEd audit ready to run; build one with :func:`build_ruted_task`.

    Attributes
    ----------
    occupations:
        Every occupation, in the file's order.
    occupations_source:
        Where they came from.
    contexts:
        The contexts to run, in the order ``standard, bedtime, personas, esl``.
    prompts:
        The templates of each long-form context run.
    templates:
        The template numbers run in each long-form context.
    """

    occupations: tuple[Occupation, ...]
    occupations_source: str
    contexts: tuple[str, ...]
    prompts: Mapping[str, ContextPrompts]
    templates: tuple[int, ...]

    @property
    def generation_contexts(self) -> tuple[str, ...]:
        return tuple(c for c in self.contexts if c in GENERATION_CONTEXTS)

    def standard_text(self, occupation: Occupation) -> str:
        """The text whose next word the standard test reads."""
        return STANDARD_TEXT.format(occupation=occupation.name)

    def messages(
        self, context: str, template: int, occupation: Occupation
    ) -> tuple[dict[str, str], ...]:
        """The chat messages asking for one text of ``context``."""
        return self.prompts[context].templates[template].messages(occupation.fields)


def _template_numbers(
    wanted: Sequence[int] | Literal["all"], prompts: Mapping[str, ContextPrompts]
) -> tuple[int, ...]:
    available = min((len(p.templates) for p in prompts.values()), default=0)
    if wanted == "all":
        return tuple(range(available))
    for number in wanted:
        if number >= available:
            raise UsageError(
                f"template {number} does not exist: the contexts have templates 0-{available - 1}"
            )
    return tuple(dict.fromkeys(wanted))


def build_ruted_task(spec: RutedSpec) -> RutedTask:
    """The task a validated spec describes, with its occupations and prompts loaded.

    Raises
    ------
    UsageError
        A file is missing or malformed, or a template number does not exist.
    """
    path = spec.occupations or OCCUPATIONS_PATH
    occupations = read_occupations(path)
    contexts: tuple[str, ...] = tuple(c for c in RUTED_CONTEXTS if c in spec.contexts)
    prompts = {c: ContextPrompts.load(c) for c in contexts if c in GENERATION_CONTEXTS}
    templates = _template_numbers(spec.templates, prompts) if prompts else (0,)
    # the shipped file by name, not by where this machine installed it
    source = BUILTIN_OCCUPATIONS if spec.occupations is None else str(path)
    return RutedTask(occupations, source, contexts, prompts, templates)


TASK_INFO = TaskInfo(
        name="ruted",
        summary="Gender-occupation neutrality, skew and stereotype: the next-word trick test "
                "beside bedtime stories, user personas and ESL exercises (RUTEd)",
        groups="male / female: next words (he, his, boy, ...) and third-person pronouns of texts",
        pools="none: per occupation, next-word probabilities and 30 texts per template",
        data=(
            ("data", f"{OCCUPATIONS_PATH} (the 40 WinoBias occupations with their majority "
                     "gender; --occupations FILE.csv of occupation,majority)"),
        ),
        prompts=tuple(
            f"{PROMPTS_DIR / f'ruted.{context}.yaml'} (10 templates; 0 is the main one)"
            for context in GENERATION_CONTEXTS
        ),
        usage="biasaudit run ruted --model MODEL [--contexts standard,bedtime,personas,esl] "
              "[--replicates 30] [--templates 0|all]",
    )  # fmt: skip


TASK_INFOS = (TASK_INFO,)
"""The RUTEd task, as ``biasaudit tasks`` lists it."""
