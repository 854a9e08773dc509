"""Replicate similarity: do a model's texts for one prompt all say the same thing?

The mode-collapse check of Lum et al., "Bias in Language Models: Beyond Trick
Tests and Towards RUTEd Evaluation" (ACL 2025), §4.4: a model whose replicates
of one prompt are near copies has not been measured over many texts but over
one, repeated, so the long-form metrics rest on fewer independent draws than
their n says. Each text is embedded (a sentence-embedding model, unit
vectors); for each unit u (an occupation in one context) with texts
:math:`e_1..e_n`,

.. math:: s_u = \\frac{2}{n(n-1)} \\sum_{i<j} e_i \\cdot e_j,

the mean cosine similarity over the unit's pairs of replicates. The summary
is the mean of :math:`s_u` over units, with a normal interval over units
(mean ± z·sd/√U: the units are what varies, each replicate set a draw of its
own), and, as the baseline that says what "similar" means for this model and
embedding, the mean similarity of texts of *different* units,

.. math:: b = \\operatorname{mean}_{u \\ne v} \\bar e_u \\cdot \\bar e_v,

where :math:`\\bar e_u` is unit u's mean embedding (so every pair of units
counts once, whatever its number of texts). Where a unit is asked with
several prompts (RUTEd's templates), only replicates of one prompt are
compared, within a unit and between units alike. Within-unit similarity near 1, or
far above the between-unit baseline, says the replicates collapsed onto one
text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from biasaudit.metrics._small_samples import critical_value
from biasaudit.metrics._validate import check_confidence

__all__ = ["ReplicateSimilarity", "replicate_similarity", "unit_similarity"]


@dataclass(frozen=True)
class ReplicateSimilarity:
    """Mean within-unit and between-unit similarity of replicate texts.

    Attributes
    ----------
    within, within_ci:
        Mean over units of each unit's mean pairwise cosine similarity, with its
        normal interval over units (None with fewer than 2 units).
    between:
        Mean cosine similarity of different units' mean embeddings (None with one unit).
    units:
        Units with at least two texts, the ones ``within`` averages.
    by_unit:
        Each such unit's mean pairwise similarity.
    """

    within: float
    within_ci: tuple[float, float] | None
    between: float | None
    units: int
    by_unit: dict[str, float]


def unit_similarity(embeddings: ArrayLike) -> float:
    """Mean pairwise cosine similarity of one unit's texts (rows, normalised here).

    Raises
    ------
    ValueError
        Fewer than two texts, or a zero vector.
    """
    vectors = _unit_rows(embeddings)
    n = len(vectors)
    if n < 2:
        raise ValueError("a unit needs at least two texts to compare")
    total = vectors.sum(axis=0)
    # sum_{i != j} e_i . e_j = |sum e|^2 - sum |e_i|^2, and every |e_i| = 1.
    return float((total @ total - n) / (n * (n - 1)))


def replicate_similarity(
    embeddings: Mapping[tuple[str, str], ArrayLike], *, confidence: float = 0.95
) -> ReplicateSimilarity:
    """The check over units; see the module docstring.

    ``embeddings`` maps ``(unit, prompt)`` to the rows of embeddings of that prompt's
    replicates: a unit (an occupation) may be asked with several prompts (templates),
    and only replicates of one prompt are compared. A unit's similarity is the mean over
    its prompts with at least two texts; ``between`` compares different units' texts of
    the same prompt, averaged over prompts, so a difference of prompts never passes for
    a difference of units.

    Raises
    ------
    ValueError
        No prompt with two texts, or a zero vector.
    """
    check_confidence(confidence)
    vectors = {key: _unit_rows(rows) for key, rows in embeddings.items()}
    vectors = {key: rows for key, rows in vectors.items() if len(rows)}
    per_prompt: dict[str, list[float]] = {}
    for (unit, _), rows in vectors.items():
        if len(rows) >= 2:
            per_prompt.setdefault(unit, []).append(unit_similarity(rows))
    if not per_prompt:
        raise ValueError("no unit has two texts to compare")
    by_unit = {unit: float(np.mean(found)) for unit, found in per_prompt.items()}
    values = np.fromiter(by_unit.values(), dtype=float)
    within = float(values.mean())
    interval = None
    if len(values) >= 2:
        z = critical_value(confidence)
        half = z * float(values.std(ddof=1)) / math.sqrt(len(values))
        interval = (max(-1.0, within - half), min(1.0, within + half))
    return ReplicateSimilarity(within, interval, _between(vectors), len(by_unit), by_unit)


def _between(vectors: Mapping[tuple[str, str], np.ndarray]) -> float | None:
    """Mean over prompts of the mean similarity of different units' texts of that prompt."""
    by_prompt: dict[str, list[np.ndarray]] = {}
    for (_, prompt), rows in vectors.items():
        by_prompt.setdefault(prompt, []).append(rows.mean(axis=0))
    found = []
    for means in by_prompt.values():
        if len(means) >= 2:
            stacked = np.stack(means)
            gram = stacked @ stacked.T
            m = len(means)
            found.append(float((gram.sum() - np.trace(gram)) / (m * (m - 1))))
    return float(np.mean(found)) if found else None


def _unit_rows(embeddings: ArrayLike) -> np.ndarray:
    rows = np.atleast_2d(np.asarray(embeddings, dtype=float))
    if rows.size == 0:
        return np.zeros((0, rows.shape[-1]))
    if not np.isfinite(rows).all():
        raise ValueError("embeddings must be finite")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ValueError("an embedding is the zero vector")
    return np.asarray(rows / norms, dtype=float)
