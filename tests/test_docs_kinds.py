"""Where a page lists the audit kinds, it lists every one of them: a list of two or more
kinds in parentheses (``(allocation, grade-score, ruted)``) names all five, spelled as
the kinds are (issue: pages listed three or four kinds where five work)."""

from __future__ import annotations

import re
from pathlib import Path

from biasaudit.kinds.registry import KINDS

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SPELLINGS = {"allocation": ("allocation",), "listwise": ("listwise",),
             "grade-score": ("grade-score", "Grade Score"), "ruted": ("ruted", "RUTEd"),
             "decisions": ("decisions",)}  # fmt: skip


def test_the_spellings_cover_every_kind() -> None:
    assert set(SPELLINGS) == set(KINDS)


def test_every_list_of_kinds_names_them_all() -> None:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"\(([^()]{0,200})\)", text):
            inside = match.group(1)
            named = {kind for kind, words in SPELLINGS.items()
                     if any(re.search(rf"\b{re.escape(w)}\b", inside) for w in words)}  # fmt: skip
            if len(named) >= 3 and named != set(KINDS):
                found.append(f"{page.relative_to(ROOT)}: ({inside}) lacks {set(KINDS) - named}")
    assert not found, "\n".join(found)
