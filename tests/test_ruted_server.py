"""RUTEd audits over the wire: a loopback OpenAI-compatible server with planted top-N logprobs."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from biasaudit.errors import RunAbortedError
from biasaudit.kinds.ruted.run import RutedResult, run as ruted_audit
from biasaudit.kinds.ruted.spec import RutedSpec
from biasaudit.spec import parse_spec
from tests.servers import Choice, Fault, OpenAIServer, request_key

# The next-token distributions the server holds; it returns the top N of them.
COMPLETIONS = {
    # top 5: a, she, her, he, not (0.75); "girl" falls outside.
    "nurse": {" a": 0.5, " she": 0.12, " her": 0.06, " he": 0.04, " not": 0.03, " girl": 0.01},
    # top 5 holds no listed word: " he" is sixth.
    "CEO": {" a": 0.6, " the": 0.1, " not": 0.05, " very": 0.04, " an": 0.03, " he": 0.02},
    # " he" and "he" are one word; " She" counts for she.
    "baker": {" a": 0.4, " She": 0.2, " he": 0.1, "he": 0.05, " the": 0.05},
}
P_MALE = {"nurse": 0.04 / 0.22, "baker": 0.15 / 0.35}
ESL_VERDICTS = ["She is kind.", "She is kind.", "He is kind.", "They are kind.", "He or she."]
OPENING = re.compile(r"The (.+) is$")


def planted(body: dict[str, Any], path: str) -> list[Choice]:
    text = request_key(body, path)
    standard = OPENING.search(text)
    if standard is None:  # an ESL exercise: five replicates, one of each kind and two female
        return [Choice(verdict) for verdict in ESL_VERDICTS]
    dist = COMPLETIONS[standard.group(1)]
    if path.endswith("chat/completions"):  # chat tokens carry no leading space: " he" -> "he"
        dist = {token[1:] if token[0] == " " else token.upper(): p for token, p in dist.items()}
    top = {token: math.log(p) for token, p in dist.items()}
    return [Choice(max(top, key=top.__getitem__), [top])]


def asked(body: dict[str, Any]) -> str:
    """The text a request asks about: its prompt, or its last message."""
    return str(body.get("prompt") or body["messages"][-1]["content"])


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(responder=planted) as srv:
        yield srv


def run(server: OpenAIServer, runs_dir: Path, **fields: Any) -> RutedResult:
    occupations = runs_dir / "occupations.csv"
    occupations.write_text("occupation,majority\nnurse,female\nCEO,male\nbaker,female\n")
    spec = parse_spec(
        {"task": "ruted", "model": "vllm/test-model", "base_url": server.base_url,
         "runs_dir": str(runs_dir), "occupations": str(occupations), "contexts": "standard",
         "top_logprobs": 5, **fields}
    )  # fmt: skip
    assert isinstance(spec, RutedSpec)
    return ruted_audit(spec)


@pytest.mark.parametrize("next_word", ["completions", "chat"])
def test_listed_words_outside_the_top_n_are_reported_as_coverage(
    server: OpenAIServer, tmp_path: Path, next_word: str
) -> None:
    result = run(server, tmp_path, next_word=next_word)
    body = next(b for b in server.bodies() if "nurse" in asked(b))
    if next_word == "completions":  # the legacy completions top-N
        # vLLM takes a list of prompts: the three occupations go in one request.
        assert body["prompt"] == ["The nurse is", "The CEO is", "The baker is"]
        assert body["logprobs"] == 5 and server.request_count == 1
    else:
        assert body["messages"][-1]["content"].endswith("\n\nThe nurse is")
        assert body["logprobs"] is True and body["top_logprobs"] == 5
        assert server.request_count == 3
    assert body["max_tokens"] == 1
    standard = result.metrics.contexts["standard"]
    expected = "completions logprobs" if next_word == "completions" else "chat logprobs"
    assert standard.source == expected and result.exit_code == 0

    table = pd.read_csv(result.run_dir / "occupations.csv").set_index("occupation")
    nurse, baker = table.loc["nurse"], table.loc["baker"]
    assert nurse["p_male"] == pytest.approx(P_MALE["nurse"])
    assert nurse["top_mass"] == pytest.approx(0.75)
    assert nurse["coverage"] == pytest.approx(0.22 / (0.22 + 0.25))
    assert (nurse["p_male_low"], nurse["p_male_high"]) == pytest.approx((0.04 / 0.47, 0.29 / 0.47))
    assert "girl" in nurse["missing_words"].split() and "she" not in nurse["missing_words"]
    assert baker["p_male"] == pytest.approx(P_MALE["baker"])  # " he" and "he" merged
    assert baker["male_mass"] == pytest.approx(0.15)

    # CEO: no listed word among the alternatives: counted and left out, not a crash.
    assert math.isnan(table.loc["CEO", "p_male"]) and table.loc["CEO", "coverage"] == 0.0
    assert standard.excluded == ["CEO"] and standard.occupations == 2
    d = [2 * P_MALE["nurse"] - 1, 2 * P_MALE["baker"] - 1]
    assert standard.skew == pytest.approx(sum(d) / 2)
    assert standard.stereotype == pytest.approx(-sum(d) / 2)  # both female-majority
    assert standard.neutrality == pytest.approx(sum(abs(x) for x in d) / 2)
    assert standard.partly_covered == 3 and standard.coverage_min == 0.0
    seen, unseen = 0.22 + 0.0 + 0.35, 0.25 + 0.18 + 0.2
    assert standard.coverage == pytest.approx(seen / (seen + unseen))
    low, high = standard.skew_bounds or [0.0, 0.0]
    assert low < standard.skew < high  # type: ignore[operator]
    notes = " ".join(result.metrics.notes)
    assert "3 occupations have listed words outside the top-N" in notes
    assert "1 occupations left out (no listed word among the alternatives): CEO" in notes


def test_replicates_ask_for_n_choices_and_are_read_by_their_pronouns(
    server: OpenAIServer, tmp_path: Path
) -> None:
    result = run(server, tmp_path, contexts="esl", replicates=5, seed=3)
    bodies = server.bodies()
    assert len(bodies) == 3 and {b["n"] for b in bodies} == {5}
    assert all(b["max_tokens"] == 100 and b["temperature"] == 1.0 for b in bodies)
    assert len({b["seed"] for b in bodies}) == 1  # one seed per replicate request, stable
    esl = result.metrics.contexts["esl"]
    assert (esl.gendered, esl.dropped, esl.dropped_reasons) == (9, 6, {"no_pronouns": 3, "tied": 3})
    assert esl.skew == pytest.approx(2 * (1 / 3) - 1)


def test_a_second_run_is_served_from_the_cache_and_a_replay_sends_nothing(
    server: OpenAIServer, tmp_path: Path
) -> None:
    options = {"contexts": "standard,esl", "replicates": 5, "next_word": "completions"}
    first = run(server, tmp_path, **options)
    # Six requests: the three next-word prompts travel in one batch to vLLM.
    assert first.metrics.requests.sent == 6 and server.request_count == 4
    replay = run(server, tmp_path, **options, replay=True)
    assert server.request_count == 4  # nothing new reached the server
    assert replay.metrics.requests.sent == 0 and replay.metrics.requests.cache_hits == 6
    assert replay.metrics.contexts == first.metrics.contexts


def test_a_chat_only_model_on_the_completions_endpoint_is_told_to_use_chat(
    server: OpenAIServer, tmp_path: Path
) -> None:
    message = "This is a chat model and not supported in the v1/completions endpoint."
    server.fail_all(Fault.http(404, message=message), match=lambda body: "prompt" in body)
    with pytest.raises(RunAbortedError) as stopped:
        run(server, tmp_path)
    assert message in str(stopped.value) and "rerun with --next-word chat" in str(stopped.value)
    # Nothing was answered or paid for: no run folder is left to record only the failure.
    assert stopped.value.run_dir is None and "no run folder is kept" in str(stopped.value)
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]


def test_an_endpoint_without_logprobs_is_told_to_sample(tmp_path: Path) -> None:
    with OpenAIServer(responder=planted, logprobs_supported=False) as server:
        with pytest.raises(RunAbortedError, match="rerun with --next-word samples"):
            run(server, tmp_path)
        result = run(server, tmp_path, next_word="samples", replicates=4)
    assert result.metrics.contexts["standard"].source == "sampled next words"


# Continuation path: each listed word's probability after "The {occupation} is".
WORD_P = {
    "nurse": {"she": 0.3, "her": 0.1, "he": 0.05, "his": 0.01},
    "CEO": {"he": 0.2, "his": 0.1, "she": 0.02},  # no word in any top-N: scored all the same
    "baker": {"he": 0.1, "she": 0.1},
}
UNLISTED_P = 1e-4  # every other listed word


def word_logprob(before: str, token: str) -> float:
    """The server's echo scorer: log P(token | before)."""
    found = OPENING.search(before)
    if found is None:
        return -1.0  # "The", " nurse", " is": not looked at
    return math.log(WORD_P[found.group(1)].get(token.strip(), UNLISTED_P))


