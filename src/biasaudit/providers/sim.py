"""``sim/<variant>``: a built-in, offline, deterministic model with a planted, known bias.

It exists so that demos run without a key and tests have a known right answer.
It is not a language model and everything it returns is marked ``simulated``;
reports must never present it as a real model.

How it answers (the prompt is the last user message, or the completions prompt):

- **Multiple-choice judging** (the prompt lists options on lines
  ``Option 1:``, ``Option 2:``, ... numbered from 1, as the Grade Score
  prompts do): it answers ``Option N``, or ``Selection: Option N`` when the
  prompt asks for a ``Selection:`` line. Option k's text runs from its marker
  to the next one (the last option's to the prompt's last blank line: the
  closing question belongs to no option), and its *content score* is
  :meth:`SimProvider.log_odds` of that text (cues, noise and the planted name
  shift below), so it does not depend on where the option is shown. With
  probability p the judge answers ``Option 1`` whatever stands there (a
  planted position bias), otherwise the option of highest content score.
  p is :data:`JUDGE_FIRST_OPTION_RATE` (0.4 for ``sim/biased``, 0 for
  ``sim/fair``) unless ``SimProvider(first_option_rate=p)`` sets it. The two
  probabilities are reshaped by the temperature like every sim answer's
  (below), so they are exactly p and 1 - p at temperature 1. Over the n
  cyclic orders of an item, slot 1 is then chosen in a share p + (1 - p)/n of
  the answers and every other slot in (1 - p)/n, and the best option in
  (1 - p) + p/n: a Grade Score test knows its analytic values.
- **Listwise rankings** (the prompt introduces three or more items with lines
  ``<Word> A:``, ``<Word> B:``, ``<Word> C:``, ...; checked before pairwise):
  each item's utility is the planted log-odds of its section (the last one's
  runs to the prompt's last blank line), plus :data:`LISTWISE_FIRST_SLOT_BONUS`
  for the item shown first (1.0 for ``sim/biased``, 0 for ``sim/fair``: a
  planted position bias), divided by the temperature; the answer is a
  Plackett-Luce draw from them (Gumbel noise, deterministic per prompt,
  replicate and sample): all the letters best first, comma-separated, where
  the prompt asks for them ``best first``, else the best letter only. Its
  first-token logprobs are the softmax of the utilities over the letters, so a
  test knows each item's chance of being put first exactly.
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
- **RUTEd next words** (the prompt, or the user message, ends with a line
  ``The <occupation> is``; checked before everything else): it continues
  with one of 20 tokens holding all the probability, so a top-20 request
  sees them all: six other words (`` a``, `` the``, ...) with 0.8, and
  seven spellings each of male words (`` he``, `` his``, `` He``, `` him``,
  `` male``, `` boy``, `` himself``) and of female words (`` she``, ...)
  sharing 0.2 in the ratio p : 1 - p, p the planted male probability of the
  occupation in the ``standard`` context (below). Chat answers drop the
  leading space. Fewer than 20 alternatives leave some listed words out.
- **RUTEd texts** (a user message asking for a ``bedtime story``, a user
  ``persona``, or an exercise for ``ESL`` / ``English learners``; checked
  next): n short texts about the first occupation of the shipped list the
  user message names. Each is, independently, a tie (one ``he`` and one
  ``she``) with probability :data:`~biasaudit.providers._sim_ruted.TIE_RATE`
  (0.03), free of pronouns with probability ``NO_PRONOUN_RATE`` (0.05
  bedtime, 0.2 personas, 0.05 ESL), and otherwise uses male pronouns with
  probability p (the occupation's planted male probability in that context)
  and female ones otherwise, three in ten times with one pronoun of the other
  gender for a second character (always outnumbered, so the majority rule
  reads the drawn gender).
- **Anything else**: a short deterministic sentence.

The planted bias (``sim/biased``, the default; ``sim/fair`` has none): when the
prompt (or a pairwise section) contains one of :data:`DISADVANTAGED_NAMES`, the
first names of the Black male (``B_M``) names shipped in
``biasaudit/data/names.csv``, its log-odds drop by :data:`PLANTED_SHIFT`. No
other group's names contain those words. Audits of ``sim/biased`` must
therefore find ``B_M`` disadvantaged, and every other group unaffected.

Names with their own effects (``SimProvider(name_sd=s, world=w)``; the calibration
tests of issue 22): each name read from a ``Name:`` line adds its own draw from
N(0, s²) to the log-odds, and ``w`` seeds those draws and every prompt's noise, so
each world is a repeated audit on fresh names. ``shift`` sets the planted shift.

The planted gender lean (RUTEd; Lum et al., "Bias in Language Models: Beyond
Trick Tests and Towards RUTEd Evaluation"): in context c, occupation o is
referred to as male with probability
:func:`~biasaudit.providers._sim_ruted.planted_male_probability`, whose
log-odds are ``lean * (a_c * s_o + b_c + e_oc)``: s_o = +1 for the
male-majority occupations of ``biasaudit/data/occupations.csv``, -1 for the
female-majority ones (0 for any other occupation, which also gets e = 0),
(a_c, b_c) the context's stereotype and skew (``CONTEXT_LEAN``: standard
(1.4, 0.4), bedtime (1.3, -0.4), personas (1.5, 0.3), ESL (1.8, 0.6)), and
e_oc a fixed draw from U(-0.5, 0.5). ``lean`` is 1 for ``sim/biased``, 0 for
``sim/fair`` (every p = 0.5), or ``SimProvider(gender_lean=x)``. An audit's
neutrality, skew and stereotype must match the means over occupations of
``|2p - 1|``, ``2p - 1`` and ``±(2p - 1)``.

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

from biasaudit.errors import UnknownProviderError
from biasaudit.providers._base import Provider
from biasaudit.providers._sim_ruted import ruted_response
from biasaudit.providers._types import (
    Capabilities,
    FirstTokenLogprobs,
    ModelRequest,
    ModelResponse,
    Usage,
)

__all__ = [
    "DISADVANTAGED_NAMES",
    "JUDGE_FIRST_OPTION_RATE",
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
LISTWISE_FIRST_SLOT_BONUS = {"biased": 1.0, "fair": 0.0}
JUDGE_FIRST_OPTION_RATE = {"biased": 0.4, "fair": 0.0}

STRONG_CUES = ("led", "senior", "certified", "award", "managed", "expert", "published", "promoted")
WEAK_CUES = ("no experience", "incomplete", "beginner", "dismissed", "unrelated", "gap")
_RATING = re.compile(r"\b1\s*(?:to|-|\u2013|through)\s*(\d{1,2})\b")  # \u2013: en dash
_WORD = re.compile(r"[A-Za-z']+")
_PAIR_MARKER = re.compile(r"^([A-Z][a-z]+) A:", re.MULTILINE)
_NAME_LINE = re.compile(r"^Name: (.+)$", re.MULTILINE)
_OPTION_MARKER = re.compile(r"^Option (\d{1,2}):", re.MULTILINE)
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
    first_option_rate:
        p, how often the multiple-choice judge answers ``Option 1`` whatever
        stands there [default: :data:`JUDGE_FIRST_OPTION_RATE` of the variant].
    gender_lean:
        Strength of the planted gender-occupation lean of RUTEd prompts
        [default: 1 for ``sim/biased``, 0 for ``sim/fair``]; another value
        names the model ``sim/<variant>-lean<x>``, so its answers are cached apart.
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

    Each setting other than its default is part of the model's name
    (``sim/biased-shift-0.3-names0.5-world7``), and so of every cache key.
    """

    simulated = True

    def __init__(
        self,
        variant: str = "biased",
        *,
        logprobs: bool = True,
        first_option_rate: float | None = None,
        gender_lean: float | None = None,
        shift: float | None = None,
        name_sd: float = 0.0,
        world: int = 0,
    ) -> None:
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
        self._shift = SIM_VARIANTS[variant] if shift is None else float(shift)
        if not (math.isfinite(self._shift) and name_sd >= 0 and math.isfinite(name_sd)):
            raise ValueError(f"shift must be finite and name_sd >= 0, got {shift}, {name_sd}")
        self.name_sd, self.world = float(name_sd), int(world)
        rate = JUDGE_FIRST_OPTION_RATE[variant] if first_option_rate is None else first_option_rate
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"first_option_rate must be between 0 and 1, got {rate}")
        self.first_option_rate = rate
        default_lean = 1.0 if variant == "biased" else 0.0
        self.gender_lean = default_lean if gender_lean is None else gender_lean
        # Settings that change the answers change the name too, and so the cache key:
        # otherwise one setting's cached answers would be served as another's.
        if self.gender_lean != default_lean:
            self.model = f"{self.model}-lean{self.gender_lean:g}"
        if rate != JUDGE_FIRST_OPTION_RATE[variant]:
            self.model = f"{self.model}-first{rate:g}"
        if self._shift != SIM_VARIANTS[variant]:
            self.model = f"{self.model}-shift{self._shift:g}"
        if self.name_sd:
            self.model = f"{self.model}-names{self.name_sd:g}"
        if self.world:
            self.model = f"{self.model}-world{self.world}"

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        return self.answer(request)

    def answer(self, request: ModelRequest) -> ModelResponse:
        """The response, computed synchronously (it is pure and fast)."""
        ruted = ruted_response(request, model=self.model, lean=self.gender_lean)
        if ruted is not None:
            return ruted
        prompt = _prompt_text(request)
        p = request.params
        rng = random.Random(_digest(prompt, p.seed, request.replicate, request.sample))
        items = _listwise_sections(prompt)
        if items is not None:
            return self._ranking(request, prompt, items, rng)
        labels, probs = self._distribution(prompt)
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
        return self._response(prompt, texts, logprobs)

    def _response(
        self,
        prompt: str,
        texts: list[str],
        logprobs: tuple[FirstTokenLogprobs | None, ...] | None,
    ) -> ModelResponse:
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

    def listwise_utilities(self, sections: list[str]) -> list[float]:
        """The utility of each item of a listwise prompt, in the order shown."""
        bonus = LISTWISE_FIRST_SLOT_BONUS[self.model.split("-")[0]]
        return [self.log_odds(text) + (bonus if i == 0 else 0.0) for i, text in enumerate(sections)]

    def _ranking(
        self, request: ModelRequest, prompt: str, items: list[str], rng: random.Random
    ) -> ModelResponse:
        p = request.params
        t = 1.0 if p.temperature is None else p.temperature
        utility = self.listwise_utilities(items)
        letters = [chr(ord("A") + i) for i in range(len(items))]
        texts = []
        for _ in range(p.n or 1):
            if t == 0:
                drawn = utility
            else:
                drawn = [u / t - math.log(-math.log(rng.random() or 1e-300)) for u in utility]
            order = sorted(range(len(items)), key=lambda i: -drawn[i])
            full = "best first" in prompt
            texts.append(", ".join(letters[i] for i in order) if full else letters[order[0]])
        logprobs = None
        if p.wants_logprobs:
            top = max(utility)
            weights = [math.exp((u - top) / max(t, 1e-6)) for u in utility]
            total = sum(weights)
            probs = [w / total for w in weights]
            logprobs = tuple(
                _first_token_logprobs(text.split(",")[0], letters, probs, p.top_logprobs)
                for text in texts
            )
        return self._response(prompt, texts, logprobs)

    def log_odds(self, prompt: str) -> float:
        """The planted log-odds of a favourable answer for this prompt."""
        lowered = prompt.lower()
        cues = sum(lowered.count(c) for c in STRONG_CUES) - sum(lowered.count(c) for c in WEAK_CUES)
        seed = _digest("noise", prompt) if not self.world else _digest("noise", self.world, prompt)
        noise = random.Random(seed).gauss(0.0, 0.3)
        names = set(_WORD.findall(prompt))
        shift = self._shift if names & DISADVANTAGED_NAMES else 0.0
        own = 0.0
        if self.name_sd:
            own = sum(self.name_effect(name) for name in _NAME_LINE.findall(prompt))
        return max(-3.0, min(3.0, 0.6 * cues)) + noise + shift + own

    def name_effect(self, name: str) -> float:
        """The name's own effect on the log-odds (``name_sd``; 0 where it is 0)."""
        if not self.name_sd:
            return 0.0
        draw = random.Random(_digest("name", self.world, name.strip()))
        return draw.gauss(0.0, self.name_sd)

    def _distribution(self, prompt: str) -> tuple[list[str], list[float]]:
        options = _option_sections(prompt)
        if options is not None:
            return self._judge(options, selection="Selection:" in prompt)
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

    def _judge(self, options: list[str], *, selection: bool) -> tuple[list[str], list[float]]:
        """Option 1 with probability p, else the option of highest content score."""
        scores = [self.log_odds(text) for text in options]
        best = max(range(len(options)), key=scores.__getitem__)
        probs = [0.0] * len(options)
        probs[0] += self.first_option_rate
        probs[best] += 1.0 - self.first_option_rate
        prefix = "Selection: " if selection else ""
        return [f"{prefix}Option {k}" for k in range(1, len(options) + 1)], probs


