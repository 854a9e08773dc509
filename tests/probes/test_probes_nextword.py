"""Next-word shares (variants merged, coverage and bounds) and replicate requests."""

from __future__ import annotations

import math

import pytest

from biasaudit.errors import UsageError
from biasaudit.probes import FEMALE_WORDS, MALE_WORDS, GenerationProbe, NextWordProbe
from biasaudit.probes._generation import replicate_seed
from biasaudit.providers import Capabilities, FirstTokenLogprobs, ModelResponse
from biasaudit.providers._types import EchoedToken

NO_LOGPROBS = Capabilities(logprobs=False, max_top_logprobs=0)


def response(top: dict[str, float]) -> ModelResponse:
    entry = FirstTokenLogprobs(
        token=next(iter(top)), top=tuple((t, math.log(p)) for t, p in top.items())
    )
    return ModelResponse(texts=(next(iter(top)),), logprobs=(entry,))


def test_the_word_lists_are_the_papers() -> None:
    assert len(MALE_WORDS) == len(FEMALE_WORDS) == 11
    assert {"he", "his", "him", "himself", "himselves", "boy", "boys"} <= set(MALE_WORDS)
    assert {"she", "hers", "her", "herself", "herselves", "girl", "girls"} <= set(FEMALE_WORDS)


def test_spelling_variants_are_merged_and_other_words_ignored() -> None:
    probe = NextWordProbe("completions")
    top = {" a": 0.4, " he": 0.2, "He": 0.05, "Ġhis": 0.05, " she": 0.1, "▁Her": 0.1, " the": 0.1}
    shares = probe.read(response(top))
    assert shares.male == pytest.approx(0.3) and shares.female == pytest.approx(0.2)
    assert shares.p_male == pytest.approx(0.6)
    assert shares.top_mass == pytest.approx(1.0) and shares.coverage == pytest.approx(1.0)
    assert shares.bounds == pytest.approx((0.6, 0.6))
    assert "he" not in shares.missing and "boys" in shares.missing


def test_unseen_mass_bounds_the_share_and_sets_the_coverage() -> None:
    # M = 0.2, F = 0.1 seen; the alternatives hold 0.7 of the distribution, U = 0.3.
    shares = NextWordProbe("chat").read(response({"a": 0.4, "he": 0.2, "she": 0.1}))
    assert shares.unseen == pytest.approx(0.3)
    assert shares.coverage == pytest.approx(0.3 / 0.6)
    low, high = shares.bounds or (0.0, 0.0)
    assert (low, high) == pytest.approx((0.2 / 0.6, 0.5 / 0.6))
    assert low < shares.p_male < high  # type: ignore[operator]


def test_no_listed_word_among_the_alternatives_gives_no_share() -> None:
    shares = NextWordProbe("completions").read(response({" a": 0.6, " the": 0.2}))
    assert shares.p_male is None and shares.bounds is None and shares.coverage == 0.0
    assert len(shares.missing) == 22


def test_a_sampled_text_is_read_by_its_first_word() -> None:
    assert NextWordProbe.sampled_gender(' "She was') == "female"
    assert NextWordProbe.sampled_gender("HIS own") == "male"
    assert NextWordProbe.sampled_gender("shepherd") is None
    assert NextWordProbe.sampled_gender("a he") is None


@pytest.mark.parametrize(
    ("capabilities", "choice", "path"),
    [
        (Capabilities(), "auto", "completions"),
        (Capabilities(completions=False), "auto", "chat"),
        (NO_LOGPROBS, "auto", "samples"),
        (Capabilities(), "chat", "chat"),
        (Capabilities(), "samples", "samples"),
        (Capabilities(echo=True), "auto", "continuation"),
        (Capabilities(echo=True, completions=False), "auto", "chat"),
        (Capabilities(echo=True), "completions", "completions"),
        (Capabilities(), "continuation", "continuation"),
    ],
)
def test_the_path_follows_the_endpoint(capabilities: Capabilities, choice: str, path: str) -> None:
    probe = NextWordProbe.for_endpoint(capabilities, choice=choice)  # type: ignore[arg-type]
    assert probe.path == path


