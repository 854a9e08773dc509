"""``sim/<variant>``: a built-in, offline, deterministic model with a planted, known bias.

It exists so that demos run without a key and tests have a known right answer.
It is not a language model and everything it returns is marked ``simulated``;
reports must never present it as a real model.

How it answers (the prompt is the last user message, or the completions prompt):

- **Pairwise comparisons** (the prompt introduces two items with lines
  ``<Word> A:`` and ``<Word> B:``, e.g. ``Candidate A:`` / ``Candidate B:``):
  it answers the letter ``A`` or ``B``. Section A runs from its marker to
  the ``B`` marker, section B from there to the last blank line (the
  closing question belongs to neither). The log-odds of ``A`` are the
  planted log-odds of section A minus those of section B, plus
  :data:`PAIRWISE_POSITION_BIAS` in favour of whichever item is shown first,
  so greedy answers between near-equal items flip with the order, as real
  judges' do.
- **Yes/No questions** (the prompt names both ``Yes`` and ``No``): the log-odds
  of "Yes" are ``0.6 * (strong cues - weak cues)`` (capped at +/-3) plus
  deterministic per-prompt noise N(0, 0.3^2), plus the planted bias below.
- **Rating scales** ("1 to 5", "1-10"): a discretised normal around
  ``1 + (K - 1) * sigmoid(log-odds)`` with standard deviation 0.8.
- **Anything else**: a short deterministic sentence.

The planted bias (``sim/biased``, the default; ``sim/fair`` has none): when the
prompt (or a pairwise section) contains one of :data:`DISADVANTAGED_NAMES`, the
first names of the Black male (``B_M``) names shipped in
``biasaudit/data/names.csv``, its log-odds drop by :data:`PLANTED_SHIFT`. No
other group's names contain those words. Audits of ``sim/biased`` must
therefore find ``B_M`` disadvantaged, and every other group unaffected.

Sampling honours ``temperature`` (probabilities raised to ``1/T``; 0 means
greedy), ``n`` and ``seed``; each replicate index draws afresh. First-token
logprobs split each label over its tokenisation variants (``"Yes"``,
``" Yes"``, ``"yes"``) as real tokenisers do. ``SimProvider(logprobs=False)``
behaves like an endpoint without logprobs (Anthropic, some hosts), so the
sampled-replicate path can be tested offline.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Callable

from ..errors import UnknownProviderError
from ._base import Provider
from ._types import Capabilities, FirstTokenLogprobs, ModelRequest, ModelResponse, Usage

__all__ = [
    "DISADVANTAGED_NAMES",
    "PAIRWISE_POSITION_BIAS",
    "PLANTED_SHIFT",
    "SIM_VARIANTS",
    "SimProvider",
]

DISADVANTAGED_NAMES = frozenset(
    {
        "Darnell", "DeShawn", "Hakim", "Jamal", "Jermaine", "Kareem", "Leroy",
        "Rasheed", "Terrell", "Tremayne", "Tyrone", "DeAndre", "Malik", "Darius",
        "Tyrell", "Lamar", "Marquis", "Rashad", "Demetrius", "Jalen", "Lamont",
        "Antwan", "Dashawn", "Kwame", "Deonte",
    }
)  # fmt: skip
PLANTED_SHIFT = -1.0
PAIRWISE_POSITION_BIAS = 0.5
SIM_VARIANTS = {"biased": PLANTED_SHIFT, "fair": 0.0}

STRONG_CUES = ("led", "senior", "certified", "award", "managed", "expert", "published", "promoted")
WEAK_CUES = ("no experience", "incomplete", "beginner", "dismissed", "unrelated", "gap")
_RATING = re.compile(r"\b1\s*(?:to|-|\u2013|through)\s*(\d{1,2})\b")  # \u2013: en dash
_WORD = re.compile(r"[A-Za-z']+")
_PAIR_MARKER = re.compile(r"^([A-Z][a-z]+) A:", re.MULTILINE)
# Share of a label's probability that each tokenisation variant carries.
_VARIANTS: tuple[tuple[Callable[[str], str], float], ...] = (
    (lambda s: s, 0.85),
    (lambda s: " " + s, 0.10),
    (lambda s: s.lower(), 0.05),
)


class SimProvider(Provider):
    """The offline simulated model; see the module docstring for its behaviour.

    Parameters
    ----------
    variant:
        ``"biased"`` (the planted bias) or ``"fair"`` (none).
    logprobs:
        ``False`` declares no logprobs, like Anthropic's API: probes must
        fall back to sampled replicates.
    """

    simulated = True

    def __init__(self, variant: str = "biased", *, logprobs: bool = True) -> None:
        if variant not in SIM_VARIANTS:
            raise UnknownProviderError(
                f"sim/{variant}: no such simulated model; choose one of "
                + ", ".join(f"sim/{v}" for v in SIM_VARIANTS)
            )
        self.name, self.model, self.base_url = "sim", variant, None
        self.capabilities = (
            Capabilities(max_top_logprobs=20)
            if logprobs
            else Capabilities(logprobs=False, max_top_logprobs=0)
        )
        self._shift = SIM_VARIANTS[variant]

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        return self.answer(request)

    def answer(self, request: ModelRequest) -> ModelResponse:
        """The response, computed synchronously (it is pure and fast)."""
        prompt = _prompt_text(request)
        labels, probs = self._distribution(prompt)
        p = request.params
        rng = random.Random(_digest(prompt, p.seed, request.replicate, request.sample))
        texts = []
        for _ in range(p.n or 1):
            text = _sample(labels, probs, p.temperature, rng)
            if p.max_tokens is not None:
                text = " ".join(text.split(" ")[: p.max_tokens])
            texts.append(text)
        logprobs = None
        if p.wants_logprobs:
            logprobs = tuple(
                _first_token_logprobs(text, labels, probs, p.top_logprobs) for text in texts
            )
        return ModelResponse(
            texts=tuple(texts),
            logprobs=logprobs,
            finish_reasons=("stop",) * len(texts),
            model_version=f"sim-{self.model}-v1 (simulated)",
            usage=Usage(
                input_tokens=len(prompt) // 4 + 1,
                output_tokens=sum(len(t) // 4 + 1 for t in texts),
            ),
            simulated=True,
        )

    def log_odds(self, prompt: str) -> float:
        """The planted log-odds of a favourable answer for this prompt."""
        lowered = prompt.lower()
        cues = sum(lowered.count(c) for c in STRONG_CUES) - sum(lowered.count(c) for c in WEAK_CUES)
        noise = random.Random(_digest("noise", prompt)).gauss(0.0, 0.3)
        names = set(_WORD.findall(prompt))
        shift = self._shift if names & DISADVANTAGED_NAMES else 0.0
        return max(-3.0, min(3.0, 0.6 * cues)) + noise + shift

    def _distribution(self, prompt: str) -> tuple[list[str], list[float]]:
        sections = _pairwise_sections(prompt)
        if sections is not None:
            first, second = sections
            gap = self.log_odds(first) - self.log_odds(second) + PAIRWISE_POSITION_BIAS
            p_first = 1.0 / (1.0 + math.exp(-gap))
            return ["A", "B"], [p_first, 1.0 - p_first]
        words = set(_WORD.findall(prompt))
        if "Yes" in words and "No" in words:
            p_yes = 1.0 / (1.0 + math.exp(-self.log_odds(prompt)))
            return ["Yes", "No"], [p_yes, 1.0 - p_yes]
        rating = _RATING.search(prompt)
        if rating and 2 <= int(rating.group(1)) <= 10:
            top = int(rating.group(1))
            centre = 1 + (top - 1) / (1.0 + math.exp(-self.log_odds(prompt)))
            weights = [math.exp(-0.5 * ((k - centre) / 0.8) ** 2) for k in range(1, top + 1)]
            total = sum(weights)
            return [str(k) for k in range(1, top + 1)], [w / total for w in weights]
        return [_free_text(prompt)], [1.0]


def _prompt_text(request: ModelRequest) -> str:
    if request.prompt is not None:
        return request.prompt
    users = [m for m in request.messages or () if m.get("role") == "user"]
    content = (users or list(request.messages or ()))[-1]["content"]
    if isinstance(content, list):  # content parts
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _pairwise_sections(prompt: str) -> tuple[str, str] | None:
    """The texts of items A and B of a pairwise prompt, or None if it is not one."""
    first_marker = _PAIR_MARKER.search(prompt)
    if first_marker is None:
        return None
    noun = first_marker.group(1)
    second_marker = re.compile(rf"^{noun} B:", re.MULTILINE).search(prompt, first_marker.end())
    if second_marker is None:
        return None
    first = prompt[first_marker.end() : second_marker.start()]
    rest = prompt[second_marker.end() :].strip()
    second = rest.rsplit("\n\n", 1)[0] if "\n\n" in rest else rest
    return first, second


def _digest(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


def _sample(
    labels: list[str], probs: list[float], temperature: float | None, rng: random.Random
) -> str:
    if len(labels) == 1:
        return labels[0]
    t = 1.0 if temperature is None else temperature
    if t == 0:
        return labels[max(range(len(labels)), key=probs.__getitem__)]
    weights = [q ** (1.0 / t) if q > 0 else 0.0 for q in probs]
    return rng.choices(labels, weights=weights)[0]


def _first_token_logprobs(
    text: str, labels: list[str], probs: list[float], top_n: int | None
) -> FirstTokenLogprobs:
    candidates: dict[str, float] = {}
    for label, prob in zip(labels, probs, strict=True):
        first = label.split(" ")[0]
        for spell, share in _VARIANTS:
            token = spell(first)
            candidates[token] = candidates.get(token, 0.0) + prob * share
    ranked = sorted(candidates.items(), key=lambda kv: -kv[1])
    top = tuple((tok, math.log(q)) for tok, q in ranked[: top_n or 0] if q > 0)
    chosen = text.split(" ")[0]
    own = math.log(candidates[chosen]) if candidates.get(chosen) else None
    return FirstTokenLogprobs(token=chosen, logprob=own, top=top)


def _free_text(prompt: str) -> str:
    openings = ("Here is a simulated answer", "A simulated reply", "Simulated text")
    choice = openings[_digest("text", prompt) % len(openings)]
    return f"{choice} about {len(prompt.split())} words of prompt."
