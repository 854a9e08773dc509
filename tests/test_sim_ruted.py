"""The sim model's documented RUTEd behaviours: planted next words and pronoun-bearing texts."""

from __future__ import annotations

import math

import pytest

from biasaudit.kinds.ruted.sim import (
    NO_PRONOUN_RATE,
    TIE_RATE,
    _occupation_in,
    _user_text,
    planted_male_probability,
)
from biasaudit.kinds.ruted.task import (
    GENERATION_CONTEXTS,
    OCCUPATIONS_PATH,
    ContextPrompts,
    read_occupations,
)
from biasaudit.probes import NextWordProbe, classify_pronouns
from biasaudit.providers import ModelRequest, SamplingParams
from biasaudit.providers.sim import SimProvider

OCCUPATIONS = read_occupations(OCCUPATIONS_PATH)


def test_the_planted_probability_follows_the_documented_formula() -> None:
    nurse, ceo = planted_male_probability("nurse", "esl"), planted_male_probability("CEO", "esl")
    assert nurse < 0.5 < ceo  # stereotype 1.8 outweighs skew 0.6 and the jitter
    assert planted_male_probability("nurse", "esl", 0.0) == 0.5
    assert planted_male_probability("astronaut", "bedtime") == pytest.approx(
        1 / (1 + math.exp(0.4))
    )  # an occupation outside the list: the context's skew alone


@pytest.mark.parametrize("kind", ["completion", "chat"])
def test_next_words_after_the_standard_text_carry_the_planted_share(kind: str) -> None:
    probe = NextWordProbe("completions" if kind == "completion" else "chat")
    [request] = probe.requests("standard/nurse", "The nurse is")
    response = SimProvider().answer(request)
    assert response.simulated and response.logprobs and response.logprobs[0]
    top = response.logprobs[0].top
    assert len(top) == 20 and sum(math.exp(lp) for _, lp in top) == pytest.approx(1.0)
    assert all(token.startswith(" ") == (kind == "completion") for token, _ in top)
    shares = probe.read(response)
    assert shares.p_male == pytest.approx(planted_male_probability("nurse", "standard"))
    assert shares.gendered == pytest.approx(0.2)


@pytest.mark.parametrize("context", GENERATION_CONTEXTS)
def test_every_template_names_only_its_own_occupation(context: str) -> None:
    """The sim reads the occupation off the prompt: no template may name another one."""
    for template in ContextPrompts.load(context).templates:
        for occupation in OCCUPATIONS:
            request = ModelRequest(id="q", messages=template.messages(occupation.fields))
            assert _occupation_in(_user_text(request)) == occupation.name.casefold()


def test_texts_use_pronouns_of_the_planted_gender_and_sometimes_none() -> None:
    [template, *_] = ContextPrompts.load("personas").templates
    ceo = next(o for o in OCCUPATIONS if o.name == "CEO")
    request = ModelRequest(
        id="q",
        messages=template.messages(ceo.fields),
        params=SamplingParams(max_tokens=150, temperature=1.0, n=128, seed=1),
    )
    verdicts = [classify_pronouns(text).verdict for text in SimProvider().answer(request).texts]
    assert len(verdicts) == 128
    dropped = verdicts.count("none") + verdicts.count("tie")
    assert abs(dropped / 128 - (TIE_RATE + NO_PRONOUN_RATE["personas"])) < 0.1
    gendered = verdicts.count("male") + verdicts.count("female")
    assert (
        abs(verdicts.count("male") / gendered - planted_male_probability("CEO", "personas")) < 0.1
    )


def test_a_lean_of_its_own_is_another_model() -> None:
    assert SimProvider("biased", gender_lean=1.0).model_id == "sim/biased"
    assert SimProvider("biased", gender_lean=0.5).model_id == "sim/biased-lean0.5"
    assert SimProvider("fair").setting("gender_lean") == 0.0


def test_other_prompts_are_answered_as_before() -> None:
    request = ModelRequest(
        id="q", messages=({"role": "user", "content": "Is the sky blue? Answer Yes or No."},),
        params=SamplingParams(max_tokens=1, logprobs=True, top_logprobs=5),
    )  # fmt: skip
    assert SimProvider().answer(request).text in ("Yes", "No")
