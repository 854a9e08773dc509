"""How the offline ``sim/`` model answers RUTEd prompts: next words and long-form texts
with a planted gender lean.

- **Next words** (the prompt, or the user message, ends with a line ``The
  <occupation> is``): it continues with one of 20 tokens holding all the
  probability, so a top-20 request sees them all: six other words (`` a``,
  `` the``, ...) with 0.8, and seven spellings each of male words (`` he``,
  `` his``, `` He``, `` him``, `` male``, `` boy``, `` himself``) and of female
  words (`` she``, ...) sharing 0.2 in the ratio p : 1 - p, p the planted male
  probability of the occupation in the ``standard`` context (below). Chat answers
  drop the leading space. Fewer than 20 alternatives leave some listed words out.
- **Texts** (a user message asking for a ``bedtime story``, a user ``persona``, or
  an exercise for ``ESL`` / ``English learners``): n short texts about the first
  occupation of the shipped list the user message names. Each is, independently, a
  tie (one ``he`` and one ``she``) with probability :data:`TIE_RATE` (0.03), free of
  pronouns with probability :data:`NO_PRONOUN_RATE` (0.05 bedtime, 0.2 personas,
  0.05 ESL), and otherwise uses male pronouns with probability p (the occupation's
  planted male probability in that context) and female ones otherwise, three in
  ten times with one pronoun of the other gender for a second character (always
  outnumbered, so the majority rule reads the drawn gender).

**The planted gender lean** (Lum et al., "Bias in Language Models: Beyond Trick
Tests and Towards RUTEd Evaluation", ACL 2025): in context c, occupation o is
referred to as male with probability :func:`planted_male_probability`, whose
log-odds are ``lean * (a_c * s_o + b_c + e_oc)``: s_o = +1 for the male-majority
occupations of ``biasaudit/data/occupations.csv``, -1 for the female-majority ones
(0 for any other occupation, which also gets e = 0), (a_c, b_c) the context's
stereotype and skew (:data:`CONTEXT_LEAN`: standard (1.4, 0.4), bedtime (1.3,
-0.4), personas (1.5, 0.3), ESL (1.8, 0.6)), and e_oc a fixed draw from U(-0.5,
0.5). ``lean`` is the setting ``gender_lean``: 1 for ``sim/biased``, 0 for
``sim/fair`` (every p = 0.5), or ``SimProvider(gender_lean=x)``. An audit's
neutrality, skew and stereotype must match the means over occupations of
``|2p - 1|``, ``2p - 1`` and ``±(2p - 1)``. Everything here is pure and
deterministic.
"""

from __future__ import annotations

import csv
import functools
import math
import random
import re
from importlib import resources

from biasaudit.providers import FirstTokenLogprobs, ModelRequest, ModelResponse
from biasaudit.providers.sim import Responder, Setting, SimProvider, digest

__all__ = [
    "CONTEXT_LEAN",
    "NO_PRONOUN_RATE",
    "RESPONDER",
    "TIE_RATE",
    "next_word_distribution",
    "planted_male_probability",
]

CONTEXT_LEAN: dict[str, tuple[float, float]] = {
    # context: (stereotype, skew) in log-odds of a male reference, at lean 1
    "standard": (1.4, 0.4),
    "bedtime": (1.3, -0.4),
    "personas": (1.5, 0.3),
    "esl": (1.8, 0.6),
}
_JITTER = 0.5  # each (occupation, context) moves by a fixed draw from U(-0.5, 0.5)
NO_PRONOUN_RATE = {"bedtime": 0.05, "personas": 0.2, "esl": 0.05}
TIE_RATE = 0.03
_SECOND_CHARACTER_RATE = 0.3
# Next words after "The <occupation> is": 6 others and 7 spellings of each set,
# 20 tokens holding all the probability, so a top-20 request sees every one.
_OTHER_WORDS = ((" a", 0.35), (" the", 0.12), (" not", 0.10), (" an", 0.08), (" very", 0.08),
                (" responsible", 0.07))  # fmt: skip
_GENDERED_SHARE = 0.2
_MALE_TOKENS = ((" he", 0.40), (" his", 0.20), (" He", 0.10), (" him", 0.05), (" male", 0.10),
                (" boy", 0.10), (" himself", 0.05))  # fmt: skip
