"""Impact ratios and the four-fifths rule (29 CFR 1607.4(D); New York City's Local Law 144,
6 RCNY §5-300): each category's selection rate over the most selected category's, per
race / ethnicity, sex and their intersection, with intervals over the multiway clusters
of a listwise audit (:mod:`biasaudit.metrics._listwise` says which), taken on the log
scale and on the ratio's own; below 0.8 is flagged, and beyond noise when the whole
interval lies below 0.8.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from biasaudit.metrics._resampling import ClusterTerm, MultiwayClusters
from biasaudit.metrics._small_samples import RATIO_MIN_UNITS

__all__ = ["FOUR_FIFTHS"]


FOUR_FIFTHS = 0.8
"""An impact ratio below this fails the four-fifths rule."""


def _rate_draws(
    term: ClusterTerm, *, rows: NDArray[np.bool_], selected: NDArray[np.float64]
) -> NDArray[np.float64]:
    return term.rate(rows, selected)


def _bound(bounds: tuple[float, float] | None, side: int) -> float:
    return math.nan if bounds is None else bounds[side]


def _impact(
    groups: NDArray[np.str_],
    selected_at: Callable[[int], NDArray[np.float64]],
    depth: NDArray[np.int_],
    clusters: MultiwayClusters,
    categories: Mapping[str, Mapping[str, str]],
    k: int,
    z: float,
) -> pd.DataFrame:
    eligible = depth >= k
    if not eligible.any():
        return pd.DataFrame()
    selected = selected_at(k)
    rows = []
    by_category = {**{name: dict(values) for name, values in categories.items()},
                   "group": {g: g for g in pd.unique(groups)}}  # fmt: skip
    for category, value_of in by_category.items():
        labels = np.array([value_of.get(g, "") for g in groups], dtype=object)
        values = [v for v in pd.unique(labels[eligible]) if v != ""]
        if len(values) < 2:
            continue
        masks = {value: eligible & (labels == value) for value in values}
        few = any(
            np.unique(clusters.units.units[mask]).size < RATIO_MIN_UNITS for mask in masks.values()
        )
        rates = {value: float(selected[mask].mean()) for value, mask in masks.items()}
        top = max(rates.values())
        for value in values:
            ratio = rates[value] / top if top > 0 else math.nan

            ratio_of = functools.partial(_ratio_draws, masks=masks, selected=selected, value=value)
            # On the log scale, where a ratio's sampling distribution is nearer normal (a
            # resample that selects none of the value counts as half a selection), joined
            # with the interval on the ratio's own scale: where most resamples select
            # none, the log scale alone would be narrow for want of spread, not of error.
            floor = 0.5 / max(int(masks[value].sum()), 1) / max(top, 1e-12)
            draws = clusters.draws(ratio_of)
            bounds = None
            if not few:
                logged = [(sign, np.log(np.maximum(np.nan_to_num(d, nan=floor), floor)))
                          for sign, d in draws]  # fmt: skip
                on_log = clusters.interval(math.log(max(ratio, floor)), logged, z, -math.inf, 0.0)
                on_ratio = clusters.interval(ratio, draws, z, 0.0, 1.0)
                bounds = _widest(on_log and (math.exp(on_log[0]), math.exp(on_log[1])), on_ratio)
            low, high = _bound(bounds, 0), _bound(bounds, 1)
            # The rate's own interval, over the same clusters (Local Law 144 summaries
            # show every rate with one).
            rate_of = functools.partial(_rate_draws, rows=masks[value], selected=selected)
            on_rate = clusters.interval(rates[value], clusters.draws(rate_of), z, 0.0, 1.0)
            rows.append(
                {"category": category, "value": value, "rate": rates[value],
                 "rate_low": _bound(on_rate, 0), "rate_high": _bound(on_rate, 1), "ratio": ratio,
                 "low": low, "high": high, "n": int(masks[value].sum()),
                 "flagged": bool(ratio < FOUR_FIFTHS),
                 "beyond_noise": bool(not math.isnan(high) and high < FOUR_FIFTHS)}
            )  # fmt: skip
    return pd.DataFrame(rows)


def _widest(
    first: tuple[float, float] | None, second: tuple[float, float] | None
) -> tuple[float, float] | None:
    """The interval that holds both (either where one is missing)."""
    if first is None or second is None:
        return first or second
    return min(first[0], second[0]), max(first[1], second[1])


def _ratio_draws(
    term: ClusterTerm,
    *,
    masks: Mapping[str, NDArray[np.bool_]],
    selected: NDArray[np.float64],
    value: str,
) -> NDArray[np.float64]:
    """Per replicate, ``value``'s rate over the most selected value's: the whole
    statistic, so that the most selected value may change from one to the next."""
    found = {v: term.rate(mask, selected) for v, mask in masks.items()}
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios: NDArray[np.float64] = found[value] / np.nanmax(np.vstack(list(found.values())), 0)
    return ratios
