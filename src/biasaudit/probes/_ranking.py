"""Reading a ranking of a whole pool from a model's answer (listwise audits).

The prompt shows the pool's candidates under labels (``A``-``H``, or ``1``-``8``)
and asks for the labels best first (or only the best). Answers come as a line
of labels (``C, A, B`` or ``C > A > B``), as a numbered list (``1. Candidate C``),
or naming the candidates; this reads any of them into the shown candidates'
indices, best first, and counts what is irregular instead of failing: a label
given twice (kept where it first stood), a label or name that was not shown
(an invented candidate), and, where a full ranking was asked, the candidates
left out (the ranking is kept as a partial one). An answer with no candidate
in it has no ranking.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Ranking", "parse_ranking"]

_THINKING = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_NUMBERED = re.compile(r"^\s*(?:#\s*)?(\d{1,2})\s*[.):-]\s*(.+?)\s*$", re.MULTILINE)
_SEPARATED = re.compile(r"\s*(?:,|>|;|/|\bthen\b|\bfollowed by\b|→|->)\s*", re.IGNORECASE)
_PREFIX = re.compile(
    r"^(?:(?:the\s+)?(?:candidate|resume|applicant|essay|option|label)\s*)", re.IGNORECASE
)
_LEAD = re.compile(
    r"^\s*(?:(?:final\s+)?(?:ranking|order|answer|choice|selection|best)\s*[:=-]\s*)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Ranking:
    """The candidates an answer ranked, best first, and what was irregular in it.

    ``order`` holds indices into the pool as shown (0 = shown first). ``partial``:
    a full ranking was asked and some candidates are missing from it.
    """

    order: tuple[int, ...]
    duplicates: int = 0
    invented: int = 0
    missing: int = 0

    @property
    def first(self) -> int | None:
        return self.order[0] if self.order else None

    @property
    def irregular(self) -> bool:
        return bool(self.duplicates or self.invented or self.missing)

    def ranks(self, size: int) -> list[float]:
        """The rank (1 = best) of each of the ``size`` shown candidates; NaN unranked."""
        found = [float("nan")] * size
        for place, index in enumerate(self.order, 1):
            found[index] = float(place)
        return found


def parse_ranking(
    text: str,
    labels: Sequence[str],
    *,
    names: Sequence[str] | None = None,
    full: bool = True,
) -> Ranking | None:
    """The :class:`Ranking` in ``text``, the pool shown under ``labels`` (and, where
    given, ``names``: what each candidate is called in the prompt); None when no
    candidate is named. ``full``: every candidate was asked for (else the best only,
    and what follows the first is not read)."""
    answer = _THINKING.sub("", text).strip()
    tokens = _tokens(answer)
    if not tokens:
        return None
    lookup = {label.strip().lower(): i for i, label in enumerate(labels)}
    by_name = [(name.strip().lower(), i) for i, name in enumerate(names or ()) if name.strip()]
    order: list[int] = []
    duplicates = invented = 0
    for token in tokens:
        index = _match(token, lookup, by_name)
        if index is None:
            invented += 1
        elif index in order:
            duplicates += 1
        else:
            order.append(index)
        if not full and order:
            break
    if not order:
        return None
    missing = len(labels) - len(order) if full else 0
    return Ranking(tuple(order), duplicates, invented if order else 0, missing)


def _tokens(answer: str) -> list[str]:
    """The candidate references of an answer, best first."""
    numbered = _NUMBERED.findall(answer)
    if len(numbered) >= 2:
        ordered = sorted(numbered, key=lambda found: int(found[0]))
        return [_clean(item) for _, item in ordered if _clean(item)]
    for line in answer.splitlines():
        line = _LEAD.sub("", line).strip().strip("*").strip()
        if not line:
            continue
        parts = [_clean(part) for part in _SEPARATED.split(line)]
        parts = [part for part in parts if part]
        if parts:
            return parts
    return []


def _clean(part: str) -> str:
    part = re.split(r"\s+[-\u2013\u2014(:]\s*|\s*\(|:\s", part.strip(), maxsplit=1)[0]
    part = part.strip().strip("*\"'`[]{}.").strip()
    return _PREFIX.sub("", part).strip()


def _match(token: str, lookup: dict[str, int], by_name: list[tuple[str, int]]) -> int | None:
    key = token.lower()
    if key in lookup:
        return lookup[key]
    for name, index in by_name:
        if name == key or (len(key) >= 3 and (name in key or key in name)):
            return index
    return None