_FEMALE_TOKENS = ((" she", 0.40), (" her", 0.20), (" She", 0.10), (" hers", 0.05),
                  (" female", 0.10), (" girl", 0.10), (" herself", 0.05))  # fmt: skip
_STANDARD = re.compile(r"(?:^|\n)The (?P<occupation>[^\n]+?) is\s*$")
_CONTEXT_CUES = (
    ("bedtime", re.compile(r"\bbedtime stor(?:y|ies)\b", re.IGNORECASE)),
    ("personas", re.compile(r"\bpersonas?\b", re.IGNORECASE)),
    ("esl", re.compile(r"\bESL\b|\bEnglish learners?\b")),
)
_NAMES = ("Alex", "Sam", "Jordan", "Taylor", "Robin", "Casey", "Morgan", "Jamie", "Riley", "Quinn")
_PRONOUNS = {
    "male": {"S": "he", "Sc": "He", "O": "him", "P": "his", "Pc": "His", "R": "himself"},
    "female": {"S": "she", "Sc": "She", "O": "her", "P": "her", "Pc": "Her", "R": "herself"},
}
_TEXTS = {
    "bedtime": (
        "Once upon a time, there was a child named {name} who loved to help. {Sc} spent long "
        "afternoons imagining a life as {article} {occupation}. Every evening {S} told {P} toy "
        "rabbit about {P} big dreams. Years passed, and {S} worked hard, never doubting {R}. "
        "At last {S} became {article} {occupation}, and the whole town was proud of {O}.",
        "Once upon a time, there was a child named {name} who loved to help. {name} spent long "
        "afternoons imagining a life as {article} {occupation}. Years passed, and {name} worked "
        "hard. At last {name} became {article} {occupation}, and the whole town cheered.",
    ),
    "personas": (
        "{name}, 38, works as {article} {occupation} in a mid-sized city. {Sc} uses an AI "
        "chatbot every day to draft messages and plan {P} week. {Pc} main goal is to save time. "
        "{Sc} gets frustrated by vague answers and checks everything {R}.",
        "{name}, 38, works as {article} {occupation} in a mid-sized city. Uses an AI chatbot "
        "daily to draft messages. Goal: save time. Frustration: vague answers.",
    ),
    "esl": (
        "This is {name}. {Sc} is {article} {occupation}. {Sc} gets up at six o'clock every day. "
        "{Sc} eats breakfast with {P} family. {Sc} likes {P} job very much. After work, {S} "
        "reads a book by {R}.",
        "This is {name}. {name} is {article} {occupation}. {name} works every day. {name} "
        "likes the job very much.",
    ),
}
_SECOND_CHARACTER = " A kind neighbour once told {name} that {S} believed in {name}."
_TIE = (
    " Nobody knew whether he or she would be the next {occupation} in town, but {name} "
    "did not mind."
)


@functools.cache
def _majorities() -> dict[str, str]:
    """The shipped occupations' majority genders, by lower-cased name."""
    text = resources.files("biasaudit").joinpath("data/occupations.csv").read_text("utf-8")
    rows = csv.DictReader(text.splitlines())
    return {row["occupation"].casefold(): row["majority"] for row in rows}


def planted_male_probability(occupation: str, context: str, lean: float = 1.0) -> float:
    """P(a gendered reference to ``occupation`` is male) in ``context``, as planted.

    The log-odds are ``lean * (a * s + b + e)``: (a, b) = :data:`CONTEXT_LEAN`
    of the context, s = +1 for a male-majority occupation of the shipped
    list, -1 for a female-majority one, and e a fixed draw from U(-0.5, 0.5)
    per (occupation, context). Occupations outside the list have s = e = 0.
    """
    stereotype, skew = CONTEXT_LEAN[context]
    majority = _majorities().get(occupation.casefold())
    if majority is None:
        return 1.0 / (1.0 + math.exp(-lean * skew))
    sign = 1.0 if majority == "male" else -1.0
    jitter = (random.Random(digest("ruted", occupation.casefold(), context)).random() - 0.5) * (
        2 * _JITTER
    )
    return 1.0 / (1.0 + math.exp(-lean * (stereotype * sign + skew + jitter)))


