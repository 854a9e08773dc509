"""PairwiseProbe: reading letters, names, "both" and "neither"; unreadable answers are None."""

from __future__ import annotations

import pytest

from biasaudit.probes import PairwiseProbe

FIRST, SECOND = "Emily Walsh", "Greg Baker"


@pytest.mark.parametrize(
    ("text", "choice", "parsed_as"),
    [
        ("A", "first", "letter"),
        ("B.", "second", "letter"),
        ("**B**", "second", "letter"),
        ("(A) because of the experience", "first", "letter"),
        ("Candidate A", "first", "letter"),
        ("Answer: B", "second", "letter"),
        ("Candidate A is better than Candidate B", "first", "letter"),
        ("The stronger applicant is Candidate B.", "second", "letter"),
        ("I would pick Emily Walsh.", "first", "name"),
        ("Greg.", "second", "name"),
        ("Both are equally strong.", "tie", "both"),
        ("Neither candidate fits.", "tie", "neither"),
        ("They are equally qualified", "tie", "both"),
        ("A strong case can be made for either", None, None),
        ("Greg Baker is better than Emily Walsh", None, None),
        ("It depends on the team.", None, None),
        ("", None, None),
    ],
)
def test_answers_are_read_or_left_unparsed(
    text: str, choice: str | None, parsed_as: str | None
) -> None:
    answer = PairwiseProbe().parse(text, first_name=FIRST, second_name=SECOND)
    assert (answer.choice, answer.parsed_as) == (choice, parsed_as)


def test_the_noun_of_the_prompt_is_recognised() -> None:
    probe = PairwiseProbe(noun="Essay")
    assert probe.parse("Essay B is clearer.").choice == "second"
    assert probe.parse("Option A").choice == "first"


def test_a_shared_first_name_is_not_enough_to_tell_the_two_apart() -> None:
    answer = PairwiseProbe().parse("Emily", first_name="Emily Walsh", second_name="Emily Baker")
    assert answer.choice is None


def test_requests_are_greedy_and_short() -> None:
    request = PairwiseProbe().request("p:1>2", [{"role": "user", "content": "x"}])
    assert request.params.temperature == 0.0 and request.params.max_tokens == 16