def _option_sections(prompt: str) -> list[str] | None:
    """The texts of options 1..n of a multiple-choice prompt, or None if it is not one."""
    markers = list(_OPTION_MARKER.finditer(prompt))
    if len(markers) < 2 or [int(m.group(1)) for m in markers] != list(range(1, len(markers) + 1)):
        return None
    ends = [m.start() for m in markers[1:]] + [len(prompt)]
    sections = [prompt[m.end() : end].strip() for m, end in zip(markers, ends, strict=True)]
    sections[-1] = sections[-1].rsplit("\n\n", 1)[0].strip()
    return sections


def _prompt_text(request: ModelRequest) -> str:
    if request.prompt is not None:
        return request.prompt
    users = [m for m in request.messages or () if m.get("role") == "user"]
    content = (users or list(request.messages or ()))[-1]["content"]
    if isinstance(content, list):  # content parts
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _listwise_sections(prompt: str) -> list[str] | None:
    """The texts of items A, B, C, ... of a listwise prompt (three or more), or None."""
    first = _PAIR_MARKER.search(prompt)
    if first is None:
        return None
    noun = first.group(1)
    markers = list(re.finditer(rf"^{noun} ([A-Z]):", prompt, re.MULTILINE))
    letters = [m.group(1) for m in markers]
    if len(markers) < 3 or letters != [chr(ord("A") + i) for i in range(len(markers))]:
        return None
    ends = [m.start() for m in markers[1:]] + [len(prompt)]
    sections = [prompt[m.end() : end].strip() for m, end in zip(markers, ends, strict=True)]
    sections[-1] = sections[-1].rsplit("\n\n", 1)[0].strip()
    return sections


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
