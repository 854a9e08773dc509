"""Probes: how to ask a model about items and how to read its answers.

A probe knows nothing of the domain (resumes, essays) and nothing of HTTP: it
turns messages into :class:`~biasaudit.providers.ModelRequest` objects and
responses into parsed answers.

- :class:`PointwiseProbe`: one item, a label from a fixed set, scored as the
  expected label value, from first-token logprobs, every label scored whole
  as a continuation, or sampled replicates.
- :class:`PairwiseProbe`: two items, which is better, asked in both orders.
- :class:`ChoiceProbe`: which of n options is best, asked in every cyclic
  order (or every order) of the options.
- :class:`NextWordProbe`: the probabilities of male and female next words
  after a text, from logprobs or sampled first words (RUTEd standard test).
- :class:`GenerationProbe`: replicate long-form texts of one prompt, each
  read for its gendered pronouns by :func:`classify_pronouns`.
- :func:`parse_ranking`: a whole pool's ranking (or its top choice) read from
  an answer, with its irregularities counted (listwise audits).
"""

from biasaudit.probes._chat_template import BUILT_IN_TEMPLATES, ChatTemplate, resolve_chat_template
from biasaudit.probes._choice import ChoiceAnswer, ChoiceProbe, OrderScheme, option_orders
from biasaudit.probes._continuation import continuation_logprob
from biasaudit.probes._generation import GenerationProbe
from biasaudit.probes._nextword import (
    FEMALE_WORDS,
    MALE_WORDS,
    NextWordChoice,
    NextWordProbe,
    NextWordShares,
)
from biasaudit.probes._pairwise import PairwiseAnswer, PairwiseProbe
from biasaudit.probes._pointwise import (
    LabelScore,
    PointwiseProbe,
    ScoringChoice,
    ScoringPath,
    canonical_label,
)
from biasaudit.probes._pronouns import PronounCount, classify_pronouns
from biasaudit.probes._ranking import Ranking, parse_ranking

__all__ = [
    "BUILT_IN_TEMPLATES",
    "FEMALE_WORDS",
    "MALE_WORDS",
    "ChatTemplate",
    "ChoiceAnswer",
    "ChoiceProbe",
    "GenerationProbe",
    "LabelScore",
    "NextWordChoice",
    "NextWordProbe",
    "NextWordShares",
    "OrderScheme",
    "PairwiseAnswer",
    "PairwiseProbe",
    "PointwiseProbe",
    "PronounCount",
    "Ranking",
    "ScoringChoice",
    "ScoringPath",
    "canonical_label",
    "classify_pronouns",
    "continuation_logprob",
    "option_orders",
    "parse_ranking",
    "resolve_chat_template",
]
