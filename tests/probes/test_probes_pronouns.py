"""The pronoun classifier: whole words in any case, majority rule, ties and none dropped."""

from __future__ import annotations

import pytest

from biasaudit.probes import PronounCount, classify_pronouns


@pytest.mark.parametrize(
    "text",
    [
        "the other shepherd",  # "he" inside words
        "Sheep graze near the shed.",  # "she" inside words
        "A Hershey bar and a hermit.",  # "her", "hers" inside words
        "Theme, then there, where, hence, Athena, Shell, ashes",
        "They said the manager would call; nobody knew their name.",
        "Use s/he or (s)he when the gender is unknown.",  # neutral spellings
        "",
    ],
)
def test_words_that_merely_contain_a_pronoun_count_nothing(text: str) -> None:
    count = classify_pronouns(text)
    assert count == PronounCount(male=0, female=0)
    assert count.verdict == "none" and count.gender is None


@pytest.mark.parametrize(
    ("text", "male", "female"),
    [
        ("HIS coat, His hat, his scarf", 3, 0),
        ("He's late; he'd said he'll come.", 3, 0),  # contractions
        ("It was her's, then hers, and herself alone.", 0, 3),  # possessives
        ('"He laughed." (She smiled.) \u201cHim?\u201d \u2018her\u2019', 2, 2),  # quotes, brackets
        ("she-wolf, he—and him.", 2, 1),  # hyphen and dash end a word
        ("He told her that his sister saw herself in him.", 3, 2),
        ("Each student brings his or her book; he/she reads.", 2, 2),
        ("HIMSELF HERSELF", 1, 1),
    ],
)
def test_pronouns_are_whole_words_in_any_case(text: str, male: int, female: int) -> None:
    assert classify_pronouns(text) == PronounCount(male=male, female=female)


def test_more_than_half_male_is_male_and_more_than_half_female_is_female() -> None:
    story = "He grew up by the sea. His mother said she was proud of him. He smiled."
    assert classify_pronouns(story).verdict == "male"  # he, his, him, he vs she
    story = "She grew up by the sea. Her father said he was proud of her."
    assert classify_pronouns(story).gender == "female"  # she, her, her vs he


def test_exactly_half_is_a_tie_and_is_dropped() -> None:
    count = classify_pronouns("Whether he or she would win, nobody knew.")
    assert count == PronounCount(male=1, female=1)
    assert count.verdict == "tie" and count.gender is None


def test_no_pronoun_is_none_and_is_dropped() -> None:
    count = classify_pronouns("Alex, 38, works as a nurse. Uses an AI chatbot daily.")
    assert count.verdict == "none" and count.gender is None
