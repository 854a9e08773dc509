"""What the fake servers answer: the `Choice` a responder returns, the default
responder, and the rendering of a choice under `max_tokens` / stop sequences.

A "token" here is a whitespace-led word (regex ``\\s*\\S+``), the same unit the
servers use for `max_tokens`, usage counts and logprob positions, so a planted
answer like "Yes" is exactly one position.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

JsonDict = dict[str, Any]
Distribution = Mapping[str, float]

# OpenAI's documented stand-in for "log(0)"; keeps JSON finite.
VERY_UNLIKELY = -9999.0

_TOKEN_RE = re.compile(r"\s*\S+")


@dataclass(frozen=True, slots=True)
class Choice:
    """One generated answer.

    `top_logprobs[i]` is the next-token distribution (token -> natural-log
    probability) at output position i; positions past its end, or entries that
    are None, report the sampled token alone with logprob 0.0. The sampled token
    should be a key of its distribution, otherwise it is reported one nat below
    the least likely listed token. `finish_reason` overrides the computed one
    ("stop"/"length"), e.g. "content_filter" or Anthropic's "refusal".
    """

    text: str
    top_logprobs: Sequence[Distribution | None] | None = None
    finish_reason: str | None = None

    @classmethod
    def binary(cls, p_yes: float, *, yes: str = "Yes", no: str = "No") -> Choice:
        """A one-token answer whose distribution puts `p_yes` on `yes`, the rest on `no`."""
        if not 0.0 <= p_yes <= 1.0:
            raise ValueError(f"p_yes must be in [0, 1], got {p_yes}")
        dist = {yes: safe_log(p_yes), no: safe_log(1.0 - p_yes)}
        return cls(yes if p_yes >= 0.5 else no, [dist])


Responder = Callable[[JsonDict, str], Sequence[Choice]]
"""`responder(request_body, path) -> choices`. Called once per chat/messages
request and once per prompt of a legacy completion (with "prompt" narrowed to
that one string). Return `n` choices; a shorter list is cycled, a longer one cut."""


def safe_log(p: float) -> float:
    return math.log(p) if p > 0.0 else VERY_UNLIKELY


# Sums to ~0.98 in probability: a valid (sub-)distribution whose top entries
# look like a real chat model asked a yes/no question.
DEFAULT_TOP_LOGPROBS: Distribution = {
    "Yes": -0.4,
    "No": -1.6,
    " Yes": -3.0,
    "yes": -3.5,
    " No": -4.0,
    "no": -4.5,
    "YES": -5.5,
    "NO": -6.0,
    "Maybe": -6.5,
    "I": -7.0,
    "The": -7.5,
    "Sure": -8.0,
    "As": -8.5,
    "Y": -9.0,
    "N": -9.5,
    "It": -10.0,
    "Based": -10.5,
    "True": -11.0,
    "False": -11.5,
    "Unknown": -12.0,
}
DEFAULT_CHOICE = Choice("Yes", (DEFAULT_TOP_LOGPROBS,))


def request_key(body: JsonDict | None, path: str) -> str:
    """A stable per-request id: the last message's text (chat/messages) or the prompt."""
    if not body:
        return ""
    if path.endswith("/completions") and "messages" not in body:
        prompt = body.get("prompt", "")
        return prompt if isinstance(prompt, str) else json.dumps(prompt)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return ""
    return content_text(messages[-1].get("content"))


def content_text(content: object) -> str:
    """Text of a message content that is a string or a list of text parts/blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def default_responder(body: JsonDict, path: str) -> list[Choice]:
    """Always "Yes" (the argmax), except that sampled multi-choice requests
    (temperature > 0 and n > 1) draw each choice from DEFAULT_TOP_LOGPROBS with
    an RNG keyed on (seed, choice index, prompt) so runs are reproducible."""
    n = body.get("n") or 1
    temperature = body.get("temperature") or 0.0
    if not isinstance(n, int) or n <= 1 or temperature <= 0:
        return [DEFAULT_CHOICE]
    key = request_key(body, path)
    seed = body.get("seed")
    return [_sampled_choice(random.Random(f"{seed}|{i}|{key}")) for i in range(n)]


def hashed_responder(body: JsonDict, path: str) -> list[Choice]:
    """A Yes/No answer whose P(Yes) is a hash of the prompt (`request_key`): answers
    differ from prompt to prompt, reproducibly, so a run's scores and metrics
    show any answer matched to the wrong prompt."""
    digest = hashlib.sha256(request_key(body, path).encode()).digest()
    return [Choice.binary(int.from_bytes(digest[:4], "big") / 2**32)]


def long_responder(body: JsonDict, path: str) -> list[Choice]:
    """About 2 KB of text naming the prompt: answers that fill a small disk quickly."""
    key = request_key(body, path)
    words = hashlib.sha256(key.encode()).hexdigest()
    return [Choice(f"{key}: " + " ".join([words] * 30))]


RESPONDERS: Mapping[str, Responder] = {
    "default": default_responder,
    "hashed": hashed_responder,
    "long": long_responder,
}
"""Responders a server started from the command line can use (`--responder`)."""


def _sampled_choice(rng: random.Random) -> Choice:
    u = rng.random()
    for token, logprob in DEFAULT_TOP_LOGPROBS.items():
        u -= math.exp(logprob)
        if u < 0:
            return Choice(token, (DEFAULT_TOP_LOGPROBS,))
    # The ~2% of mass not listed: fall back to the argmax rather than invent a token.
    return DEFAULT_CHOICE


def tokenize(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


def count_tokens(text: str) -> int:
    return len(text.split())


@dataclass(frozen=True, slots=True)
class Rendered:
    """A choice after applying the request's limits."""

    text: str
    tokens: list[str]
    dists: Sequence[Distribution | None]
    finish_reason: str
    stop_sequence: str | None


def render(choice: Choice, max_tokens: int | None, stops: Sequence[str]) -> Rendered:
    """Cut the text at the first stop sequence or after `max_tokens` tokens,
    whichever comes first, as a real decoder would."""
    text = choice.text
    tokens = tokenize(text)
    cut, reason, stop_seq = len(text), "stop", None
    if max_tokens is not None and len(tokens) > max_tokens:
        cut, reason = len("".join(tokens[:max_tokens])), "length"
    hits = [(text.find(s), s) for s in stops if s and s in text]
    if hits:
        at, seq = min(hits)
        if at <= cut:
            cut, reason, stop_seq = at, "stop", seq
    if cut < len(text):
        text = text[:cut]
        tokens = tokenize(text)
    return Rendered(
        text=text,
        tokens=tokens,
        dists=choice.top_logprobs or (),
        finish_reason=choice.finish_reason or reason,
        stop_sequence=stop_seq,
    )


def position_dist(rendered: Rendered, i: int) -> Distribution | None:
    return rendered.dists[i] if i < len(rendered.dists) else None


def sampled_logprob(token: str, dist: Distribution | None) -> float:
    if not dist:
        return 0.0
    found = dist.get(token)
    return found if found is not None else min(dist.values()) - 1.0


def top_k(token: str, dist: Distribution | None, k: int) -> list[tuple[str, float]]:
    """The k most likely (token, logprob) pairs, best first."""
    if k <= 0:
        return []
    if not dist:
        return [(token, 0.0)]
    return sorted(dist.items(), key=lambda kv: -kv[1])[:k]
