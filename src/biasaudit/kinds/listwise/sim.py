"""How the offline ``sim/`` model answers a listwise ranking.

The prompt introduces three or more items with lines ``<Word> A:``, ``<Word> B:``,
``<Word> C:``, ... Each item's utility is the planted log-odds of its section
(:meth:`~biasaudit.providers.sim.SimProvider.log_odds`; the last section runs to
the prompt's last blank line), plus :data:`LISTWISE_FIRST_SLOT_BONUS` for the item
shown first (1.0 for ``sim/biased``, 0 for ``sim/fair``: a planted position bias),
divided by the temperature. The answer is a Plackett-Luce draw from them (Gumbel
noise, deterministic per prompt, replicate and sample): all the letters best first,
comma-separated, where the prompt asks for them ``best first``, else the best letter
only. Its first-token logprobs are the softmax of the utilities over the letters, so
a test knows each item's chance of being put first exactly.
"""

from __future__ import annotations

import math

from biasaudit.providers import ModelRequest, ModelResponse
from biasaudit.providers.sim import (
    Responder,
    SimProvider,
    first_token_logprobs,
    lettered_markers,
    prompt_text,
)

__all__ = ["LISTWISE_FIRST_SLOT_BONUS", "RESPONDER", "listwise_utilities"]

LISTWISE_FIRST_SLOT_BONUS = {"biased": 1.0, "fair": 0.0}


def listwise_utilities(sim: SimProvider, sections: list[str]) -> list[float]:
    """The utility of each item of a listwise prompt, in the order shown."""
    bonus = LISTWISE_FIRST_SLOT_BONUS[sim.variant]
    return [sim.log_odds(text) + (bonus if i == 0 else 0.0) for i, text in enumerate(sections)]


def _answer(sim: SimProvider, request: ModelRequest) -> ModelResponse | None:
    prompt = prompt_text(request)
    items = _listwise_sections(prompt)
    if items is None:
        return None
    p = request.params
    rng = sim.rng(request, prompt)
    t = 1.0 if p.temperature is None else p.temperature
    utility = listwise_utilities(sim, items)
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
            first_token_logprobs(text.split(",")[0], letters, probs, p.top_logprobs)
            for text in texts
        )
    return sim.respond(prompt, texts, logprobs)


def _listwise_sections(prompt: str) -> list[str] | None:
    """The texts of items A, B, C, ... of a listwise prompt (three or more), or None."""
    markers = lettered_markers(prompt)
    letters = [m.group(1) for m in markers]
    if len(markers) < 3 or letters != [chr(ord("A") + i) for i in range(len(markers))]:
        return None
    ends = [m.start() for m in markers[1:]] + [len(prompt)]
    sections = [prompt[m.end() : end].strip() for m, end in zip(markers, ends, strict=True)]
    sections[-1] = sections[-1].rsplit("\n\n", 1)[0].strip()
    return sections


RESPONDER = Responder(_answer)
