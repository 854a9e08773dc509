"""How the offline ``sim/`` model answers a pairwise comparison of two candidates.

The prompt introduces two items with lines ``<Word> A:`` and ``<Word> B:`` (e.g.
``Candidate A:`` / ``Candidate B:``) and no third; the sim answers the letter ``A``
or ``B``. Section A runs from its marker to the ``B`` marker, section B from there
to the prompt's last blank line (the closing question belongs to neither). The
log-odds of ``A`` are the planted log-odds of section A minus those of section B
(:meth:`~biasaudit.providers.sim.SimProvider.log_odds`: the cues, the noise and
the planted name shift), plus :data:`PAIRWISE_POSITION_BIAS` in favour of whichever
item is shown first, so greedy answers between near-equal items flip with the
order, as real judges' do. A pointwise prompt (Yes/No, a rating) is one of the
sim's own shapes (:mod:`biasaudit.providers.sim`).
"""

from __future__ import annotations

import math

from biasaudit.providers import ModelRequest, ModelResponse
from biasaudit.providers.sim import Responder, SimProvider, lettered_markers, prompt_text

__all__ = ["PAIRWISE_POSITION_BIAS", "RESPONDER"]

PAIRWISE_POSITION_BIAS = 0.5


def _answer(sim: SimProvider, request: ModelRequest) -> ModelResponse | None:
    prompt = prompt_text(request)
    sections = _pairwise_sections(prompt)
    if sections is None:
        return None
    first, second = sections
    gap = sim.log_odds(first) - sim.log_odds(second) + PAIRWISE_POSITION_BIAS
    p_first = 1.0 / (1.0 + math.exp(-gap))
    return sim.choose(request, prompt, ["A", "B"], [p_first, 1.0 - p_first])


def _pairwise_sections(prompt: str) -> tuple[str, str] | None:
    """The texts of items A and B of a pairwise prompt, or None if it is not one (a
    prompt of three or more lettered items is a ranking's)."""
    markers = lettered_markers(prompt)
    letters = [m.group(1) for m in markers]
    if len(markers) >= 3 and letters == [chr(ord("A") + i) for i in range(len(markers))]:
        return None
    first_marker = next((m for m in markers if m.group(1) == "A"), None)
    if first_marker is None:
        return None
    later = (m for m in markers if m.group(1) == "B" and m.start() >= first_marker.end())
    second = next(later, None)
    if second is None:
        return None
    first = prompt[first_marker.end() : second.start()]
    rest = prompt[second.end() :].strip()
    return first, rest.rsplit("\n\n", 1)[0] if "\n\n" in rest else rest


RESPONDER = Responder(_answer)
