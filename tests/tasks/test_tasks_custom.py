"""User-defined allocation tasks (``task: allocation``): columns, qualification, prompts, pools."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from biasaudit.errors import UsageError
from biasaudit.kinds.candidates.tasks import build_task
from biasaudit.spec import parse_spec

PROMPT = {"system": "You screen loans.", "user": "{name}: {purpose}. Approve? Answer Yes or No."}


def spec(tmp_path: Path, csv: str, **fields: Any) -> Any:
    path = tmp_path / "candidates.csv"
    path.write_text(csv)
    data = {"task": "allocation", "model": "sim/biased", "candidates": str(path),
            "reference_group": "A", "pointwise": PROMPT, **fields}  # fmt: skip
    return parse_spec(data)


CSV = "name,group,purpose,ok,amount\nAnn,A,a car,yes,10\nBo,B,a roof,no,30\nCy,A,a shop,true,20\nDi,B,a boat,0,40\n"


def test_a_boolean_column_says_who_is_qualified(tmp_path: Path) -> None:
    task = build_task(spec(tmp_path, CSV, qualified="ok", name_column="name"))
    assert [c.qualified for c in task.candidates] == [True, False, True, False]
    assert [c.id for c in task.candidates] == ["c00001", "c00002", "c00003", "c00004"]
    assert task.groups == ("A", "B") and task.candidates[0].name == "Ann"
    assert task.pointwise_messages(task.candidates[1])[1]["content"] == (
        "Bo: a roof. Approve? Answer Yes or No."
    )


def test_a_number_column_at_or_above_a_threshold_or_the_median(tmp_path: Path) -> None:
    at_25 = build_task(spec(tmp_path, CSV, qualified={"column": "amount", "at_least": 25}))
    assert [c.qualified for c in at_25.candidates] == [False, True, False, True]
    median = build_task(spec(tmp_path, CSV, qualified={"column": "amount", "at_least": "median"}))
    assert [c.qualified for c in median.candidates] == [False, True, False, True]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"qualified": "approved"},
            "no column 'approved' (columns: name, group, purpose, ok, amount)",
        ),
        ({"qualified": "purpose"}, "column 'purpose': 'a car' is not true/false"),
        ({"group_column": "team"}, "no column 'team'"),
        ({"pool": {"design": "random"}}, "field 'pool.size': required for random pools"),
        ({"reference_group": "Z"}, "reference group 'Z' is not one of the groups (A, B)"),
        ({"pointwise": {"system": "x", "user": "{colour}"}}, "unknown placeholder {colour}"),
    ],
)
def test_mistakes_are_named(tmp_path: Path, fields: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        build_task(spec(tmp_path, CSV, **fields))


def test_a_method_without_its_prompt_is_named(tmp_path: Path) -> None:
    task = build_task(spec(tmp_path, CSV))
    with pytest.raises(UsageError, match="has no pairwise prompt: add 'pairwise:' to the spec"):
        task.prompt("pairwise")
