"""The choice probe on a corpus of hand-labelled judge answers of many shapes.

``tests/data/judge_answers.jsonl`` holds one answer per line, written for
these tests: its text, the number of options the judge was shown, the
option a person reads it as choosing (null: no choice can be read), whether
the answer was cut off by the token limit, and its shape (verdict labels,
ordinals, pronouns, praise, first lines, evaluations cut off mid-sentence,
placeholders copied from the prompt, rejections, ties, numbered lists, ...).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from biasaudit.probes import ChoiceProbe

CORPUS = Path(__file__).resolve().parent.parent / "data" / "judge_answers.jsonl"


def corpus() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]


def test_the_corpus_is_large_and_varied() -> None:
    answers = corpus()
    assert len(answers) >= 100
    shapes = Counter(a["shape"].split()[0] for a in answers)
    assert len(shapes) >= 20, shapes
    assert sum(a["expected"] is None for a in answers) >= 30  # many a reader leaves unread
    assert {a["options"] for a in answers} >= {4, 6, 12, 14, 16, 24}


@pytest.mark.parametrize("answer", corpus(), ids=lambda a: f"{a['shape']}: {a['text'][:40]!r}")
def test_each_answer_is_read_as_a_person_reads_it(answer: dict[str, Any]) -> None:
    found = ChoiceProbe().parse(answer["text"], answer["options"], truncated=answer["truncated"])
    assert (None if found.slot is None else found.slot + 1) == answer["expected"]
