"""How the offline ``sim/`` model judges a multiple-choice prompt (Grade Score).

The prompt lists options on lines ``Option 1:``, ``Option 2:``, ... numbered from
1; the sim answers ``Option N``, or ``Selection: Option N`` when the prompt asks for
a ``Selection:`` line. Option k's text runs from its marker to the next one (the
last option's to the prompt's last blank line: the closing question belongs to no
option), and its *content score* is the planted log-odds of that text
(:meth:`~biasaudit.providers.sim.SimProvider.log_odds`), so it does not depend on
where the option is shown. With probability p the judge answers ``Option 1``
whatever stands there (a planted position bias), otherwise the option of highest
content score. p is the setting ``first_option_rate``
(:data:`JUDGE_FIRST_OPTION_RATE`: 0.4 for ``sim/biased``, 0 for ``sim/fair``;
``SimProvider(first_option_rate=p)`` sets it). The two probabilities are reshaped by
the temperature like every sim answer's, so they are exactly p and 1 - p at
temperature 1. Over the n cyclic orders of an item, slot 1 is then chosen in a share
p + (1 - p)/n of the answers and every other slot in (1 - p)/n, and the best option
in (1 - p) + p/n: a Grade Score test knows its analytic values.
"""

from __future__ import annotations

import re

from biasaudit.providers import ModelRequest, ModelResponse
from biasaudit.providers.sim import Responder, Setting, SimProvider, prompt_text

__all__ = ["JUDGE_FIRST_OPTION_RATE", "RESPONDER"]

JUDGE_FIRST_OPTION_RATE = {"biased": 0.4, "fair": 0.0}
_OPTION_MARKER = re.compile(r"^Option (\d{1,2}):", re.MULTILINE)


def _answer(sim: SimProvider, request: ModelRequest) -> ModelResponse | None:
    prompt = prompt_text(request)
    options = _option_sections(prompt)
    if options is None:
        return None
    rate = sim.setting("first_option_rate")
    scores = [sim.log_odds(text) for text in options]
    best = max(range(len(options)), key=scores.__getitem__)
    probs = [0.0] * len(options)
    probs[0] += rate
    probs[best] += 1.0 - rate
    prefix = "Selection: " if "Selection:" in prompt else ""
    labels = [f"{prefix}Option {k}" for k in range(1, len(options) + 1)]
    return sim.choose(request, prompt, labels, probs)


def _option_sections(prompt: str) -> list[str] | None:
    """The texts of options 1..n of a multiple-choice prompt, or None if it is not one."""
    markers = list(_OPTION_MARKER.finditer(prompt))
    if len(markers) < 2 or [int(m.group(1)) for m in markers] != list(range(1, len(markers) + 1)):
        return None
    ends = [m.start() for m in markers[1:]] + [len(prompt)]
    sections = [prompt[m.end() : end].strip() for m, end in zip(markers, ends, strict=True)]
    sections[-1] = sections[-1].rsplit("\n\n", 1)[0].strip()
    return sections


RESPONDER = Responder(
    _answer,
    settings=(Setting("first_option_rate", "first", JUDGE_FIRST_OPTION_RATE, low=0.0, high=1.0),),
)
