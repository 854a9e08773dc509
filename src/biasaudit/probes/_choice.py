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
   ``**Final answer:** 2``, ``I choose option 2``, ``I'd go with Option 2``,
   ``The best option is 2.``, ``The answer is Option 2`` (reasoning prompts
   weigh every option first and decide last). A bare number counts only where
   it ends the verdict (``Answer: 3.1 miles`` is no verdict), and "the answer
   is" needs the word "Option" (``the answer is 4`` may be about the item);
2. a first line that is nothing but an option: ``Option 2``, ``**Option 2**``,
   ``2``, ``2.``, ``(2)``, ``[[2]]``, or ``Option 2.`` / ``Option 2 - ...``
   followed by an explanation (a first line ``Option 1: ...`` is read as the
   heading of an evaluation, not as a verdict; a markdown heading never is).
   A bare number counts only as the whole line: ``1. Networking: ...`` or
   ``1. Option 2: ...`` opens a numbered list (a weak judge answering the
   user's request instead of judging), and reading its 1 as Option 1 would
   inflate the very position bias being measured;
3. the one option the answer names, when it names exactly one
   (``I think Option 3 is the most accurate``).

Options are numbered from 1 in the prompt. ``Option B`` is read as option 2
(letters A-Z count from 1), but only after the word "Option" and in capitals:
a lone letter is too often a word. Text inside ``<think>...</think>`` (the
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
_CLOSE = r"[*_`\"')\]]*"
# "Option 2" or "Option B" (capital letter, after the word only).
_OPTION_REF = r"(?i:option)\s*#?\s*(?:(?P<{g}_letter>[A-Z])|(?P<{g}>\d{{1,2}}))\b"
# A bare "2" counts only where it ends the verdict: "Answer: 3.1 miles" is no verdict.
_BARE_REF = rf"#?(?P<{{g}}_bare>\d{{{{1,2}}}})(?![\d.,]\d){_CLOSE}(?=\s*(?:$|[.,;!]))"
_ANY_REF = rf"(?:{_OPTION_REF}|{_BARE_REF})"
_LABEL = r"\b(?i:(?:final\s+)?(?:selection|answer|choice|verdict|decision|pick|winner))"
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
    ")",
    re.MULTILINE,
)
_FIRST_LINE = re.compile(
    rf"^{_OPEN}(?:{_OPTION_REF.format(g='first')}{_CLOSE}\s*(?:$|[.!](?:\s|$)|[-\u2013\u2014]\s)"
    # A bare number only as the whole line: "1. Networking: ..." is a list, not a verdict.
    rf"|#?(?P<first_bare>\d{{1,2}}){_CLOSE}\s*[.!]?{_CLOSE}\s*$)"
)
_MENTION = re.compile(_OPTION_REF.format(g="mention"))
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

    def parse(self, text: str, n_options: int) -> ChoiceAnswer:
        """Read one answer to a prompt of ``n_options`` options; see the module docstring."""
        answer = _THINKING.sub("", text).strip()
        if not answer:
            return ChoiceAnswer(None)
        verdicts = list(_VERDICT.finditer(answer))
        if verdicts:
            return _answer(_number(verdicts[-1]), n_options, "verdict")
        first_line = answer.splitlines()[0].strip()
        leading = None if first_line.startswith("#") else _FIRST_LINE.match(first_line)
        if leading is not None:
            return _answer(_number(leading), n_options, "first_line")
        named = {_number(match) for match in _MENTION.finditer(answer)}
        if len(named) == 1:
            return _answer(named.pop(), n_options, "only_option")
        return ChoiceAnswer(None)


def _number(match: re.Match[str]) -> int:
    """The 1-based option number a match names, from its digits or its letter."""
    for name, value in match.groupdict().items():
        if value is None:
            continue
        return ord(value) - ord("A") + 1 if name.endswith("_letter") else int(value)
    raise AssertionError("a reference pattern matched without naming an option")


def _answer(number: int, n_options: int, parsed_as: ParsedAs) -> ChoiceAnswer:
    if not 1 <= number <= n_options:
        return ChoiceAnswer(None)
    return ChoiceAnswer(number - 1, parsed_as)
