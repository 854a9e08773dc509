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
(Wilson 1927) and every impact ratio an interval that holds **for the whole summary
at once**, with the verdict read off it. The unit is the individual: each row of an
employer's data is one person assessed once.

The impact ratio's reference, the category of the highest rate, is chosen from the
same data: where a small category is high by chance, it becomes the reference and
every other ratio leans low. An interval that held the reference's rate fixed (or
Katz's, which treats a count of 2 out of 2 as nearly certain) then calls noise a
finding. So the ratio is read as what it estimates, ``p_c / max_j p_j``, which is
``min_j p_c / p_j``: with Koopman's score interval ``[L_cj, U_cj]`` of every ratio
of two categories of a dimension (:func:`~biasaudit.metrics.ratio_score_interval`),
all at the critical value that makes every pair of every dimension hold together
when no category differs (:func:`~biasaudit.metrics.pairwise_critical_value`, a
permutation null of the whole summary), the impact ratio lies in
``[min(1, min_j L_cj), min(1, min_j U_cj)]`` for every category at once, whichever
category truly has the highest rate. The reference gets an interval too: the rate
it is taken to have may not be the highest. The **four-fifths flag** is the EEOC's
rule of thumb (29 CFR 1607.4(D)): an impact ratio under 0.8; it is **beyond noise**
where, besides, its interval stops short of 1: the category's rate is below the
highest beyond noise, a difference "significant in both statistical and practical
terms" (ibid.). A summary of data with no difference at all then calls anything
beyond noise in at most 1 - ``confidence`` of summaries (``bench/bench_verdicts.py``
measures it).

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

from biasaudit.metrics._impact import FOUR_FIFTHS
from biasaudit.metrics._proportions import (
    pairwise_critical_value,
    ratio_score_interval,
    wilson_interval,
)
from biasaudit.metrics._resampling import MIN_UNITS, Units
from biasaudit.metrics._small_samples import critical_value
from biasaudit.metrics._validate import check_confidence

