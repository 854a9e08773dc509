"""PointwiseProbe: label probabilities from first-token logprobs or from sampled answers."""

from __future__ import annotations

import math

import pytest

from biasaudit.errors import UsageError
from biasaudit.probes import PointwiseProbe
from biasaudit.providers import Capabilities, FirstTokenLogprobs, ModelResponse

YES_NO = {"Yes": 1.0, "No": 0.0}


def logprob_response(token: str, top: dict[str, float]) -> ModelResponse:
    entry = FirstTokenLogprobs(token=token, top=tuple((t, math.log(p)) for t, p in top.items()))
    return ModelResponse(texts=(token,), logprobs=(entry,))


def test_tokenisation_variants_are_merged_and_normalised_over_the_labels() -> None:
    probe = PointwiseProbe(YES_NO)
    # 0.5 + 0.1 + 0.05 on Yes, 0.2 + 0.05 on No, 0.1 on neither.
    response = logprob_response(
        "Yes", {"Yes": 0.5, "No": 0.2, " Yes": 0.1, "yes": 0.05, " no": 0.05, "Maybe": 0.1}
    )
    score = probe.parse(response)
    assert score.path == "logprobs" and score.n == 1 and score.irregular == 0
    assert score.label_mass == pytest.approx(0.9)
    assert score.probabilities == pytest.approx({"Yes": 0.65 / 0.9, "No": 0.25 / 0.9})
    assert score.score == pytest.approx(0.65 / 0.9)


def test_rating_labels_give_the_expected_value() -> None:
    probe = PointwiseProbe({str(k): float(k) for k in range(1, 6)})
    response = logprob_response("4", {"4": 0.5, " 3": 0.25, "5.": 0.25})
    assert probe.parse(response).score == pytest.approx(0.5 * 4 + 0.25 * 3 + 0.25 * 5)


def test_first_token_outside_the_labels_is_irregular_but_still_scored() -> None:
    probe = PointwiseProbe(YES_NO)
    score = probe.parse(logprob_response("I", {"I": 0.7, "Yes": 0.2, "No": 0.1}))
    assert score.irregular == 1 and score.answer == "I"
    assert score.score == pytest.approx(2 / 3)


def test_no_probability_on_any_label_leaves_the_item_unscored() -> None:
    probe = PointwiseProbe(YES_NO)
    score = probe.parse(logprob_response("Sorry", {"Sorry": 0.9, "I": 0.1}))
    assert math.isnan(score.score) and not score.scored and score.irregular == 1
    assert score.probabilities == {}


def test_samples_count_labels_and_irregular_answers() -> None:
    probe = PointwiseProbe(YES_NO, path="samples", samples=5)
    texts = ("Yes", "yes.", "No", "**Yes**, because", "Perhaps")
    score = probe.parse(ModelResponse(texts=texts))
    assert score.path == "samples" and score.n == 4 and score.irregular == 1
    assert score.score == pytest.approx(3 / 4) and score.answer == "Yes"


def test_all_samples_irregular_is_unscored_not_an_error() -> None:
    probe = PointwiseProbe(YES_NO, path="samples", samples=3)
    score = probe.parse(ModelResponse(texts=("Hmm", "Unsure", "")))
    assert math.isnan(score.score) and score.irregular == 3 and score.n == 0


@pytest.mark.parametrize(
    ("capabilities", "scoring", "path"),
    [
        (Capabilities(), "auto", "logprobs"),
        (Capabilities(logprobs=None, max_top_logprobs=None), "auto", "logprobs"),
        (Capabilities(logprobs=False, max_top_logprobs=0, n=False), "auto", "samples"),
        (Capabilities(), "samples", "samples"),
    ],
)
def test_path_follows_the_endpoint(capabilities: Capabilities, scoring: str, path: str) -> None:
    probe = PointwiseProbe.for_endpoint(YES_NO, capabilities, scoring=scoring)  # type: ignore[arg-type]
    assert probe.path == path
    params = probe.request("c1", [{"role": "user", "content": "x"}]).params
    assert params.wants_logprobs == (path == "logprobs")
    assert params.n == (20 if path == "samples" else None)


def test_asking_for_logprobs_from_an_endpoint_without_them_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--scoring samples"):
        PointwiseProbe.for_endpoint(YES_NO, Capabilities(logprobs=False), scoring="logprobs")


def test_top_logprobs_covers_three_spellings_per_label_within_the_endpoint_cap() -> None:
    ratings = {str(k): float(k) for k in range(1, 6)}
    assert PointwiseProbe.for_endpoint(YES_NO, Capabilities()).params.top_logprobs == 10
    assert PointwiseProbe.for_endpoint(ratings, Capabilities()).params.top_logprobs == 15
    capped = PointwiseProbe.for_endpoint(ratings, Capabilities(max_top_logprobs=5))
    assert capped.params.top_logprobs == 5
    asked = PointwiseProbe.for_endpoint(YES_NO, Capabilities(), top_logprobs=20)
    assert asked.params.top_logprobs == 20


def test_labels_that_collide_after_normalising_are_rejected() -> None:
    with pytest.raises(UsageError, match="differ only in case"):
        PointwiseProbe({"Yes": 1.0, "yes": 0.0})