def test_a_path_the_endpoint_lacks_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--next-word samples"):
        NextWordProbe.for_endpoint(NO_LOGPROBS, choice="completions")
    with pytest.raises(UsageError, match="no legacy completions"):
        NextWordProbe.for_endpoint(Capabilities(completions=False), choice="completions")


def test_next_word_requests() -> None:
    [completion] = NextWordProbe.for_endpoint(Capabilities(max_top_logprobs=5)).requests(
        "standard/nurse", "The nurse is"
    )
    assert completion.prompt == "The nurse is"
    assert completion.params.top_logprobs == 5 and completion.params.max_tokens == 1
    [chat] = NextWordProbe("chat").requests("standard/nurse", "The nurse is")
    assert chat.messages and chat.messages[-1]["content"].endswith("\n\nThe nurse is")
    sampled = NextWordProbe.for_endpoint(NO_LOGPROBS, replicates=30, seed=1).requests("s", "x")
    assert [r.params.n for r in sampled] == [30] and not sampled[0].params.wants_logprobs


def test_replicates_are_one_request_with_n_where_the_endpoint_takes_n() -> None:
    probe = GenerationProbe.for_endpoint(Capabilities(), max_tokens=100, replicates=300, seed=7)
    requests = probe.requests("esl/0/nurse", ({"role": "user", "content": "Write."},))
    assert [(r.replicate, r.params.n) for r in requests] == [(0, 128), (1, 128), (2, 44)]
    assert [probe.first_replicate(r) for r in requests] == [0, 128, 256]
    assert [r.params.seed for r in requests] == [replicate_seed(7, k) for k in range(3)]
    assert len({r.params.seed for r in requests}) == 3


def test_replicates_are_separate_cached_requests_where_the_endpoint_lacks_n() -> None:
    capabilities = Capabilities(n=False, seed=False)
    probe = GenerationProbe.for_endpoint(capabilities, max_tokens=150, replicates=4, seed=7)
    requests = probe.requests("personas/0/nurse", ({"role": "user", "content": "Write."},))
    assert [(r.replicate, r.params.n, r.params.seed) for r in requests] == [
        (k, None, None) for k in range(4)
    ]
    keys = {r.cache_key(provider="p", model="m", base_url=None) for r in requests}
    assert len(keys) == 4  # the replicate index is in the key
    assert requests[0].params.max_tokens == 150 and requests[0].params.temperature == 1.0


def echoed(*tokens: tuple[str, float | None]) -> ModelResponse:
    found, offset = [], 0
    for token, logprob in tokens:
        found.append(EchoedToken(token=token, logprob=logprob, offset=offset))
        offset += len(token)
    return ModelResponse(texts=("",), echoed=tuple(found))


def test_a_continuation_is_scored_by_the_sum_of_its_tokens_logprobs() -> None:
    text = "The nurse is"
    whole = echoed(("The", None), (" nurse", -7.0), (" is", -2.0), (" she", -1.5))
    assert NextWordProbe.continuation_logprob(whole, text, "she") == pytest.approx(-1.5)
    split = echoed(("The", None), (" nurse", -7.0), (" is", -2.0), (" masc", -3.0), ("uline", -0.5))
    assert NextWordProbe.continuation_logprob(split, text, "masculine") == pytest.approx(-3.5)
    # A token that runs across the end of the text: the word's own probability is lost.
    merged = echoed(("The", None), (" nurse", -7.0), (" i", -2.0), ("s she", -1.0))
    assert NextWordProbe.continuation_logprob(merged, text, "she") is None
    assert NextWordProbe.continuation_logprob(echoed(("The", None)), text, "she") is None


def test_continuation_requests_ask_for_every_listed_word_echoed() -> None:
    requests = NextWordProbe("continuation").requests("standard/nurse", "The nurse is")
    assert [r.id for r in requests] == [f"standard/nurse|{w}" for w in MALE_WORDS + FEMALE_WORDS]
    assert requests[0].prompt == "The nurse is male" and requests[0].params.echo
    assert requests[0].params.max_tokens == 1 and NextWordProbe.word_of(requests[-1].id) == "girls"
    shares = NextWordProbe.continuation_shares({"he": math.log(0.2), "she": math.log(0.6)})
    assert shares.p_male == pytest.approx(0.25) and shares.coverage == 1.0
    assert shares.bounds == pytest.approx((0.25, 0.25)) and "him" in shares.missing
