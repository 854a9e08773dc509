"""The choice probe: which of n options is best, asked with the options in every order.

An item's n options are shown in several orders, and the judge answers with
the number of the option it prefers, ``Option N`` (Iourovitski, "Grade Score:
Quantifying LLM Performance in Option Selection", 2024). The orders are

- ``"cyclic"``: the n rotations of the options, so that each option sits in
  each slot exactly once (the paper's scheme; n requests per item);
- ``"all"``: all n! orders, for n up to :data:`MAX_ALL_ORDERS_OPTIONS`.

Each order may be asked several times (replicates, sampled at the
temperature given; the paper used 0.3): every replicate is its own request
with its own replicate index, so its own cache entry. This module asks and
parses; scoring the answers is :func:`biasaudit.metrics.grade_score`.

An answer is read, in this order, as

1. an explicit verdict, the **last** one in the answer: ``Selection: Option 2``,
   ``**Final answer:** 2``, ``Best: Option 2``, ``I choose option 2``, ``I'd go with Option 2``,
   ``The best option is 2.``, ``The answer is Option 2`` (reasoning prompts
   weigh every option first and decide last). A bare number counts only where
   it ends the verdict (``Answer: 3.1 miles`` is no verdict), and "the answer
   is" needs the word "Option" (``the answer is 4`` may be about the item).
   Praise of one option is a verdict too: ``The first option is the best``,
   ``Option 2 is clearly better``, ``Option 3 wins``; and so is a pronoun's
   choice: ``The option I prefer is Option 2``;
2. a first line that is nothing but an option: ``Option 2``, ``**Option 2**``,
   ``2``, ``2.``, ``(2)``, ``[[2]]``, or ``Option 2.`` / ``Option 2 - ...``
   followed by an explanation (a first line ``Option 1: ...`` is read as the
   heading of an evaluation, not as a verdict; a markdown heading never is).
   A bare number counts only as the whole line: ``1. Networking: ...`` or
   ``1. Option 2: ...`` opens a numbered list (a weak judge answering the
   user's request instead of judging), and reading its 1 as Option 1 would
   inflate the very position bias being measured;
3. the one option the answer names, when it names exactly one
   (``For a child, option 3 fits``), unless the answer was cut off by the
   token limit (``truncated``) or opens an evaluation of each option that
   stops mid-sentence (``Option 1: The response explains``: a heading, not a
   verdict), or the option is named only to be turned down (``Option 1 is
   wrong``, ``the option I like least is Option 1``).

Options are referred to as ``Option 2``, by ordinal (``the second option``,
``the 2nd response``, ``the last one``), or by capital letter A-H after the
word "Option" or in brackets (``Option B``, ``(B)``: option 2). Letters stop
at H because a lone capital is too often something else: ``the option I
prefer`` is a pronoun, and ``Option N`` or ``Option X`` a placeholder copied
from the prompt, which with 14 options would read as a verdict for the 14th.
``tests/data/judge_answers.jsonl`` holds the hand-labelled answers (over 100
shapes) this reading is tested on. Text inside ``<think>...</think>`` (the
reasoning of R1-style models) is ignored. An answer that names no option,
names several without a verdict, or names one that does not exist (``Option
7`` of 4) is unparseable: :attr:`ChoiceAnswer.slot` is None, and the audit
counts it and leaves it out, never stops.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from biasaudit.errors import UsageError
from biasaudit.providers import ModelRequest, SamplingParams

__all__ = [
    "DEFAULT_TEMPERATURE",
    "MAX_ALL_ORDERS_OPTIONS",
    "ChoiceAnswer",
    "ChoiceProbe",
    "OrderScheme",
    "option_orders",
]

OrderScheme = Literal["cyclic", "all"]
ParsedAs = Literal["verdict", "first_line", "only_option"]

DEFAULT_TEMPERATURE = 0.3  # the paper's
MAX_ALL_ORDERS_OPTIONS = 6  # 6! = 720 requests per item; 7! would be 5,040
_DEFAULT_MAX_TOKENS = 64

# Markup and quoting a verdict may carry: "**Option 2**", "`2`", "(2)", "[[2]]".
_OPEN = r"[*_`\"'(\[\s]*"
_CLOSE = r"[*_`\"')\]\x7d]*"  # \x7d: "}", kept out of str.format's way
# "Option 2" or "Option B" (a capital letter A-H, after the word only: "the option I
# prefer" is a pronoun, "Option N" / "Option X" a placeholder copied from the prompt);
# or an ordinal: "the first option", "the 2nd response", "the last one".
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
             "ninth", "tenth")  # fmt: skip
_OPTION_REF = (
    r"(?:(?i:option)\s*#?\s*(?:(?P<{g}_letter>[A-H])|(?P<{g}>\d{{1,2}}))(?![0-9A-Za-z])"
    r"|\b(?i:the\s+)?(?P<{g}_ordinal>(?i:"
    + "|".join(_ORDINALS)
    + r"|last|\d{{1,2}}(?:st|nd|rd|th)))\s+(?i:option|response|answer|choice|candidate|one)\b)"
)
# A bare "2" counts only where it ends the verdict: "Answer: 3.1 miles" is no verdict.
_BARE_REF = rf"#?(?P<{{g}}_bare>\d{{{{1,2}}}})(?![\d.,]\d){_CLOSE}(?=\s*(?:$|[.,;!]))"
# "(B)" or "[C]" after a verdict's label or verb: a letter in brackets is an option.
_BRACKETED_LETTER = r"[(\[](?P<{g}_bracketed_letter>[A-H])[)\]]"
_ANY_REF = rf"(?:{_OPTION_REF}|{_BARE_REF}|{_BRACKETED_LETTER})"
# "the most accurate", "the correct one": praise a verdict may give an option.
_POSITIVE = (
    r"(?:most\s+(?:accurate|helpful|complete|correct|relevant|appropriate|informative|"
    r"useful|faithful|thorough|precise)|(?:correct|right)\s+(?:one|choice|answer|option))"
)
_LABEL = (
    r"\b(?i:(?:final\s+)?(?:selection|answer|choice|verdict|decision|pick|winner"
    r"|best(?:\s+(?:option|response|answer|choice|pick))?))"
)
_VERDICT = re.compile(
    "(?:"
    # "Selection: Option 2", "**Final answer:** 2"
    rf"{_LABEL}{_CLOSE}\s*[:=]{_OPEN}{_ANY_REF.format(g='label')}"
    # "The best option is Option 2", "my choice would be 2"
    r"|\b(?i:(?:best|final|my|preferred|winning)\s+(?:option|response|choice|pick|selection)"
    rf"\s+(?:is|would\s+be)){_OPEN}{_ANY_REF.format(g='subject')}"
    # "The answer is Option 2" (never a bare number: "the answer is 4" may be about the item)
    rf"|\b(?i:answer\s+is){_OPEN}{_OPTION_REF.format(g='answer')}"
    # "I choose option 2", "I'd go with Option 2", "I would pick 2."
    r"|\bI(?:\s+would|\s+will|'d|'ll)?\s+(?i:choose|select|pick|prefer|go\s+with)"
    rf"{_OPEN}{_ANY_REF.format(g='verb')}"
    # "The option I prefer is Option 2", "the response I would choose is the second one"
    r"|\b(?i:option|response|answer|choice|one)\s+(?i:that\s+)?I(?:\s+would|'d)?\s+"
    r"(?i:choose|select|pick|prefer|recommend|go\s+with)\s+(?i:is|would\s+be)"
    rf"{_OPEN}{_ANY_REF.format(g='pronoun')}"
    # "The first option is the best.", "Option 2 is clearly better", "Option 3 wins"
    rf"|{_OPTION_REF.format(g='praised')}{_CLOSE}\s+(?i:(?:is|seems|looks)\s+"
    r"(?:clearly\s+|definitely\s+|by\s+far\s+)?(?:the\s+)?"
    rf"(?:best|better|strongest|stronger|superior|preferred|winner|{_POSITIVE})|wins)\b"
    ")",
    re.MULTILINE,
)
_FIRST_LINE = re.compile(
    rf"^{_OPEN}(?:{_OPTION_REF.format(g='first')}{_CLOSE}\s*(?:$|[.!](?:\s|$)|[-\u2013\u2014]\s)"
    # A bare number only as the whole line: "1. Networking: ..." is a list, not a verdict.
    rf"|#?(?P<first_bare>\d{{1,2}}){_CLOSE}\s*[.!]?{_CLOSE}\s*$)"
)
_MENTION = re.compile(_OPTION_REF.format(g="mention"))
# An option as the label of an evaluation: "Option 1: The response explains ..."
_LABELLED = re.compile(rf"^{_OPEN}{_OPTION_REF.format(g='label')}{_CLOSE}\s*:", re.MULTILINE)
# An option named only to be turned down: "Option 1 is wrong", "not the second option".
_REJECTED = re.compile(
    rf"{_OPTION_REF.format(g='rejected')}{_CLOSE}\s+(?i:is|seems|looks)\s+(?i:(?:not|wrong|"
    r"incorrect|inaccurate|worse|worst|weaker|bad|off|misleading|unhelpful)\b)"
    # "The option I like least is Option 1", "the worst one is Option 2"
    r"|\b(?i:least|worst|weakest)\b[^.\n]{0,30}?\b(?i:is|would\s+be)"
    rf"{_OPEN}{_OPTION_REF.format(g='least')}"
)
# How an answer cut off by the token limit may end: mid-sentence, or with an ellipsis.
_ENDS_A_SENTENCE = re.compile(r"[.!?)\]}\"'*`]\s*$")
_ELLIPSIS = re.compile(r"(?:\.\.\.|\u2026)\s*$")
_THINKING = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class ChoiceAnswer:
    """One parsed answer.

    Attributes
    ----------
    slot:
        The chosen slot, 0-based (``Option 1`` is slot 0), or None when the
        answer could not be read or names an option that does not exist.
    parsed_as:
        What decided it: ``"verdict"``, ``"first_line"`` or ``"only_option"``
        (rules 1-3 of the module docstring).
    """

    slot: int | None
    parsed_as: ParsedAs | None = None

    @property
    def label(self) -> str | None:
        """``Option N`` as the judge saw it, or None."""
        return None if self.slot is None else f"Option {self.slot + 1}"


def option_orders(n_options: int, scheme: OrderScheme = "cyclic") -> list[tuple[int, ...]]:
    """The orders an item's options are shown in: ``order[slot]`` is the option's index.

    ``"cyclic"`` gives the n rotations ``(r, r+1, ..., r-1) mod n`` for r = 0..n-1,
    the identity first; ``"all"`` gives the n! permutations in lexicographic order.

    Raises
    ------
    UsageError
        Fewer than 2 options, an unknown scheme, or ``"all"`` for more than
        :data:`MAX_ALL_ORDERS_OPTIONS` options.
    """
    if n_options < 2:
        raise UsageError(f"an item needs at least 2 options to choose from, got {n_options}")
    if scheme == "cyclic":
        return [tuple((r + s) % n_options for s in range(n_options)) for r in range(n_options)]
    if scheme != "all":
        raise UsageError(f"permutations must be 'cyclic' or 'all', got {scheme!r}")
    if n_options > MAX_ALL_ORDERS_OPTIONS:
        raise UsageError(
            f"--permutations all asks all {n_options}! = {math.factorial(n_options):,} orders "
            f"of {n_options} options per item; it is limited to {MAX_ALL_ORDERS_OPTIONS} options: "
            "use --permutations cyclic"
        )
    return list(itertools.permutations(range(n_options)))


class ChoiceProbe:
    """Asks which option is best, in several orders, and parses the answer.

    See the module docstring for the orders and the parsing rules.

    Parameters
    ----------
    scheme:
        ``"cyclic"`` or ``"all"``.
    replicates:
        Times each order is asked (separate requests, separate cache entries).
    temperature:
        Sampling temperature (0 is greedy; the paper used 0.3).
    max_tokens:
        Longest answer asked for: enough for the prompt's reasoning, if any.
    """

    kind = "choice"

    def __init__(
        self,
        *,
        scheme: OrderScheme = "cyclic",
        replicates: int = 1,
        temperature: float = DEFAULT_TEMPERATURE,
        max_tokens: int = _DEFAULT_MAX_TOKENS,
    ) -> None:
        if replicates < 1:
            raise UsageError(f"replicates must be at least 1, got {replicates}")
        if not 0.0 <= temperature <= 2.0:
            raise UsageError(f"temperature must be between 0 and 2, got {temperature}")
        if max_tokens < 1:
            raise UsageError(f"max_tokens must be at least 1, got {max_tokens}")
        self.scheme, self.replicates = scheme, replicates
        self.temperature, self.max_tokens = temperature, max_tokens

    @property
    def params(self) -> SamplingParams:
        """Sampling parameters of every request this probe sends."""
        return SamplingParams(max_tokens=self.max_tokens, temperature=self.temperature)

    def orders(self, n_options: int) -> list[tuple[int, ...]]:
        """The orders asked for an item of ``n_options`` options (see :func:`option_orders`)."""
        return option_orders(n_options, self.scheme)

    def requests(self, request_id: str, messages: Sequence[dict[str, Any]]) -> list[ModelRequest]:
        """The requests for one order: one per replicate, ``replicate`` 0..R-1."""
        return [
            ModelRequest(
                id=request_id, messages=tuple(messages), params=self.params, replicate=replicate
            )
            for replicate in range(self.replicates)
        ]

    def parse(self, text: str, n_options: int, *, truncated: bool = False) -> ChoiceAnswer:
        """Read one answer to a prompt of ``n_options`` options; see the module docstring.

        ``truncated``: the answer was cut off by the token limit (finish reason
        ``length``): it never reached its verdict, so an option it merely names
        is not read as chosen (rule 3 is off).
        """
        answer = _THINKING.sub("", text).strip()
        if not answer:
            return ChoiceAnswer(None)
        verdicts = list(_VERDICT.finditer(answer))
        if verdicts:
            return _answer(_number(verdicts[-1], n_options), n_options, "verdict")
        first_line = answer.splitlines()[0].strip()
        leading = None if first_line.startswith("#") else _FIRST_LINE.match(first_line)
        if leading is not None:
            return _answer(_number(leading, n_options), n_options, "first_line")
        if truncated or _cut_evaluation(answer) or _REJECTED.search(answer):
            return ChoiceAnswer(None)
        named = {_number(match, n_options) for match in _MENTION.finditer(answer)}
        if len(named) == 1:
            return _answer(named.pop(), n_options, "only_option")
        return ChoiceAnswer(None)


def _cut_evaluation(answer: str) -> bool:
    """An evaluation of each option that stops before its verdict: it opens with an
    option's label ("Option 1: The response explains") and ends mid-sentence or with an
    ellipsis, as an answer cut off by the token limit does."""
    if not _LABELLED.match(answer):
        return False
    return _ELLIPSIS.search(answer) is not None or not _ENDS_A_SENTENCE.search(answer)


def _number(match: re.Match[str], n_options: int) -> int:
    """The 1-based option number a match names, from its digits, letter or ordinal."""
    for name, value in match.groupdict().items():
        if value is None:
            continue
        if name.endswith("_letter"):
            return ord(value) - ord("A") + 1
        if name.endswith("_ordinal"):
            word = value.lower()
            if word == "last":
                return n_options
            if word in _ORDINALS:
                return _ORDINALS.index(word) + 1
            return int(word[:-2])
        return int(value)
    raise AssertionError("a reference pattern matched without naming an option")


def _answer(number: int, n_options: int, parsed_as: ParsedAs) -> ChoiceAnswer:
    if not 1 <= number <= n_options:
        return ChoiceAnswer(None)
    return ChoiceAnswer(number - 1, parsed_as)