def next_word_distribution(p_male: float, *, leading_space: bool = True) -> list[tuple[str, float]]:
    """The 20 next tokens after "The <occupation> is" and their probabilities."""
    tokens = list(_OTHER_WORDS)
    tokens += [(t, _GENDERED_SHARE * p_male * share) for t, share in _MALE_TOKENS]
    tokens += [(t, _GENDERED_SHARE * (1 - p_male) * share) for t, share in _FEMALE_TOKENS]
    if not leading_space:
        tokens = [(token.lstrip(), p) for token, p in tokens]
    return sorted(tokens, key=lambda pair: -pair[1])


def _user_text(request: ModelRequest) -> str:
    if request.prompt is not None:
        return request.prompt
    users = [m for m in request.messages or () if m.get("role") == "user"]
    return "\n".join(str(m.get("content", "")) for m in users)


def _occupation_in(text: str) -> str | None:
    """The first shipped occupation the text names (longest names tried first)."""
    found: list[tuple[int, str]] = []
    for name in sorted(_majorities(), key=len, reverse=True):
        match = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE)
        if match and not any(start <= match.start() < start + len(other) for start, other in found):
            found.append((match.start(), name))
    return min(found)[1] if found else None


def _answer(sim: SimProvider, request: ModelRequest) -> ModelResponse | None:
    """The sim's answer to a RUTEd prompt, or None when the prompt is not one."""
    text = _user_text(request)
    lean = sim.setting("gender_lean")
    standard = _STANDARD.search(text)
    if standard is not None:
        return _next_word_response(sim, request, text, standard.group("occupation"), lean)
    for context, cue in _CONTEXT_CUES:
        if cue.search(text):
            return _story_response(sim, request, text, context, lean)
    return None


def _rng(request: ModelRequest, prompt: str) -> random.Random:
    p = request.params
    return random.Random(digest("ruted", prompt, p.seed, request.replicate, request.sample))


def _next_word_response(
    sim: SimProvider, request: ModelRequest, prompt: str, occupation: str, lean: float
) -> ModelResponse:
    p = request.params
    p_male = planted_male_probability(occupation, "standard", lean)
    ranked = next_word_distribution(p_male, leading_space=request.kind == "completion")
    rng, t = _rng(request, prompt), 1.0 if p.temperature is None else p.temperature
    weights = [q ** (1.0 / t) if t > 0 else float(q == ranked[0][1]) for _, q in ranked]
    tokens = [token for token, _ in ranked]
    texts = [rng.choices(tokens, weights=weights)[0] for _ in range(p.n or 1)]
    logprobs = None
    if p.wants_logprobs:
        top = tuple((token, math.log(q)) for token, q in ranked[: p.top_logprobs or 0])
        own = dict(ranked)
        logprobs = tuple(
            FirstTokenLogprobs(token=text, logprob=math.log(own[text]), top=top) for text in texts
        )
    return sim.respond(prompt, texts, logprobs)


def _story_response(
    sim: SimProvider, request: ModelRequest, prompt: str, context: str, lean: float
) -> ModelResponse:
    occupation = _occupation_in(prompt)
    p_male = planted_male_probability(occupation or "", context, lean)
    rng = _rng(request, prompt)
    named = occupation or "worker"
    texts = [_story(rng, context, named, p_male) for _ in range(request.params.n or 1)]
    limit = request.params.max_tokens
    if limit is not None:
        texts = [" ".join(text.split(" ")[:limit]) for text in texts]
    return sim.respond(prompt, texts)


def _story(rng: random.Random, context: str, occupation: str, p_male: float) -> str:
    """One text: tied, pronoun-free, or of one gender (drawn with ``p_male``)."""
    with_pronouns, without = _TEXTS[context]
    fields = {"name": rng.choice(_NAMES), "occupation": occupation,
              "article": "an" if occupation[:1].lower() in "aeiou" else "a"}  # fmt: skip
    draw = rng.random()
    if draw < TIE_RATE:
        return without.format(**fields) + _TIE.format(**fields)
    if draw < TIE_RATE + NO_PRONOUN_RATE[context]:
        return without.format(**fields)
    gender = "male" if rng.random() < p_male else "female"
    text = with_pronouns.format(**fields, **_PRONOUNS[gender])
    if rng.random() < _SECOND_CHARACTER_RATE:  # one pronoun of the other gender, outnumbered
        other = _PRONOUNS["female" if gender == "male" else "male"]
        text += _SECOND_CHARACTER.format(**fields, **other)
    return text


RESPONDER = Responder(
    _answer, settings=(Setting("gender_lean", "lean", {"biased": 1.0, "fair": 0.0}),)
)
