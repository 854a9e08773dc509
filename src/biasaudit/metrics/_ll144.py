"""Selection and scoring rates and impact ratios by category, as NYC Local Law 144 asks.

The rules of the Department of Consumer and Worker Protection (6 RCNY §5-300 ff.)
ask a bias audit of an automated employment decision tool for, per category:

- a **selection rate** (§5-300: the share of the category selected to move forward
  or classified into a group) where the tool selects or classifies, or a **scoring
  rate** (the share of the category scoring above the median score of the full
  sample) where it scores (§5-301(b), (c));
- an **impact ratio**: the category's rate over the rate of the most selected (or
  highest scoring) category (§5-300);
- each computed separately for **sex**, **race/ethnicity** (the EEO-1 component 1
  categories) and the **intersectional** categories of sex, ethnicity and race
  (§5-301(b)(3)): Hispanic or Latino by sex, and each race of those not Hispanic or
  Latino by sex;
- the number of individuals in an **unknown** category, left out of the
  calculations (§5-301(b)(5), (c)(5));
- optionally, categories under **2%** of the data may be left out of the impact
  ratios, their counts and rates still shown with the auditor's justification
  (§5-301(d)).

What biasaudit adds to the rule: every rate carries its **Wilson score interval**
(Wilson, "Probable inference, the law of succession, and statistical inference",
JASA 22, 1927) and every impact ratio the **Katz log interval** of a ratio of two
independent proportions (Katz, Baptista, Azen & Pike, "Obtaining confidence
intervals for the risk ratio in cohort studies", Biometrics 34, 1978), half a
success and half a trial added to a count of 0 or n. The unit is the individual:
each row of an employer's data is one person assessed once. The reference category
is chosen from the same data as the most selected one, so an interval that holds the
reference's rate fixed would be too narrow; Katz's interval counts both rates'
errors. The **four-fifths flag** is the EEOC's rule of thumb (29 CFR 1607.4(D)): an
impact ratio under 0.8; a flag is **beyond noise** when the whole interval lies
under 0.8.

For scores, the median is that of every individual assessed (unknown categories
included: the "full sample"), held fixed in the intervals; an individual exactly at
the median does not score above it, and how many do is reported (ties at the median
move a scoring rate by a whole category's worth of them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

from biasaudit.metrics._listwise import FOUR_FIFTHS
from biasaudit.metrics._small_samples import critical_value
from biasaudit.metrics._units import MIN_UNITS, Units
from biasaudit.metrics._validate import check_confidence

__all__ = [
    "HISPANIC",
    "RACE_CATEGORIES",
    "SEX_CATEGORIES",
    "SMALL_SHARE",
    "CategoryRate",
    "LL144Rates",
    "impact_ratio_interval",
    "intersectional_category",
    "ll144_rates",
    "ll144_unit_rates",
    "wilson_interval",
]

SEX_CATEGORIES = ("Male", "Female")
HISPANIC = "Hispanic or Latino"
RACE_CATEGORIES = (
    HISPANIC,
    "White",
    "Black or African American",
    "Native Hawaiian or Pacific Islander",
    "Asian",
    "Native American or Alaska Native",
    "Two or More Races",
)
"""The EEO-1 race/ethnicity categories, in the order of the rule's tables; every one but
the first is "(Not Hispanic or Latino)"."""
SMALL_SHARE = 0.02
"""A category under this share of the data may be left out of the impact ratios
(§5-301(d))."""
DIMENSIONS = ("sex", "race/ethnicity", "intersectional")


def race_label(race: str) -> str:
    """A race/ethnicity category as the rule's tables name it."""
    return race if race == HISPANIC else f"{race} (Not Hispanic or Latino)"


def intersectional_category(sex: str, race: str) -> str:
    """The intersectional category of ``sex`` and ``race`` (§5-301(b)(3)(iii))."""
    return f"{race_label(race)}, {sex}"


