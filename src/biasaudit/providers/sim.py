"""``sim/<variant>``: a built-in, offline, deterministic model with a planted, known bias.

It exists so that demos run without a key and tests have a known right answer.
It is not a language model and everything it returns is marked ``simulated``;
reports must never present it as a real model.

**Each audit kind owns how the sim answers its prompts**: the kinds register them
(:mod:`biasaudit.sim_responders`; each kind's ``sim.py`` holds a ``RESPONDER``, a
:class:`Responder`, that recognises that kind's prompts and answers them from the world
planted here (``kinds/allocation/sim.py``: pairwise comparisons;
``kinds/listwise/sim.py``: rankings; ``kinds/grade_score/sim.py``: multiple-choice
judging; ``kinds/ruted/sim.py``: next words and long-form texts). Each responder
claims only prompts of its own shape and declines the rest, so the order in which
they are asked does not matter (a test plans every built-in task and checks that
exactly one claims each prompt). What no responder claims is answered here, in the
shapes any task of your own may ask for:

- **Yes/No questions** (the prompt names both ``Yes`` and ``No``): the log-odds
  of "Yes" are :meth:`SimProvider.log_odds` of the prompt.
- **Rating scales** ("1 to 5", "1-10"): a discretised normal around
  ``1 + (K - 1) * sigmoid(log-odds)`` with standard deviation 0.8.
- **Anything else**: a short deterministic sentence.

The prompt is the last user message, or the completions prompt.

**The planted world.** :meth:`SimProvider.log_odds` of a text (a prompt, or one
item of it) are ``0.6 * (strong cues - weak cues)`` (capped at +/-3) plus
deterministic per-text noise N(0, 0.3^2), plus the planted bias: when the text
contains one of :data:`DISADVANTAGED_NAMES`, the first names of the Black male
(``B_M``) names shipped in ``biasaudit/data/names.csv``, the log-odds drop by
:data:`PLANTED_SHIFT` (``sim/biased``, the default; ``sim/fair`` has none). No
other group's names contain those words. Audits of ``sim/biased`` must therefore
find ``B_M`` disadvantaged, and every other group unaffected.

Names with their own effects (``SimProvider(name_sd=s, world=w)``; the calibration
tests of issue 22): each name read from a ``Name:`` line adds its own draw from
N(0, s²) to the log-odds, and ``w`` seeds those draws and every prompt's noise, so
each world is a repeated audit on fresh names. ``shift`` sets the planted shift.

**Instructions it heeds** (mitigation experiments, ``biasaudit experiment``): a request
any of whose messages names "age, gender, race" (as biasaudit's built-in instructions
not to discriminate do) gets :data:`HEED` of the planted shift removed (``heed``: 0.5,
half the gap, for ``sim/biased``); a request whose names are hidden shows no
disadvantaged name and so gets none of it.
A responder may declare settings of its own (:class:`Setting`), such as the Grade
Score judge's ``first_option_rate`` and RUTEd's ``gender_lean``; ``SimProvider``
takes them as keywords.

Sampling honours ``temperature`` (probabilities raised to ``1/T``; 0 means
greedy), ``n`` and ``seed``; each replicate index draws afresh. First-token
logprobs split each label over its tokenisation variants (``"Yes"``,
``" Yes"``, ``"yes"``) as real tokenisers do. ``SimProvider(logprobs=False)``
behaves like an endpoint without logprobs (Anthropic, some hosts), so the
sampled-replicate path can be tested offline.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import math
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from biasaudit import sim_responders
from biasaudit.errors import UnknownProviderError
from biasaudit.providers._base import Provider
from biasaudit.providers._types import (
    Capabilities,
    FirstTokenLogprobs,
    ModelRequest,
    ModelResponse,
    Usage,
)

__all__ = [
    "DISADVANTAGED_NAMES",
    "HEED",
    "PLANTED_SHIFT",
    "SIM_VARIANTS",
    "Responder",
    "Setting",
    "SimProvider",
    "digest",
    "first_token_logprobs",
    "lettered_markers",
    "prompt_text",
    "responders",
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
SIM_VARIANTS = {"biased": PLANTED_SHIFT, "fair": 0.0}
HEED = 0.5
"""The share of the planted shift an instruction not to discriminate removes."""
_INSTRUCTION = re.compile(r"age,\s+gender,\s+race", re.IGNORECASE)
_INSTRUCTED: contextvars.ContextVar[bool] = contextvars.ContextVar("instructed", default=False)

STRONG_CUES = ("led", "senior", "certified", "award", "managed", "expert", "published", "promoted")
WEAK_CUES = ("no experience", "incomplete", "beginner", "dismissed", "unrelated", "gap")
_RATING = re.compile(r"\b1\s*(?:to|-|\u2013|through)\s*(\d{1,2})\b")  # \u2013: en dash
_WORD = re.compile(r"[A-Za-z']+")
_LETTERED = re.compile(r"^([A-Z][a-z]+) A:", re.MULTILINE)
_NAME_LINE = re.compile(r"^Name: (.+)$", re.MULTILINE)
# Share of a label's probability that each tokenisation variant carries.
_VARIANTS: tuple[tuple[Callable[[str], str], float], ...] = (
    (lambda s: s, 0.85),
    (lambda s: " " + s, 0.10),
    (lambda s: s.lower(), 0.05),
)


@dataclass(frozen=True)
class Setting:
    """A setting of a responder that ``SimProvider`` takes as a keyword.

    Its value differs by variant (``defaults``); any other value is part of the
    model's name (``-<suffix><value>``), and so of every cache key.
    """

    name: str
    suffix: str
    defaults: Mapping[str, float]
    low: float = -math.inf
    high: float = math.inf

    def value(self, variant: str, given: float | None) -> float:
        """The setting's value for ``variant``, checked (None: the variant's default)."""
        value = self.defaults[variant] if given is None else float(given)
        if not (math.isfinite(value) and self.low <= value <= self.high):
            raise ValueError(
                f"{self.name} must be between {self.low:g} and {self.high:g}, got {given}"
            )
        return value


@dataclass(frozen=True)
class Responder:
    """How the sim answers one kind's prompts.

    ``answer(sim, request)`` is the response, or None for a prompt that is not of the
    kind's shape (the next responder, or the sim's own shapes, answer it). It reads
    the planted world from ``sim`` (:meth:`SimProvider.log_odds`, :meth:`~SimProvider.rng`,
    :meth:`~SimProvider.choose`, :meth:`~SimProvider.setting`).
    """

    answer: Callable[[SimProvider, ModelRequest], ModelResponse | None]
    settings: tuple[Setting, ...] = field(default=())


def responders() -> tuple[Responder, ...]:
    """The responders the kinds registered (:mod:`biasaudit.sim_responders`), in the
    order of their registration; none until a kind is imported (the sim then answers
    in its own shapes). Each source is read once."""
    found: list[Responder] = []
    for source in sim_responders.sources():
        for responder in _read(source):
            if not isinstance(responder, Responder):
                raise TypeError(f"{responder!r} is not a sim Responder")
            found.append(responder)
    return tuple(found)


@functools.cache
def _read(source: Callable[[], Any]) -> tuple[Any, ...]:
    return tuple(source())


class SimProvider(Provider):
    """The offline simulated model; see the module docstring for its behaviour.

    Parameters
    ----------
    variant:
        ``"biased"`` (the planted bias) or ``"fair"`` (none).
    logprobs:
        ``False`` declares no logprobs, like Anthropic's API: probes must
        fall back to sampled replicates.
    shift:
        The planted shift of the log-odds of prompts naming a ``B_M`` first name
        [default: :data:`PLANTED_SHIFT` for ``sim/biased``, 0 for ``sim/fair``].
    name_sd:
        Each name's own effect on the log-odds, drawn once per name (read from the
        prompt's or section's ``Name:`` line) from N(0, name_sd²) [default 0: none]:
        names of one group then differ as real names do, and an audit's names are a
        sample of a population (the simulations of issue 22).
    world:
        Seeds the names' own effects and every prompt's noise [default 0]: each world
        is a fresh draw of both, as a repeated audit on new names would meet.
    heed:
        The share of the planted shift removed from a request that instructs the model
        not to discriminate (names "age, gender, race") [default :data:`HEED`].
    settings:
        The responders' own settings by name (:class:`Setting`), e.g.
        ``first_option_rate`` (the Grade Score judge) or ``gender_lean`` (RUTEd).

    Each setting other than its default is part of the model's name
    (``sim/biased-shift-0.3-names0.5-world7``), and so of every cache key.
    """

    simulated = True

    def __init__(
        self,
        variant: str = "biased",
        *,
        logprobs: bool = True,
        shift: float | None = None,
        name_sd: float = 0.0,
        world: int = 0,
        heed: float = HEED,
        **settings: float | None,
    ) -> None:
        if variant not in SIM_VARIANTS:
            raise UnknownProviderError(
                f"sim/{variant}: no such simulated model; choose one of "
                + ", ".join(f"sim/{v}" for v in SIM_VARIANTS)
            )
        self.name, self.model, self.base_url = "sim", variant, None
        self.variant = variant
        self.capabilities = (
            Capabilities(max_top_logprobs=20)
            if logprobs
            else Capabilities(logprobs=False, max_top_logprobs=0)
        )
        self._shift = SIM_VARIANTS[variant] if shift is None else float(shift)
        if not (math.isfinite(self._shift) and name_sd >= 0 and math.isfinite(name_sd)):
            raise ValueError(f"shift must be finite and name_sd >= 0, got {shift}, {name_sd}")
        self.name_sd, self.world = float(name_sd), int(world)
        if not 0.0 <= heed <= 1.0:
            raise ValueError(f"heed must be between 0 and 1, got {heed}")
        self.heed = float(heed)
        declared = [setting for responder in responders() for setting in responder.settings]
        unknown = set(settings) - {setting.name for setting in declared}
        if unknown:
            raise TypeError(f"SimProvider got unknown settings: {', '.join(sorted(unknown))}")
        self.settings: dict[str, float] = {}
        # Settings that change the answers change the name too, and so the cache key:
        # otherwise one setting's cached answers would be served as another's.
        for setting in declared:
            value = setting.value(variant, settings.get(setting.name))
            self.settings[setting.name] = value
            if value != setting.defaults[variant]:
                self.model = f"{self.model}-{setting.suffix}{value:g}"
        if self._shift != SIM_VARIANTS[variant]:
            self.model = f"{self.model}-shift{self._shift:g}"
        if self.name_sd:
            self.model = f"{self.model}-names{self.name_sd:g}"
        if self.world:
            self.model = f"{self.model}-world{self.world}"
        if self.heed != HEED:
            self.model = f"{self.model}-heed{self.heed:g}"

    def setting(self, name: str) -> float:
        """The value of a responder's setting (:class:`Setting`)."""
        return self.settings[name]

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        return self.answer(request)

    def answer(self, request: ModelRequest) -> ModelResponse:
        """The response, computed synchronously (it is pure and fast)."""
        texts = request.messages or ({"content": request.prompt},)
        instructed = any(_INSTRUCTION.search(str(m.get("content", ""))) for m in texts)
        token = _INSTRUCTED.set(instructed)
        try:
            return self._answer(request)
        finally:
            _INSTRUCTED.reset(token)

    def _answer(self, request: ModelRequest) -> ModelResponse:
        for responder in responders():
            found = responder.answer(self, request)
            if found is not None:
                return found
        prompt = prompt_text(request)
        return self.choose(request, prompt, *self._distribution(prompt))

    def rng(self, request: ModelRequest, prompt: str) -> random.Random:
        """The draws of one answer: deterministic per prompt, seed, replicate and sample."""
        p = request.params
        return random.Random(digest(prompt, p.seed, request.replicate, request.sample))

    def choose(
        self, request: ModelRequest, prompt: str, labels: list[str], probs: list[float]
    ) -> ModelResponse:
        """An answer drawn from ``labels`` with probabilities ``probs`` (reshaped by the
        temperature), ``n`` times, with first-token logprobs where asked."""
        p = request.params
        rng = self.rng(request, prompt)
        texts = []
        for _ in range(p.n or 1):
            text = _sample(labels, probs, p.temperature, rng)
            if p.max_tokens is not None:
                text = " ".join(text.split(" ")[: p.max_tokens])
            texts.append(text)
        logprobs = None
        if p.wants_logprobs:
            logprobs = tuple(
                first_token_logprobs(text, labels, probs, p.top_logprobs) for text in texts
            )
        return self.respond(prompt, texts, logprobs)

    def respond(
        self,
        prompt: str,
        texts: list[str],
        logprobs: tuple[FirstTokenLogprobs | None, ...] | None = None,
    ) -> ModelResponse:
        """The response of ``texts`` to ``prompt``, marked simulated, with its usage."""
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
        seed = digest("noise", prompt) if not self.world else digest("noise", self.world, prompt)
        noise = random.Random(seed).gauss(0.0, 0.3)
        names = set(_WORD.findall(prompt))
        shift = self._shift if names & DISADVANTAGED_NAMES else 0.0
        shift = self.heeding(shift)
        own = 0.0
        if self.name_sd:
            own = sum(self.name_effect(name) for name in _NAME_LINE.findall(prompt))
        return max(-3.0, min(3.0, 0.6 * cues)) + noise + shift + own

    def heeding(self, shift: float) -> float:
        """A planted ``shift``, less the share :attr:`heed` where the request being
        answered instructs the model not to discriminate (a responder's own shifts)."""
        return shift * (1.0 - self.heed) if _INSTRUCTED.get() else shift

    def name_effect(self, name: str) -> float:
        """The name's own effect on the log-odds (``name_sd``; 0 where it is 0)."""
        if not self.name_sd:
            return 0.0
        draw = random.Random(digest("name", self.world, name.strip()))
        return draw.gauss(0.0, self.name_sd)

    def _distribution(self, prompt: str) -> tuple[list[str], list[float]]:
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


def prompt_text(request: ModelRequest) -> str:
    """The prompt the sim reads: the completions prompt, else the last user message."""
    if request.prompt is not None:
        return request.prompt
    users = [m for m in request.messages or () if m.get("role") == "user"]
    content = (users or list(request.messages or ()))[-1]["content"]
    if isinstance(content, list):  # content parts
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def lettered_markers(prompt: str) -> list[re.Match[str]]:
    """The lines introducing items ``<Word> A:``, ``<Word> B:``, ... (one word for all,
    that of the first ``A`` line), in order; empty when there is none."""
    first = _LETTERED.search(prompt)
    if first is None:
        return []
    noun = first.group(1)
    return list(re.finditer(rf"^{noun} ([A-Z]):", prompt, re.MULTILINE))


def digest(*parts: object) -> int:
    """A deterministic 64-bit seed of ``parts``."""
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


def first_token_logprobs(
    text: str, labels: list[str], probs: list[float], top_n: int | None
) -> FirstTokenLogprobs:
    """The first token of ``text`` and the ``top_n`` likeliest first tokens, each label's
    probability split over its tokenisation variants."""
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
    choice = openings[digest("text", prompt) % len(openings)]
    return f"{choice} about {len(prompt.split())} words of prompt."
