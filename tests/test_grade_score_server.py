"""Grade Score over the wire: a loopback OpenAI-compatible judge answering in the formats real models use."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from biasaudit.kinds.grade_score.run import GradeScoreResult, run as grade_audit
from biasaudit.kinds.grade_score.spec import GradeScoreSpec
from tests.servers import Choice, OpenAIServer, request_key

GOOD = "the right answer"
ITEMS = [
    {
        "id": "bold",
        "prompt": "Question one?",
        "options": [GOOD, "a wrong answer", "off topic"],
        "preferred": 0,
    },
    {
        "id": "reasoned",
        "prompt": "Question two?",
        "options": ["a wrong answer", GOOD, "off topic"],
        "preferred": 1,
    },
    {
        "id": "chosen",
        "prompt": "Question three?",
        "options": ["off topic", "a wrong answer", GOOD],
        "preferred": 2,
    },
    {
        "id": "first",
        "prompt": "Question four?",
        "options": [GOOD, "off topic", "a wrong answer"],
        "ranks": [1, 3, 2],
    },
    {
        "id": "undecided",
        "prompt": "Question five?",
        "options": ["off topic", GOOD, "a wrong answer"],
    },
]
OPTION = re.compile(r"^Option (\d):\n(.*)$", re.MULTILINE)


def judge(body: dict[str, Any], path: str) -> list[Choice]:
    """Finds the right answer wherever it stands, and says so in the item's own style."""
    prompt = request_key(body, path)
    slots = {text.strip(): int(number) for number, text in OPTION.findall(prompt)}
    best = slots[GOOD]
    if "Question one?" in prompt:
        return [Choice(f"**Option {best}**\nIt is the only correct one.")]
    if "Question two?" in prompt:
        notes = "\n".join(
            f"Option {k}: {'correct' if k == best else 'wrong'}." for k in sorted(slots.values())
        )
        return [Choice(f"{notes}\n\nSelection: Option {best}")]
    if "Question three?" in prompt:
        return [Choice(f"I choose option {best}.")]
    if "Question four?" in prompt:
        return [Choice("Option 1")]  # a judge that always takes the first
    return [Choice("They all have merit; I cannot decide.")]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(responder=judge) as srv:
        yield srv


def run(server: OpenAIServer, tmp_path: Path, **fields: Any) -> GradeScoreResult:
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    spec = GradeScoreSpec.model_validate(
        {"task": "grade-score", "model": "vllm/judge", "base_url": server.base_url,
         "items": str(items), "runs_dir": str(tmp_path / "runs"), "concurrency": 4, **fields}
    )  # fmt: skip
    return grade_audit(spec)


def test_a_judge_over_the_wire_is_read_in_every_format_and_a_rerun_costs_nothing(
    server: OpenAIServer, tmp_path: Path
) -> None:
    first = run(server, tmp_path, prompt=2)
    assert server.request_count == 5 * 3 and first.exit_code == 0
    body = server.bodies()[0]
    assert body["temperature"] == 0.3 and body["max_tokens"] == 800  # room for prompt 2's reasoning
    assert (
        body["messages"][0]["role"] == "system"
        and "Selection: Option N" in body["messages"][1]["content"]
    )
    m = first.metrics
    assert not m.simulated and m.model == "vllm/judge"
    assert (m.items, m.items_total, m.usable, m.unparsed, m.failed) == (4, 5, 12, 3, 0)
    items = first.items.set_index("item_id")
    for item in ("bold", "reasoned", "chosen"):
        assert (items.loc[item, "grade"], items.loc[item, "entropy"]) == (1.0, 1.0), item
    assert items.loc["first", "entropy"] == 0.0 and items.loc["first", "pos_1"] == 3
    assert items.loc["undecided", "unparsed"] == 3 and pd.isna(items.loc["undecided", "grade"])
    assert m.grade_score == pytest.approx(0.75) and m.entropy == pytest.approx(0.75)
    assert m.agreement is not None and m.agreement.items == 4
    assert m.agreement.rate == pytest.approx((1 + 1 + 1 + 1 / 3) / 4)
    assert m.notes[0] == "1 item(s) without a usable answer, left out of the means: undecided"

    second = run(server, tmp_path, prompt=2)
    assert server.request_count == 5 * 3  # nothing new reached the server
    assert second.metrics.requests.cache_hits == 15 and second.metrics.requests.sent == 0
    assert second.metrics.grade_score == m.grade_score


def test_each_replicate_is_its_own_request(server: OpenAIServer, tmp_path: Path) -> None:
    result = run(server, tmp_path, replicates=2, temperature=0.7)
    assert server.request_count == 5 * 3 * 2 and result.metrics.trials == 30
    assert {body["temperature"] for body in server.bodies()} == {0.7}
    assert {body["max_tokens"] for body in server.bodies()} == {200}