__all__ = [
    "HISPANIC",
    "RACE_CATEGORIES",
    "SEX_CATEGORIES",
    "SMALL_SHARE",
    "CategoryRate",
    "LL144Rates",
    "intersectional_category",
    "ll144_rates",
    "ll144_unit_rates",
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
_VERDICTS = (
    "beyond noise: an impact ratio under 0.8 whose interval stops short of 1, so that its "
    "rate is below the highest beyond noise: significant in both practical and statistical "
    "terms (29 CFR 1607.4(D)); the intervals hold together, so a summary of {what} with no "
    "difference calls anything beyond noise in at most {level} of summaries"
)


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
    ``selected / n`` with its interval ``(low, high)``. ``ratio`` is the impact ratio
    with its interval (None for a category left out as small, or with no one
    assessed); the reference category (``ratio`` 1) has an interval too where the
    method gives one (its rate may not truly be the highest). ``share`` is the
    category's share of every individual assessed; ``beyond_noise`` the verdict, read
    off the interval as :attr:`LL144Rates.verdicts` says.
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
    beyond_noise: bool = False

    @property
    def below_four_fifths(self) -> bool | None:
        """Whether the impact ratio is under 0.8 (None without one)."""
        return None if self.ratio is None else self.ratio < FOUR_FIFTHS


@dataclass(frozen=True)
class LL144Rates:
    """Every category's rates and impact ratios (:func:`ll144_rates`).

    ``intervals`` names how the rates' and ratios' intervals were made and
    ``verdicts`` what "beyond noise" was adjusted over: every surface that shows a
    verdict says both.
    """

    kind: str
    assessed: int
    unknown: dict[str, int]
    rows: tuple[CategoryRate, ...]
    confidence: float
    median: float | None = None
    at_median: int = 0
    intervals: str = ""
    verdicts: str = ""
    counted: int | None = None
    """Of every individual assessed (unknown categories too), how many were selected (or
    scored above the median); None where the source does not say (an audit's run)."""

    def of(self, dimension: str) -> list[CategoryRate]:
        """The rows of one dimension: ``sex``, ``race/ethnicity`` or ``intersectional``."""
        return [row for row in self.rows if row.dimension == dimension]


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
    counted = {
        dimension: [_count(category, mask, chosen, exclude_small) for category, mask in members]
        for dimension, members in groups.items()
    }
    masks = [c.mask for found in counted.values() for c in found]
    families, column = [], 0
    for found in counted.values():
        families.append([column + i for i, c in enumerate(found) if c.compared])
        column += len(found)
    z = pairwise_critical_value(np.column_stack(masks), families, chosen, confidence=confidence)
    rows: list[CategoryRate] = []
    for dimension, found in counted.items():
        rows += _dimension_rows(dimension, found, z, values.size, confidence)
    pairs = sum(len(f) * (len(f) - 1) // 2 for f in families)
    return LL144Rates(
        kind, int(values.size), unknown_counts, tuple(rows), confidence, median, at_median,
        counted=int(chosen.sum()),
        intervals=f"Wilson score intervals for the rates; for the impact ratios, Koopman "
        f"score intervals of every pair of categories of a dimension ({pairs} pairs), all "
        f"at the critical value {z:.2f} that makes them hold together at "
        f"{confidence:.0%} (a permutation null of the whole summary), each ratio's "
        "interval the range they leave it",
        verdicts=_VERDICTS.format(what="data", level=f"{1 - confidence:.0%}"),
    )  # fmt: skip


@dataclass(frozen=True)
class _Counted:
    """One category's count; ``small``: left out of the impact ratios (§5-301(d))."""

    category: str
    mask: np.ndarray
    n: int
    selected: int
    small: bool

    @property
    def compared(self) -> bool:
        """Whether its rate enters the impact ratios."""
        return self.n > 0 and not self.small


def _count(category: str, mask: np.ndarray, chosen: np.ndarray, exclude_small: bool) -> _Counted:
    inside = np.asarray(mask, dtype=bool)
    n = int(inside.sum())
    small = exclude_small and n / chosen.size < SMALL_SHARE
    return _Counted(category, inside, n, int(chosen[inside].sum()), small)


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
    dimension: str, counted: list[_Counted], z: float, assessed: int, confidence: float
) -> list[CategoryRate]:
    """The rows of one dimension: rates with Wilson's interval, impact ratios with the
    range every pair's interval at ``z`` leaves them (see the module docstring)."""
    compared = [c for c in counted if c.compared]
    top_rate = max((c.selected / c.n for c in compared), default=0.0)
    rows = []
    for c in counted:
        rate = low = high = ratio = ratio_low = ratio_high = None
        reference = False
        if c.n > 0:
            rate = c.selected / c.n
            low, high = wilson_interval(c.selected, c.n, confidence)
        if c.compared and top_rate > 0 and rate is not None:
            ratio = rate / top_rate
            reference = ratio == 1.0
            others = [ratio_score_interval(c.selected, c.n, o.selected, o.n, z=z)
                      for o in compared if o is not c]  # fmt: skip
            if others:
                ratio_low = min(1.0, *(bounds[0] for bounds in others))
                ratio_high = min(1.0, *(bounds[1] for bounds in others))
        beyond = _beyond_noise(ratio, ratio_high)
        row = (c.category, c.n, c.selected, rate, low, high, ratio, ratio_low, ratio_high)
        share = c.n / assessed
        rows.append(CategoryRate(dimension, *row, share, reference, c.small, beyond))
    return rows


def _beyond_noise(ratio: float | None, high: float | None) -> bool:
    """Under four fifths, and below the highest rate beyond noise (the interval, which
    holds for the whole summary, stops short of 1): significant in both practical and
    statistical terms (29 CFR 1607.4(D))."""
    return ratio is not None and high is not None and ratio < FOUR_FIFTHS and high < 1.0


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
    of a category counts as half a candidate), capped at 1, at the Bonferroni level
    ``1 - (1 - confidence) / m`` over the summary's m impact ratios, so that they hold
    together and "beyond noise" (under 0.8, the interval short of 1) is calibrated for the
    summary. Each replicate's reference is its own highest rate. The median is the
    sample's, held fixed, as in :func:`ll144_rates`.
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
    family = sum(r.ratio is not None and not r.reference for r in point.rows)
    joint = 1 - (1 - confidence) / max(family, 1)
    rows = []
    for dimension in DIMENSIONS:
        present = [r for r in point.of(dimension) if r.n > 0]
        draws = {r.category: np.concatenate(replicate_rates[r.category]) for r in present}
        top_draws = np.nanmax(np.vstack(list(draws.values())), axis=0) if draws else None
        top = max((r.rate or 0.0 for r in present), default=0.0)
        for row in point.of(dimension):
            if row.n == 0 or row.rate is None or top_draws is None:
                rows.append(replace(row, ratio_low=None, ratio_high=None, beyond_noise=False))
                continue
            fewest = int(np.unique(units.units[labels[row.category]]).size)
            if fewest < MIN_UNITS:  # a resample of one name is that name: no interval
                rows.append(replace(row, low=None, high=None, ratio_low=None, ratio_high=None,
                                    beyond_noise=False))  # fmt: skip
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
                spread = critical_value(joint, fewest) * float(np.nanstd(logged, ddof=1))
                centre = math.log(max(row.rate, floor) / top)
                ratio_low, ratio_high = (
                    math.exp(centre - spread),
                    min(1.0, math.exp(centre + spread)),
                )
            beyond = _beyond_noise(row.ratio, ratio_high)
            rows.append(replace(row, low=low, high=high, ratio_low=ratio_low,
                                ratio_high=ratio_high, beyond_noise=beyond))  # fmt: skip
    return replace(
        point,
        rows=tuple(rows),
        intervals=f"intervals over the units that vary (names, and the resumes crossed with "
        f"them; {replicates:,} resamples), the rates' at {confidence:.0%} each, the "
        f"impact ratios' at {joint:.2%} each (Bonferroni over the summary's {family} "
        "ratios, so that they hold together), each resample's reference its own highest "
        "rate",
        verdicts=_VERDICTS.format(what="an audit", level=f"{1 - confidence:.0%}"),
    )


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