@dataclass(frozen=True)
class CategoryRate:
    """One category's row of the summary.

    ``selected`` counts those selected (or scoring above the median); ``rate`` is
    ``selected / n`` with its Wilson interval ``(low, high)``. ``ratio`` is the impact
    ratio with its Katz interval (None for a category left out as small, or with no
    one assessed); the reference category (``ratio`` 1) has no interval. ``share`` is
    the category's share of every individual assessed.
    """

    dimension: str
    category: str
    n: int
    selected: int | None
    rate: float | None
    low: float | None
    high: float | None
    ratio: float | None
    ratio_low: float | None
    ratio_high: float | None
    share: float
    reference: bool
    excluded: bool

    @property
    def below_four_fifths(self) -> bool | None:
        """Whether the impact ratio is under 0.8 (None without one)."""
        return None if self.ratio is None else self.ratio < FOUR_FIFTHS

    @property
    def beyond_noise(self) -> bool:
        """Whether the whole interval of the impact ratio lies under 0.8."""
        return self.ratio_high is not None and self.ratio_high < FOUR_FIFTHS


@dataclass(frozen=True)
class LL144Rates:
    """Every category's rates and impact ratios (:func:`ll144_rates`)."""

    kind: str
    assessed: int
    unknown: dict[str, int]
    rows: tuple[CategoryRate, ...]
    confidence: float
    median: float | None = None
    at_median: int = 0

    def of(self, dimension: str) -> list[CategoryRate]:
        """The rows of one dimension: ``sex``, ``race/ethnicity`` or ``intersectional``."""
        return [row for row in self.rows if row.dimension == dimension]


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``successes / n`` (n > 0)."""
    z = critical_value(confidence)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def impact_ratio_interval(
    successes: int, n: int, top_successes: int, top_n: int, confidence: float = 0.95
) -> tuple[float, float] | None:
    """Katz's log interval of ``(successes / n) / (top_successes / top_n)``; None where
    the reference selected no one (the ratio is undefined)."""
    if top_successes == 0:
        return None
    z = critical_value(confidence)
    x, m = _corrected(successes, n)
    y, k = _corrected(top_successes, top_n)
    centre = math.log((x / m) / (y / k))
    spread = z * math.sqrt(1 / x - 1 / m + 1 / y - 1 / k)
    return math.exp(centre - spread), math.exp(centre + spread)


def _corrected(successes: int, n: int) -> tuple[float, float]:
    """A count of 0 or of n, kept off the edges so that its log and its variance are
    finite: half a success added to both, and a trial more to n where all succeeded."""
    if successes in (0, n):
        return successes + 0.5, n + 0.5 if successes == 0 else n + 1.0
    return float(successes), float(n)


def ll144_rates(
    sex: Sequence[str | None],
    race: Sequence[str | None],
    outcome: ArrayLike,
    *,
    kind: str = "selection",
    confidence: float = 0.95,
    exclude_small: bool = False,
) -> LL144Rates:
    """Selection (or scoring) rates and impact ratios of every sex, race/ethnicity and
    intersectional category.

    Parameters
    ----------
    sex, race:
        Each individual's category (:data:`SEX_CATEGORIES`, :data:`RACE_CATEGORIES`), or
        None where unknown: left out of that dimension and of the intersection.
    outcome:
        ``kind="selection"``: 1 selected (or classified into the group), 0 not.
        ``kind="scoring"``: the score; the rate is the share above the median of every
        individual's score.
    exclude_small:
        Leave categories under :data:`SMALL_SHARE` of the individuals out of the impact
        ratios (their counts and rates are still given).
    """
    check_confidence(confidence)
    values = np.asarray(outcome, dtype=float)
    if values.ndim != 1 or values.size != len(sex) or values.size != len(race):
        raise ValueError("sex, race and outcome must be one value per individual")
    if values.size == 0:
        raise ValueError("no individual was assessed")
    if not np.isfinite(values).all():
        raise ValueError("every outcome must be a finite number")
    for name, labels, allowed in (("sex", sex, SEX_CATEGORIES), ("race", race, RACE_CATEGORIES)):
        unknown = {label for label in labels if label is not None and label not in allowed}
        if unknown:
            raise ValueError(f"{name}: not a category of the rule: {sorted(unknown)[:3]}")
    median, at_median = None, 0
    if kind == "scoring":
        median = float(np.median(values))
        at_median = int((values == median).sum())
        chosen = values > median
    elif kind == "selection":
        if not np.isin(values, (0.0, 1.0)).all():
            raise ValueError("a selection outcome must be 0 or 1")
        chosen = values == 1.0
    else:
        raise ValueError(f"kind must be 'selection' or 'scoring', got {kind!r}")
    groups, unknown_counts = _category_masks(sex, race)
    rows: list[CategoryRate] = []
    for dimension, members in groups.items():
        rows += _dimension_rows(dimension, members, chosen, values.size, confidence, exclude_small)
    return LL144Rates(
        kind, int(values.size), unknown_counts, tuple(rows), confidence, median, at_median
    )


def _category_masks(
    sex: Sequence[str | None], race: Sequence[str | None]
) -> tuple[dict[str, list[tuple[str, np.ndarray]]], dict[str, int]]:
    """Per dimension, each category's members (a mask over the individuals), and how many
    individuals each dimension leaves out as unknown."""
    sexes = np.array([label or "" for label in sex], dtype=object)
    races = np.array([label or "" for label in race], dtype=object)
    groups = {
        "sex": [(c, sexes == c) for c in SEX_CATEGORIES],
        "race/ethnicity": [(race_label(c), races == c) for c in RACE_CATEGORIES],
        "intersectional": [
            (intersectional_category(s, r), (sexes == s) & (races == r))
            for r in RACE_CATEGORIES
            for s in SEX_CATEGORIES
        ],
    }
    unknown = {
        "sex": int((sexes == "").sum()),
        "race/ethnicity": int((races == "").sum()),
        "intersectional": int(((sexes == "") | (races == "")).sum()),
    }
    return groups, unknown


def _dimension_rows(
    dimension: str,
    members: list[tuple[str, np.ndarray]],
    chosen: np.ndarray,
    assessed: int,
    confidence: float,
    exclude_small: bool,
) -> list[CategoryRate]:
    counts = []
    for category, mask in members:
        inside = np.asarray(mask, dtype=bool)
        n, selected = int(inside.sum()), int(chosen[inside].sum())
        small = exclude_small and n / assessed < SMALL_SHARE
        counts.append((category, n, selected, small))
    compared = [(n, s) for _, n, s, small in counts if n > 0 and not small]
    top = max(compared, key=lambda pair: pair[1] / pair[0], default=None)
    top_rate = top[1] / top[0] if top is not None else None
    rows = []
    for category, n, selected, small in counts:
        rate = low = high = ratio = ratio_low = ratio_high = None
        reference = False
        if n > 0:
            rate = selected / n
            low, high = wilson_interval(selected, n, confidence)
        if n > 0 and not small and top is not None and top_rate:
            ratio = rate / top_rate if rate is not None else None
            reference = ratio == 1.0
            if not reference:
                bounds = impact_ratio_interval(selected, n, top[1], top[0], confidence)
                if bounds is not None:
                    ratio_low, ratio_high = bounds
        share = n / assessed
        row = (dimension, category, n, selected, rate, low, high, ratio, ratio_low, ratio_high)
        rows.append(CategoryRate(*row, share, reference, small))
    return rows


def ll144_unit_rates(
    sex: Sequence[str | None],
    race: Sequence[str | None],
    scores: ArrayLike,
    units: Units,
    *,
    confidence: float = 0.95,
    replicates: int = 1000,
    seed: int = 0,
) -> LL144Rates:
    """Scoring rates and impact ratios of an audit's candidates, with intervals over the
    units that vary (:class:`~biasaudit.metrics.Units`: names, and the resumes crossed
    with them), not over candidates.

    A candidate of an audit is a name shown with a resume: candidates that share a
    name or a resume are not independent, so the Wilson and Katz intervals of
    :func:`ll144_rates` (one row, one person) would be too narrow. Here each replicate
    resamples the units (Owen's pigeonhole bootstrap, as every allocation figure does)
    and recomputes every category's scoring rate and its ratio to the highest; a rate's
    interval is the estimate ± t·SE (Student t over the fewest names behind the
    category's groups), a ratio's the same on the log scale (a replicate scoring none
    of a category counts as half a candidate), capped at 1. The median is the sample's,
    held fixed, as in :func:`ll144_rates`.
    """
    check_confidence(confidence)
    point = ll144_rates(sex, race, scores, kind="scoring", confidence=confidence)
    values = np.asarray(scores, dtype=float)
    rng = np.random.default_rng(seed)
    groups, _ = _category_masks(sex, race)
    labels = {category: mask for members in groups.values() for category, mask in members}
    replicate_rates: dict[str, list[np.ndarray]] = {category: [] for category in labels}
    block = max(1, 1_000_000 // max(values.size, 1))
    for start in range(0, replicates, block):
        weights = units.weights(rng, min(block, replicates - start))
        # Each replicate's own median: a resume (or name) that lifts every score lifts
        # the median with it, and moves no category's share above it.
        above = values[None, :] > _weighted_medians(values, weights)[:, None]
        for category, mask in labels.items():
            if mask.any():
                total = weights[:, mask].sum(axis=1)
                with np.errstate(invalid="ignore", divide="ignore"):
                    counted = (weights[:, mask] * above[:, mask]).sum(axis=1)
                    replicate_rates[category].append(counted / total)
    rows = []
    for dimension in DIMENSIONS:
        present = [r for r in point.of(dimension) if r.n > 0]
        draws = {r.category: np.concatenate(replicate_rates[r.category]) for r in present}
        top_draws = np.nanmax(np.vstack(list(draws.values())), axis=0) if draws else None
        top = max((r.rate or 0.0 for r in present), default=0.0)
        for row in point.of(dimension):
            if row.n == 0 or row.rate is None or top_draws is None:
                rows.append(row)
                continue
            fewest = int(np.unique(units.units[labels[row.category]]).size)
            if fewest < MIN_UNITS:  # a resample of one name is that name: no interval
                rows.append(replace(row, low=None, high=None, ratio_low=None, ratio_high=None))
                continue
            z = critical_value(confidence, fewest)
            spread = z * float(np.nanstd(draws[row.category], ddof=1))
            low, high = max(0.0, row.rate - spread), min(1.0, row.rate + spread)
            ratio_low = ratio_high = None
            if top > 0 and not row.reference:
                floor = 0.5 / row.n
                with np.errstate(invalid="ignore", divide="ignore"):
                    logged = np.log(np.maximum(draws[row.category], floor) / top_draws)
                logged[~np.isfinite(logged)] = np.nan  # a replicate where no one scored above
                spread = z * float(np.nanstd(logged, ddof=1))
                centre = math.log(max(row.rate, floor) / top)
                ratio_low, ratio_high = (
                    math.exp(centre - spread),
                    min(1.0, math.exp(centre + spread)),
                )
            rows.append(
                replace(row, low=low, high=high, ratio_low=ratio_low, ratio_high=ratio_high)
            )
    return replace(point, rows=tuple(rows))


def _weighted_medians(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The median of ``values`` under each row of ``weights`` (whole-number counts): the
    middle value, or the mean of the two middle ones, as ``numpy.median`` of the values
    repeated that often."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    cumulative = np.cumsum(weights[:, order], axis=1)
    half = cumulative[:, -1] / 2
    lower = np.minimum((cumulative < half[:, None]).sum(axis=1), values.size - 1)
    upper = np.minimum((cumulative <= half[:, None]).sum(axis=1), values.size - 1)
    found: np.ndarray = (ordered[lower] + ordered[upper]) / 2
    return found
