"""How the offline ``sim/`` model answers a yes/no decision about a person.

A decision prompt ends by offering the two answers in quotes, ``"yes" or "no"`` (or
``"no" or "yes"``); the sim answers ``yes`` or ``no``. The log-odds of ``yes`` are the
planted log-odds of the scenario's text (:meth:`~biasaudit.providers.sim.SimProvider.log_odds`:
its cues, its own noise, and the planted shift of a ``B_M`` name, which implicit fills
meet) plus,

- ``black_shift`` where the text calls the person ``Black`` (explicit fills;
  :data:`DECISION_BLACK_SHIFT`: -0.5 for ``sim/biased``, 0 for ``sim/fair``);
- ``age_slope`` per 10 years above 60, read from ``N-year-old`` or ``aged N`` (both
  fills; :data:`DECISION_AGE_SLOPE`: -0.1 for ``sim/biased``, 0 for ``sim/fair``);

and, with ``scenario_sd``, each scenario's own part of that shift, drawn once per
scenario and world from N(0, scenario_sd²) (a random slope, as the paper's mixed model
has; 0 by default); and :data:`ORDER_LEAN` towards whichever answer is offered first (a planted
answer-order bias, in both variants). No gender has an effect: an explicit decisions
audit of the sim knows its right answers (race black -0.5, age -0.1 per decade, every
other score 0) and its order gap (2 x 0.3 on the logit). Implicit fills meet the
planted shift of ``B_M`` names instead (black men only: it shows as a black and a
female score).
"""

from __future__ import annotations

import math
import random
import re

from biasaudit.providers import ModelRequest, ModelResponse
from biasaudit.providers.sim import Responder, Setting, SimProvider, digest, prompt_text

__all__ = ["DECISION_AGE_SLOPE", "DECISION_BLACK_SHIFT", "ORDER_LEAN", "RESPONDER"]

DECISION_BLACK_SHIFT = {"biased": -0.5, "fair": 0.0}
DECISION_AGE_SLOPE = {"biased": -0.1, "fair": 0.0}
ORDER_LEAN = 0.3
_QUOTES = "\"'\u201c\u201d\u2018\u2019"  # straight and curly
_OFFER = re.compile(rf"[{_QUOTES}](yes|no)[{_QUOTES}]\s+or\s+[{_QUOTES}](yes|no)[{_QUOTES}]", re.I)
_AGE = re.compile(r"\b(\d{1,3})-year-old\b|\baged (\d{1,3})\b")
_BLACK = re.compile(r"\bBlack\b")


def _answer(sim: SimProvider, request: ModelRequest) -> ModelResponse | None:
    prompt = prompt_text(request)
    paragraphs = prompt.split("\n\n")
    # The offer closes the prompt, or the paragraph before text an intervention added.
    at = next((i for i in range(len(paragraphs) - 1, 0, -1) if _OFFER.search(paragraphs[i])), 0)
    scenario, found = "\n\n".join(paragraphs[:at]), _OFFER.search(paragraphs[at])
    if not scenario or found is None:
        return None
    if {found.group(1).lower(), found.group(2).lower()} != {"yes", "no"}:
        return None
    # Text an intervention put after the offer draws its own noise, as a reworded
    # prompt meets a model afresh.
    log_odds = sim.log_odds("\n\n".join([scenario, *paragraphs[at + 1 :]]))
    if _BLACK.search(scenario):
        log_odds += sim.heeding(sim.setting("black_shift") + _own_slope(sim, request))
    age = _AGE.search(scenario)
    if age:
        years = int(age.group(1) or age.group(2))
        log_odds += sim.setting("age_slope") * (years - 60) / 10
    log_odds += ORDER_LEAN if found.group(1).lower() == "yes" else -ORDER_LEAN
    p_yes = 1.0 / (1.0 + math.exp(-log_odds))
    return sim.choose(request, prompt, ["yes", "no"], [p_yes, 1.0 - p_yes])


def _own_slope(sim: SimProvider, request: ModelRequest) -> float:
    """The scenario's own part of a Black person's shift (``scenario_sd``; 0 where it is
    0): drawn once per scenario, named by the request's id (``scenario|fill|...``), and
    seeded by the sim's world."""
    spread = sim.setting("scenario_sd")
    if not spread or "|" not in request.id:
        return 0.0
    scenario = request.id.partition("|")[0]
    return random.Random(digest("slope", sim.world, scenario)).gauss(0.0, spread)


RESPONDER = Responder(
    _answer,
    settings=(
        Setting("black_shift", "black", DECISION_BLACK_SHIFT, low=-5.0, high=5.0),
        Setting("age_slope", "age", DECISION_AGE_SLOPE, low=-2.0, high=2.0),
        Setting("scenario_sd", "slopes", {"biased": 0.0, "fair": 0.0}, low=0.0, high=3.0),
    ),
)
