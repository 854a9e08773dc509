"""The Grade Score task: items files, the demo items, judge prompts, the random option."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from biasaudit.errors import InputError, UsageError
from biasaudit.kinds.grade_score.spec import GradeScoreSpec
from biasaudit.kinds.grade_score.task import (
    DEMO_ITEMS,
    GradeScorePlan,
    build_grade_score_task,
    load_choice_prompt,
    read_items,
    with_random_options,
)
from biasaudit.probes import ChoiceProbe, option_orders


def write_items(tmp_path: Path, *lines: Any) -> Path:
    path = tmp_path / "items.jsonl"
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    )
    return path


ITEM = {"id": "q1", "prompt": "Capital of France?", "options": ["Paris", "Lyon", "Nice"]}


def test_the_demo_items_are_sixteen_items_of_four_options_each_with_a_preferred_one() -> None:
    items = read_items(DEMO_ITEMS)
    assert len(items) == 16 and {item.n_options for item in items} == {4}
    assert all(item.preferred is not None for item in items)
    assert sum(item.ranks is not None for item in items) == 2
    assert len({item.preferred for item in items}) == 4  # people's choice sits in every slot


def test_ids_may_be_numbers_and_ranks_give_the_preferred_option(tmp_path: Path) -> None:
    path = write_items(
        tmp_path,
        {**ITEM, "id": 7, "ranks": [1, 3, 2]},
        {**ITEM, "id": "q2", "ranks": [2, 2, 1], "source": "kept out"},
        {**ITEM, "id": "q3", "ranks": [1, 1, 2]},
    )
    items = read_items(path)
    assert [item.id for item in items] == ["7", "q2", "q3"]
    assert [item.preferred for item in items] == [0, 2, None]  # a tie for first names none


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{not json", "line 2: not valid JSON"),
        ("[1, 2]", "line 2: each line must be a JSON object"),
        ({"id": "q2", "options": ["a", "b", "c"]}, "line 2, field 'prompt': required"),
        (
            {**ITEM, "id": "q2", "options": ["a"]},
            "line 2, field 'options': List should have at least 2 items",
        ),
        (
            {**ITEM, "id": "q2", "options": ["a", " ", "c"]},
            "line 2, field 'options': option 1 is empty",
        ),
        (
            {**ITEM, "id": "q2", "preferred": 3},
            "line 2, field 'preferred': must be an index into options, 0 to 2",
        ),
        (
            {**ITEM, "id": "q2", "preferred": "Paris"},
            "line 2, field 'preferred': Input should be a valid integer",
        ),
        (
            {**ITEM, "id": "q2", "ranks": [1, 2]},
            "line 2, field 'ranks': must give each of the 3 options a rank from 1",
        ),
        (
            {**ITEM, "id": "q2", "ranks": [2, 1, 3], "preferred": 0},
            "line 2, field 'preferred': is not an option that ranks puts first",
        ),
        (
            {**ITEM, "id": "q2", "prefered": 0},
            "line 2, field 'prefered': unknown field; did you mean 'preferred'?",
        ),
        (
            {**ITEM, "id": "q2", "option": ["a", "b", "c"]},
            "line 2, field 'option': unknown field; did you mean 'options'?",
        ),
        (ITEM, "line 2, field 'id': 'q1' already appears on line 1"),
        (
            {**ITEM, "id": "q2", "options": ["a", "b"]},
            "line 2, field 'options': 2 options, but the first item has 3",
        ),
    ],
)
def test_a_bad_item_is_named_by_line_and_field(tmp_path: Path, line: Any, expected: str) -> None:
    path = write_items(tmp_path, ITEM, line)
    with pytest.raises(InputError) as raised:
        read_items(path)
    assert str(raised.value).startswith(f"{path}, {expected}")


def test_an_empty_or_missing_items_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="holds no items"):
        read_items(write_items(tmp_path, ""))
    with pytest.raises(UsageError, match="cannot read items"):
        read_items(tmp_path / "nowhere.jsonl")


def test_the_random_option_comes_from_another_item_and_follows_the_seed() -> None:
    items = read_items(DEMO_ITEMS)
    drawn = with_random_options(items, seed=3)
    assert drawn == with_random_options(items, seed=3) != with_random_options(items, seed=4)
    by_id = {item.id: item for item in items}
    for before, after in zip(items, drawn, strict=True):
        assert after.options[:-1] == before.options and after.random_index == 4
        assert after.random_source != before.id
        assert after.options[-1] in by_id[str(after.random_source)].options
        assert after.preferred == before.preferred
    with pytest.raises(UsageError, match="at least two items"):
        with_random_options(items[:1], seed=0)


def test_the_shipped_prompts_load_with_the_room_their_reasoning_needs() -> None:
    prompts = {key: load_choice_prompt(key) for key in "1234"}
    assert prompts["1"].description == "select, then explain"
    assert prompts["2"].max_tokens >= 500 and prompts["4"].max_tokens >= 500
    assert prompts["3"].max_tokens <= 64
    assert "position" in prompts["3"].template.system or "order" in prompts["3"].template.system
    assert "0" in prompts["4"].template.user and "5" in prompts["4"].template.user


def test_a_prompt_file_of_your_own_works_and_a_bad_one_is_named(tmp_path: Path) -> None:
    path = tmp_path / "judge.yaml"
    path.write_text(
        "max_tokens: 50\nsystem: Judge {n_options} answers.\n"
        "candidate: 'Option {number}: {text}'\nuser: '{prompt}\n\n{options}\n\nBest?'\n"
    )
    prompt = load_choice_prompt(str(path))
    assert (prompt.name, prompt.max_tokens, prompt.description) == (
        str(path),
        50,
        "from judge.yaml",
    )
    path.write_text("system: x\ncandidate: '{number} {text}'\nuser: '{question} {options}'\n")
    with pytest.raises(UsageError, match=r"field 'user': unknown placeholder \{question\}"):
        load_choice_prompt(str(path))
    path.write_text("system: x\nuser: '{options}'\n")
    with pytest.raises(UsageError, match="field 'candidate': required"):
        load_choice_prompt(str(path))
    with pytest.raises(UsageError, match=r"cannot read prompt 5.*shipped prompts are 1, 2, 3, 4"):
        load_choice_prompt("5")


def test_the_plan_asks_every_order_of_every_item_and_maps_slots_back(tmp_path: Path) -> None:
    spec = GradeScoreSpec.model_validate(
        {"task": "grade-score", "model": "sim/fair", "items": str(write_items(tmp_path, ITEM))}
    )
    task = build_grade_score_task(spec)
    plan = GradeScorePlan(task, ChoiceProbe(replicates=2))
    assert [(r.id, r.replicate) for r in plan.requests] == [
        (f"q1#{k}", rep) for k in (1, 2, 3) for rep in (0, 1)
    ]
    messages = plan.requests[2].messages
    assert messages is not None
    user = messages[1]["content"]  # order 2: options 1, 2, 0
    assert (
        user.index("Option 1:\nLyon")
        < user.index("Option 2:\nNice")
        < user.index("Option 3:\nParis")
    )
    assert plan.orders == option_orders(3)
