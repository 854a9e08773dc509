"""ChoiceProbe: the orders it asks, its requests, and how it reads real judges' answers."""

from __future__ import annotations

import itertools

import pytest

from biasaudit.errors import UsageError
from biasaudit.probes import ChoiceProbe, option_orders

SYSTEM = {"role": "system", "content": "You judge."}
USER = {"role": "user", "content": "Option 1:\nyes\n\nOption 2:\nno\n\nWhich is best?"}


@pytest.mark.parametrize("n", [2, 3, 4, 7, 12])
def test_cyclic_orders_put_each_option_in_each_slot_exactly_once(n: int) -> None:
    orders = option_orders(n, "cyclic")
    assert len(orders) == n and orders[0] == tuple(range(n))
    for slot in range(n):
        assert sorted(order[slot] for order in orders) == list(range(n))
    for order in orders:
        assert sorted(order) == list(range(n))
        assert all(order[s + 1] == (order[s] + 1) % n for s in range(n - 1))  # a rotation


def test_all_orders_are_the_n_factorial_permutations() -> None:
    assert option_orders(3, "all") == list(itertools.permutations(range(3)))
    assert len(option_orders(6, "all")) == 720


def test_all_orders_of_seven_options_are_refused_clearly() -> None:
    with pytest.raises(UsageError, match=r"all 7! = 5,040 orders .* limited to 6 options"):
        option_orders(7, "all")


def test_one_option_is_no_choice() -> None:
    with pytest.raises(UsageError, match="at least 2 options"):
        option_orders(1)


def test_replicates_are_separate_requests_with_separate_cache_keys() -> None:
    probe = ChoiceProbe(replicates=3, temperature=0.3, max_tokens=200)
    requests = probe.requests("q1#2", [SYSTEM, USER])
    assert [r.replicate for r in requests] == [0, 1, 2]
    assert {r.id for r in requests} == {"q1#2"}
    assert requests[0].params.temperature == 0.3 and requests[0].params.max_tokens == 200
    keys = {r.cache_key(provider="sim", model="fair", base_url=None) for r in requests}
    assert len(keys) == 3


def test_the_paper_temperature_is_the_default() -> None:
    assert ChoiceProbe().params.temperature == 0.3


@pytest.mark.parametrize(
    ("replicates", "temperature", "max_tokens", "message"),
    [(0, 0.3, 10, "replicates"), (1, 2.5, 10, "temperature"), (1, 0.3, 0, "max_tokens")],
)
def test_bad_settings_are_usage_errors(
    replicates: int, temperature: float, max_tokens: int, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        ChoiceProbe(replicates=replicates, temperature=temperature, max_tokens=max_tokens)


REASONING = """\
Option 1: Accurate but terse; it skips the why.
Option 2: Wrong: the ocean does not colour the sky.
Option 3: Correct and pitched at a child's level.
Option 4: Off topic.

Selection: Option 3"""

GRADED = """\
Grade for option 1: 2/5, vague.
Grade for option 2: 5/5, clear and correct.
Grade for option 3: 1/5, wrong.
Grade for option 4: 3/5, too technical.

**Selection:** Option 2"""


@pytest.mark.parametrize(
    ("text", "slot", "parsed_as"),
    [
        # A verdict: the last one wins.
        ("Selection: Option 2", 1, "verdict"),
        ("selection: option 2", 1, "verdict"),
        ("**Selection:** Option 3", 2, "verdict"),
        ("**Selection**: **Option 3**", 2, "verdict"),
        ("Final answer: 4", 3, "verdict"),
        ("Final Answer: Option 1.", 0, "verdict"),
        ("Answer: [[2]]", 1, "verdict"),
        ("My choice: `Option 2`", 1, "verdict"),
        ("Verdict = Option 4", 3, "verdict"),
        ("I choose option 2.", 1, "verdict"),
        ("I would pick Option 3 because it is complete.", 2, "verdict"),
        ("I'd go with Option 1.", 0, "verdict"),
        ("I'll select option 4", 3, "verdict"),
        ("After weighing them, I prefer Option 2.", 1, "verdict"),
        ("The best option is Option 2, since it explains why.", 1, "verdict"),
        ("The best response is 3.", 2, "verdict"),
        ("My final pick would be Option 4.", 3, "verdict"),
        ("The answer is Option 1.", 0, "verdict"),
        (REASONING, 2, "verdict"),
        (GRADED, 1, "verdict"),
        ("Option 1 looks good at first.\nOn reflection, Selection: Option 4", 3, "verdict"),
        ("Selection: Option 1\nWait, no. Final answer: Option 2", 1, "verdict"),
        # A first line that is only an option, then an explanation.
        ("Option 2", 1, "first_line"),
        ("**Option 2**", 1, "first_line"),
        ("Option 2.", 1, "first_line"),
        ("Option 3\n\nIt is correct, and Option 1 is not.", 2, "first_line"),
        ("Option 3. It is correct where Option 1 is not.", 2, "first_line"),
        ("Option 4 - the only one that answers the question; Option 2 dodges it.", 3, "first_line"),
        ("2", 1, "first_line"),
        ("2.", 1, "first_line"),
        ("  3  ", 2, "first_line"),
        ("(3)", 2, "first_line"),
        ("[[4]]", 3, "first_line"),
        ("`Option 1`", 0, "first_line"),
        ("Option B", 1, "first_line"),
        ("**Option C**\nIt is the clearest.", 2, "first_line"),
        # The one option named.
        ("I think Option 3 is the most accurate.", 2, "verdict"),
        ("Clearly option 4 wins here.", 3, "verdict"),
        ("Option 2 is better than the rest.", 1, "verdict"),
        ("The strongest is Option D.", 3, "only_option"),
        ("<think>Option 1 is wrong, Option 4 too.</think>\nOption 2", 1, "first_line"),
        (
            "<think>\nlet me weigh Option 1 and Option 3\n</think>\n\nSelection: Option 3",
            2,
            "verdict",
        ),
        # Unreadable: counted, never a crash.
        ("Option 1 and Option 3 are equally good.", None, None),
        ("### Option 1\nGood.\n### Option 2\nBad.", None, None),
        ("Option 1: correct. Option 2: wrong.", None, None),
        ("They are all fine.", None, None),
        ("I cannot choose between these.", None, None),
        ("Answer: 3.1 miles is right.", None, None),
        ("the answer is 4", None, None),
        ("Selection: Option 7", None, None),
        ("Option 0", None, None),
        ("Option E", None, None),
        ("0", None, None),
        ("", None, None),
        ("   \n ", None, None),
        ("<think>Option 2 seems best", None, None),
        ("option a is fine", None, None),
        # A weak judge answers the user's request with a numbered list: its "1." is an
        # item number, not a vote for Option 1 (which would inflate position bias).
        ("1. Networking: leverage your connections.\n2. Apply early.", None, None),
        ("1. Start with a budget\n2. Track spending\n3. Save the rest", None, None),
        ("2. Because it is clearer.", None, None),
        ("1. Option 2: it answers the question.", 1, "only_option"),
    ],
)
def test_real_world_answers_are_read_or_left_unparsed(
    text: str, slot: int | None, parsed_as: str | None
) -> None:
    answer = ChoiceProbe().parse(text, 4)
    assert (answer.slot, answer.parsed_as) == (slot, parsed_as)
    assert answer.label == (None if slot is None else f"Option {slot + 1}")
