"""Probes: how to ask a model about items and how to read its answers.

A probe knows nothing of the domain (resumes, essays) and nothing of HTTP: it
turns messages into :class:`~biasaudit.providers.ModelRequest` objects and
responses into parsed answers.

- :class:`PointwiseProbe`: one item, a label from a fixed set, scored as the
  expected label value, from first-token logprobs or sampled replicates.
- :class:`PairwiseProbe`: two items, which is better, asked in both orders.
"""

from ._pairwise import PairwiseAnswer, PairwiseProbe
from ._pointwise import LabelScore, PointwiseProbe, ScoringChoice, ScoringPath, canonical_label

__all__ = [
    "LabelScore",
    "PairwiseAnswer",
    "PairwiseProbe",
    "PointwiseProbe",
    "ScoringChoice",
    "ScoringPath",
    "canonical_label",
]
