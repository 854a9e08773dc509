"""The pairwise probe: which of two items is better, asked in both orders.

Every pair (a, b) of a pool is asked twice, with a shown first and with b
shown first (pairwise ranking prompting: Qin et al., "Large Language Models
are Effective Text Rankers with Pairwise Ranking Prompting", Findings of
NAACL 2024, as used by Chen, Ji & Evans, "The Mismeasure of Man and Models",
2024). This module asks and parses; scoring the parsed answers is
:func:`biasaudit.metrics.pairwise_ranking_scores`.

An answer is read, in this order, as

1. a letter: the whole answer is ``A`` or ``B``, or it opens with one
   (``"B."``, ``"A) ..."``, ``"**A**"``, ``"Candidate B"``, ``"Answer: A"``);
2. a tie, when it opens with "both" or "neither";
3. the one item it names: ``"<noun> A"`` / ``"<noun> B"`` or an item's name
   (full or first name), when it names exactly one of the two;
4. a tie, when it says "both", "neither", "equally" or "tie" anywhere;
5. otherwise unparseable (``choice`` None), which is counted, never an error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from biasaudit.providers import ModelRequest, SamplingParams

__all__ = ["PairwiseAnswer", "PairwiseProbe"]

PairwiseChoice = Literal["first", "second", "tie"]
ParsedAs = Literal["letter", "name", "both", "neither"]

_MAX_TOKENS = 16
_MARKUP = "*_`\"' \t\n#>"
_LEAD_WORDS = "answer|option|choice|response"
# A bare letter must end the answer or be followed by punctuation: "A strong case" is no verdict.
_BARE_LETTER = re.compile(r"^\(?([AB])\)?(?:$|[.,:;)!\n])")
_OPENS_WITH_TIE = re.compile(r"^(both|neither)\b", re.IGNORECASE)
_TIE_ANYWHERE = re.compile(r"\b(both|neither|equally|tie)\b", re.IGNORECASE)


@dataclass(frozen=True)
class PairwiseAnswer:
    """One parsed pairwise answer.

    Attributes
    ----------
    choice:
        ``"first"`` (the item shown first), ``"second"``, ``"tie"``, or None
        when the answer could not be read.
    parsed_as:
        What decided it: ``"letter"``, ``"name"``, ``"both"`` or ``"neither"``.
    """

    choice: PairwiseChoice | None
    parsed_as: ParsedAs | None = None


class PairwiseProbe:
    """Asks which of two items is better and parses the answer; see the module docstring.

    Parameters
    ----------
    noun:
        How the prompt labels the items (``"Candidate"`` for ``Candidate A`` /
        ``Candidate B``, ``"Essay"``); recognised in answers.
    max_tokens:
        Longest answer asked for; the prompt asks for a letter only.
    """

    kind = "pairwise"

    def __init__(self, *, noun: str = "Candidate", max_tokens: int = _MAX_TOKENS) -> None:
        self.noun = noun
        self.max_tokens = max_tokens
        words = f"{re.escape(noun)}|{_LEAD_WORDS}"
        self._leading_letter = re.compile(rf"^(?i:{words})\s*[:\-]?\s*\(?([AB])\)?(?![\w'])")
        self._named_letter = re.compile(rf"\b(?i:{re.escape(noun)})\s+([AB])\b")

    @property
    def params(self) -> SamplingParams:
        """Greedy decoding: one deterministic verdict per order."""
        return SamplingParams(max_tokens=self.max_tokens, temperature=0.0)

    def request(self, request_id: str, messages: Sequence[dict[str, Any]]) -> ModelRequest:
        """The request for one ordered pair."""
        return ModelRequest(id=request_id, messages=tuple(messages), params=self.params)

    def parse(
        self, text: str, *, first_name: str | None = None, second_name: str | None = None
    ) -> PairwiseAnswer:
        """Read one answer; names (when the items have them) are matched too."""
        answer = text.strip(_MARKUP)
        letter = self._leading_letter.match(answer) or _BARE_LETTER.match(answer)
        if letter:
            return PairwiseAnswer(_side(letter.group(1)), "letter")
        opening = _OPENS_WITH_TIE.match(answer)
        if opening:
            return PairwiseAnswer("tie", _tie_kind(opening.group(1)))
        named = self._sides_named(answer, first_name, second_name)
        if len(named) == 1:
            side, how = named.popitem()
            return PairwiseAnswer(side, how)
        tie = _TIE_ANYWHERE.search(answer)
        if tie:
            return PairwiseAnswer("tie", _tie_kind(tie.group(1)))
        return PairwiseAnswer(None)

    def _sides_named(
        self, answer: str, first_name: str | None, second_name: str | None
    ) -> dict[PairwiseChoice, ParsedAs]:
        sides: dict[PairwiseChoice, ParsedAs] = {}
        for match in self._named_letter.finditer(answer):
            sides[_side(match.group(1))] = "letter"
        items: tuple[tuple[PairwiseChoice, str | None, str | None], ...] = (
            ("first", first_name, second_name),
            ("second", second_name, first_name),
        )
        for side, name, other in items:
            if name and _mentions(answer, name, other=other):
                sides.setdefault(side, "name")
        return sides


def _side(letter: str) -> PairwiseChoice:
    return "first" if letter.upper() == "A" else "second"


def _tie_kind(word: str) -> ParsedAs:
    return "neither" if word.lower() == "neither" else "both"


def _mentions(answer: str, name: str, *, other: str | None) -> bool:
    """Whether the answer names ``name`` by full name, or by a first name ``other`` lacks."""
    if re.search(rf"\b{re.escape(name)}\b", answer):
        return True
    first = name.split()[0]
    other_first = other.split()[0] if other else None
    return first != other_first and re.search(rf"\b{re.escape(first)}\b", answer) is not None