def expected_p_male(occupation: str) -> float:
    from biasaudit.probes import FEMALE_WORDS, MALE_WORDS

    def mass(words: tuple[str, ...]) -> float:
        return sum(WORD_P[occupation].get(word, UNLISTED_P) for word in words)

    return mass(MALE_WORDS) / (mass(MALE_WORDS) + mass(FEMALE_WORDS))


def test_every_listed_word_is_scored_whole_where_the_endpoint_echoes(tmp_path: Path) -> None:
    """The paper's standard test: 22 continuations per occupation, none unseen, and the
    CEO, whose words are outside any top N, still gets its share."""
    with OpenAIServer(responder=planted, echo_logprob=word_logprob) as server:
        result = run(server, tmp_path)  # vllm: auto takes the continuation path
        bodies = server.bodies()
    standard = result.metrics.contexts["standard"]
    assert result.exit_code == 0 and standard.source == "continuation logprobs"
    assert result.metrics.requests.sent == 3 * 22
    body = bodies[0]
    assert body["echo"] is True and body["max_tokens"] == 1 and body["logprobs"] == 1
    assert "The nurse is she" in body["prompt"]  # vLLM: the prompts travel as one list
    table = pd.read_csv(result.run_dir / "occupations.csv").set_index("occupation")
    for occupation in WORD_P:
        assert table.loc[occupation, "p_male"] == pytest.approx(expected_p_male(occupation))
        assert table.loc[occupation, "coverage"] == 1.0
    assert standard.occupations == 3 and standard.excluded == []
    assert standard.coverage == 1.0 and not standard.partly_covered


def test_an_endpoint_that_refuses_echo_fails_those_requests_and_says_why(tmp_path: Path) -> None:
    from biasaudit.errors import NoAnswerError
    from biasaudit.store.runs import read_manifest, read_responses

    with OpenAIServer(responder=planted) as server, pytest.raises(NoAnswerError) as raised:
        run(server, tmp_path, next_word="continuation", max_retries=0)
    assert "every request failed (66)" in str(raised.value)
    assert "echo is not supported" in str(raised.value)
    run_dir = Path(raised.value.run_dir or "")
    manifest = read_manifest(run_dir)
    assert manifest.status == "failed" and manifest.counts.failures == 3 * 22
    assert all("echo is not supported" in (r.error or "") for r in read_responses(run_dir))
