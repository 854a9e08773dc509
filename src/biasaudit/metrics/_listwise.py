"""Figures of listwise answers: whole pools ranked in one prompt.

A listwise audit shows a pool of candidates (one per group, equally
qualified, as in Bloomberg's 2024 audit of GPT resume ranking; or a random
pool) in several orders and asks for a ranking or only the top choice. The
figures here are taken directly from those rankings, with no simulated
selection:

- **selection rate at k** of a group: the share of its appearances ranked in
  the top k (answers that ranked fewer than k candidates are left out at that
  k), and **ΔDP at k**, its difference from the reference group's (demographic
  parity; Chen, Ji & Evans, "The Mismeasure of Man and Models", 2024, §3);
- **impact ratios** (the EEOC's four-fifths rule, 29 CFR 1607.4(D), as New
  York City's Local Law 144 asks for them, 6 RCNY §5-300): each category's
  selection rate over the most selected category's, per race / ethnicity, per
  sex and per their intersection; below 0.8 is flagged, and *beyond noise*
  when the whole interval lies below 0.8;
- **position bias**: the share of answers whose first choice was shown in
  each slot (1 = shown first), its normalised entropy (1: no slot preferred,
  as Grade Score measures it; Iourovitski, 2024) and Pearson's χ² test of
  equal slots;
- **consistency** of one pool across its orders: Kendall's coefficient of
  concordance W of its full rankings (Kendall & Babington Smith, "The problem
  of m rankings", Ann. Math. Stat. 10, 1939), and the chance that two orders
  of the pool put different candidates first;
- an **omnibus test** that the groups' top-1 rates differ at all.

The impact ratios are computed in :mod:`biasaudit.metrics._impact`, the position bias and
consistency in :mod:`biasaudit.metrics._positions`, over the clusters described here.

**Intervals resample the units that vary.** A candidate is a (name, item)
pair; its name recurs across pools with other items, its item with other
names, and each pool is answered in several orders, its candidates competing
for the same places. Appearances are clustered three ways, so a figure's
variance is the sum of the one-way ones, V = V(names) + V(items) + V(pools),
each the bootstrap variance when only those clusters are resampled (n - 1
draws of n, as in :mod:`biasaudit.metrics._resampling`): what the pigeonhole
bootstrap estimates for crossed factors (Owen, "The pigeonhole bootstrap",
Ann. Appl. Stat. 1(2), 2007), and a conservative one. Multiway clustering's
inclusion and exclusion (Cameron, Gelbach & Miller, "Robust inference with
multiway clustering", J. Bus. Econ. Stat. 29(2), 2011), which subtracts the
intersections' variances, was used before and undercovered where names
differ a lot (name effects of sd 1.0, 20 names per group recurring over 60
pools: 10% of 95% intervals of ΔDP missed a true 0; the one-way sum missed
none of 120, ``bench/bench_coverage.py``); subtracting only the answers' noise
that the sum counts once per kind (twice the variance of resampling answers one by
one) flagged 10% of null position-fixed tables (bench/RESULTS.md, "Verdicts on null
data"), so the conservative sum stays. Intervals are the estimate ± t·√V,
t on G - 1 degrees of freedom for the fewest clusters G behind a group
(:mod:`biasaudit.metrics._small_samples`), clipped to the figure's range;
impact ratios take theirs on the log scale. Where every pool shows one item (one
resume under every name), the items are left out: their clusters are the pools.
``tests/metrics/test_metrics_listwise.py`` and
``tests/metrics/test_metrics_small_samples.py`` check the coverage by simulation
(names with their own effects, a position bias, 24-80 pools, 3-20 names per
group): at or above 95%, as a conservative method's should be. The
slot figures and consistency resample pools (every order of a pool is one
cluster). The omnibus test
permutes the group labels of the names (Good, "Permutation, Parametric and
Bootstrap Tests of Hypotheses", 2005).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from biasaudit.metrics._grade import SlotTest
from biasaudit.metrics._impact import _bound, _impact, _rate_draws
from biasaudit.metrics._positions import _concordance, _slots
from biasaudit.metrics._resampling import MIN_UNITS, ClusterTerm, MultiwayClusters, Units
from biasaudit.metrics._small_samples import critical_value
from biasaudit.metrics._validate import check_confidence, check_int

__all__ = [
    "ListwiseFigures",
    "listwise_figures",
]

_REQUIRED = ("answer", "pool", "group", "slot", "rank")


@dataclass(frozen=True)
class ListwiseFigures:
    """Every figure of a listwise audit, each with its interval and n.

    Attributes
    ----------
    rates:
        One row per (group, k): ``rate``, ``low``, ``high``, ``n`` (appearances
        in answers that ranked at least k), ``units`` (names, else items).
    fixed:
        The group effect with the position held fixed, one row per group: ``rate``,
        the mean over the slots it was shown in of its top-1 rate there, ``low``,
        ``high``, and ``dp_gap``, the mean over the slots both it and the reference
        were shown in of the difference of their rates there (so a design that shows
        a group first more often cannot lend it the first slot's bonus), with
        ``gap_low`` / ``gap_high``.
    ranks:
        One row per group, from the full rankings only: ``mean_rank`` (1 = best)
        with ``mean_rank_low`` / ``mean_rank_high``, and ``rabbi``, the rank-biserial
        correlation of the group's ranks with the reference's in the same answers
        (P(ranked above the reference) - P(below); Chen, Ji & Evans' RABBI, taken
        within each answer), with ``rabbi_low`` / ``rabbi_high``; ``n`` (full
        rankings it stands in).
    gaps:
        One row per (group, k), the reference left out: ``dp_gap`` (rate minus
        the reference's), ``low``, ``high``, ``n`` and ``n_reference``
        (appearances). No interval where either has fewer than two units.
    impact:
        One row per (category, value): ``rate`` (top-``k`` selection rate),
        ``ratio`` (over the most selected value of the category), ``low``,
        ``high``, ``n``, ``flagged`` (ratio below 0.8) and ``beyond_noise`` (the
        whole interval below 0.8). ``category`` is each key of the categories
        given, and ``group`` for the groups themselves (the intersections). No
        interval where a value of the category has fewer than two units.
    slots:
        One row per slot (1 = shown first): ``rate`` (share of answers whose
        first choice stood there), ``low``, ``high`` (none from one pool), ``n``
        (answers).
    slot_entropy, slot_entropy_ci:
        Normalised entropy of the first choices' slots (1: every slot alike,
        0: always the same slot), with its interval over pools.
    slot_test:
        Pearson's χ² test that every slot is chosen first equally often.
    omnibus_p:
        Permutation p-value of "the groups' top-1 rates do not differ".
    concordance, concordance_ci, concordance_pools:
        Mean Kendall's W over the pools with at least two full rankings, its
        interval over pools, and how many pools.
    top_change, top_change_ci, top_change_pools:
        The chance that two orders of one pool put different candidates first,
        averaged over pools with at least two answers; interval over pools.
    answers, ranked:
        Answers given, and those with at least a first choice.
    by_subtask:
        Where the answers span several subtasks (jobs): the impact ratios of each,
        computed from its answers alone (its own units, its own intervals), as a
        Local Law 144 audit reports them per use, with a ``subtask`` column before
        ``impact``'s; empty otherwise.
    subtask_tests:
        Per subtask: ``subtask``, ``answers`` and ``omnibus_p``, the permutation test
        of "the groups' top-1 rates do not differ" on its answers alone.
    interval_units:
        The clusters whose Student t the intervals take (the fewest of one kind
        behind a group).
    resampled:
        The units the intervals resample: ``names``, ``items`` (given, and not one per
        pool), ``pools`` (the answers where no pool is given); an item not given is
        not resampled, and its variance is not in the intervals.
    """

    reference: str
    k_max: int
    confidence: float
    impact_k: int
    rates: pd.DataFrame
    gaps: pd.DataFrame
    ranks: pd.DataFrame
    fixed: pd.DataFrame
    impact: pd.DataFrame
    slots: pd.DataFrame
    slot_entropy: float | None
    slot_entropy_ci: tuple[float, float] | None
    slot_test: SlotTest | None
    omnibus_p: float | None
    concordance: float | None
    concordance_ci: tuple[float, float] | None
    concordance_pools: int
    top_change: float | None
    top_change_ci: tuple[float, float] | None
    top_change_pools: int
    answers: int
    ranked: int
    by_subtask: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    subtask_tests: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    resampled: tuple[str, ...] = ()
    interval_units: int = 0


def listwise_figures(
    shown: pd.DataFrame,
    *,
    reference: str,
    k_max: int,
    categories: Mapping[str, Mapping[str, str]] | None = None,
    impact_k: int = 1,
    confidence: float = 0.95,
    replicates: int = 1000,
    permutations: int = 1000,
    seed: int = 0,
) -> ListwiseFigures:
    """The figures of listwise answers; see the module docstring.

    Parameters
    ----------
    shown:
        One row per candidate shown in an answer: ``answer`` (one per prompt
        answered), ``pool`` (the candidates' set; its answers are its orders),
        ``group``, ``slot`` (1 = shown first) and ``rank`` (1 = ranked first;
        NaN when the answer did not rank it), or ``p_first``, each candidate's
        chance of being put first (read from the first token's logprobs: top-1
        figures only, selection counted as that chance), optional ``subtask`` (a job: the
        items are resampled within it), ``name`` and ``item`` (the units). An
        answer that ranked no one counts in ``answers`` only.
    reference:
        The group every ΔDP is taken against.
    categories:
        For impact ratios beyond the groups themselves: category -> {group:
        value}, e.g. ``{"race": {"W_M": "White", ...}, "sex": {...}}``.
    impact_k:
        The k of the impact ratios' selection rates.
    """
    check_confidence(confidence)
    check_int(k_max, "k_max", minimum=1)
    check_int(impact_k, "impact_k", minimum=1)
    check_int(replicates, "replicates", minimum=20)
    check_int(permutations, "permutations", minimum=0)
    missing = [column for column in _REQUIRED if column not in shown.columns]
    if missing:
        raise ValueError(f"shown lacks the columns {missing}")
    rank = pd.to_numeric(shown["rank"], errors="raise").to_numpy(float)
    first_chance = None
    if "p_first" in shown.columns:  # first choices read from logprobs: top 1 only
        first_chance = pd.to_numeric(shown["p_first"], errors="raise").to_numpy(float)
        rank = np.where(np.isnan(first_chance), np.nan, 1.0)
        k_max = 1
    answers = shown["answer"].to_numpy()
    depth = pd.Series(~np.isnan(rank)).groupby(answers).transform("sum").to_numpy(int)
    ranked = depth > 0
    data = shown.loc[ranked].reset_index(drop=True)
    rank, depth = rank[ranked], depth[ranked]
    if first_chance is not None:
        first_chance = first_chance[ranked]

    def selected(k: int) -> NDArray[np.float64]:
        """Each row's selection at k: ranked in the top k, or its chance of being first."""
        found: NDArray[np.float64] = (
            np.nan_to_num(first_chance) if first_chance is not None else (rank <= k).astype(float)
        )
        return found

    groups = data["group"].astype(str).to_numpy()
    if reference not in set(groups):
        raise ValueError(f"the reference group {reference!r} has no ranked appearance")
    rng = np.random.default_rng(seed)
    group_codes, group_names = pd.factorize(groups)
    clusters = MultiwayClusters.of(data, group_codes.astype(np.intp), rng, replicates)
    units = clusters.units
    # Student's t on G - 1 degrees of freedom, G the fewest clusters of one kind behind
    # a group (metrics._small_samples): few names or items widen every interval.
    z = critical_value(confidence, clusters.fewest)
    rates, gaps = _rates_and_gaps(
        groups, list(group_names), selected, depth, clusters, reference, k_max, z
    )
    impact = _impact(groups, selected, depth, clusters, categories or {}, impact_k, z)
    pools = data["pool"].astype(str).to_numpy()
    fixed = _fixed(groups, data["slot"].to_numpy(int), selected(1), depth >= 1, clusters,
                   reference, z)  # fmt: skip
    ranks = pd.DataFrame(columns=RANK_COLUMNS)
    if first_chance is None:
        ranks = _ranks(data, groups, rank, depth, clusters, reference, z, rng, replicates)
    slot_figures = _slots(data, selected(1), pools, rng, replicates, z)
    concordance: tuple[Any, ...] = (None, None, 0, None, None, 0)
    if first_chance is None:
        concordance = _concordance(data, rank, pools, rng, replicates, z)
    omnibus = _omnibus(group_codes, selected(1), depth, units, rng, permutations)
    by_subtask, subtask_tests = _per_subtask(
        data, groups, group_codes.astype(np.intp), selected, depth,
        categories or {}, impact_k, confidence, rng, replicates, permutations,
    )  # fmt: skip
    return ListwiseFigures(
        reference=reference,
        k_max=k_max,
        confidence=confidence,
        impact_k=impact_k,
        rates=rates,
        gaps=gaps,
        impact=impact,
        ranks=ranks,
        fixed=fixed,
        slots=slot_figures[0],
        slot_entropy=slot_figures[1],
        slot_entropy_ci=slot_figures[2],
        slot_test=slot_figures[3],
        omnibus_p=omnibus,
        concordance=concordance[0],
        concordance_ci=concordance[1],
        concordance_pools=concordance[2],
        top_change=concordance[3],
        top_change_ci=concordance[4],
        top_change_pools=concordance[5],
        answers=int(pd.unique(answers).size),
        ranked=int(pd.unique(data["answer"]).size),
        by_subtask=by_subtask,
        subtask_tests=subtask_tests,
        resampled=clusters.resampled,
        interval_units=clusters.fewest,
    )


def _per_subtask(
    data: pd.DataFrame,
    groups: NDArray[np.str_],
    group_codes: NDArray[np.intp],
    selected: Callable[[int], NDArray[np.float64]],
    depth: NDArray[np.int_],
    categories: Mapping[str, Mapping[str, str]],
    impact_k: int,
    confidence: float,
    rng: np.random.Generator,
    replicates: int,
    permutations: int,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each subtask's impact ratios and omnibus test, from its own answers and units
    (none where there is one subtask)."""
    if "subtask" not in data.columns:
        return pd.DataFrame(), pd.DataFrame()
    subtasks = data["subtask"].astype(str).to_numpy()
    names = list(pd.unique(subtasks))
    if len(names) < 2:
        return pd.DataFrame(), pd.DataFrame()
    tables, tests = [], []
    for name in names:
        rows = subtasks == name
        part = data.loc[rows].reset_index(drop=True)
        clusters = MultiwayClusters.of(part, group_codes[rows], rng, replicates)
        z = critical_value(confidence, clusters.fewest)

        def selected_here(k: int, rows: NDArray[np.bool_] = rows) -> NDArray[np.float64]:
            return selected(k)[rows]

        table = _impact(groups[rows], selected_here, depth[rows], clusters, categories, impact_k, z)
        if not table.empty:
            table.insert(0, "subtask", name)
            tables.append(table)
        p = _omnibus(group_codes[rows], selected(1)[rows], depth[rows], clusters.units, rng,
                     permutations)  # fmt: skip
        tests.append({"subtask": name, "answers": int(pd.unique(part["answer"]).size),
                      "omnibus_p": p})  # fmt: skip
    by_subtask = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    return by_subtask, pd.DataFrame(tests)


def _rates_and_gaps(
    groups: NDArray[np.str_],
    names: Sequence[str],
    selected_at: Callable[[int], NDArray[np.float64]],
    depth: NDArray[np.int_],
    clusters: MultiwayClusters,
    reference: str,
    k_max: int,
    z: float,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    unit_codes = clusters.units.units
    rate_rows, gap_rows = [], []
    for k in range(1, k_max + 1):
        eligible = depth >= k
        selected = selected_at(k)
        estimates: dict[str, tuple[float, list[tuple[float, NDArray[np.float64]]]]] = {}
        sizes: dict[str, tuple[int, int]] = {}
        for group in names:
            rows = eligible & (groups == group)
            if not rows.any():
                continue
            rate = float(selected[rows].mean())
            draws = clusters.draws(functools.partial(_rate_draws, rows=rows, selected=selected))
            estimates[group] = (rate, draws)
            n_units = int(np.unique(unit_codes[rows]).size)
            sizes[group] = (int(rows.sum()), n_units)
            bounds = clusters.interval(rate, draws, z, 0.0, 1.0) if n_units >= MIN_UNITS else None
            rate_rows.append(_row(group, k, rate, bounds, int(rows.sum()), units=n_units))
        if reference not in estimates:
            continue
        base, base_draws = estimates[reference]
        for group, (rate, draws) in estimates.items():
            if group == reference:
                continue
            differences = [
                (sign, values - base_values)
                for (sign, values), (_, base_values) in zip(draws, base_draws, strict=True)
            ]
            few = min(sizes[group][1], sizes[reference][1]) < MIN_UNITS
            bounds = None if few else clusters.interval(rate - base, differences, z, -1.0, 1.0)
            gap_rows.append(
                {"group": group, "k": k, "dp_gap": rate - base,
                 "low": _bound(bounds, 0), "high": _bound(bounds, 1),
                 "n": sizes[group][0], "n_reference": sizes[reference][0]}
            )  # fmt: skip
    return pd.DataFrame(rate_rows), pd.DataFrame(gap_rows)


FIXED_COLUMNS = ["group", "rate", "low", "high", "dp_gap", "gap_low", "gap_high"]


def _slot_mean_draws(
    term: ClusterTerm,
    *,
    masks: Sequence[NDArray[np.bool_]],
    selected: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Per replicate, the mean over slots of the share selected in each slot's rows."""
    stacked = np.vstack([term.rate(mask, selected) for mask in masks])
    present = (~np.isnan(stacked)).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        found: NDArray[np.float64] = np.nansum(stacked, axis=0) / present
    return found


def _fixed(
    groups: NDArray[np.str_],
    slots: NDArray[np.int_],
    first: NDArray[np.float64],
    eligible: NDArray[np.bool_],
    clusters: MultiwayClusters,
    reference: str,
    z: float,
) -> pd.DataFrame:
    """The top-1 rate of every group with the position held fixed (see ``fixed``): its
    rate at each slot it was shown in, averaged over those slots; its ΔDP the mean, over
    the slots both it and the reference were shown in, of the difference at that slot."""
    unit_codes = clusters.units.units
    at_slot: dict[str, dict[int, NDArray[np.bool_]]] = {}
    for group in pd.unique(groups):
        own = eligible & (groups == group)
        at_slot[str(group)] = {int(slot): own & (slots == slot) for slot in np.unique(slots[own])}
    units = {g: int(np.unique(unit_codes[np.any(list(m.values()), axis=0)]).size)
             for g, m in at_slot.items() if m}  # fmt: skip
    rows = []
    for group, masks in at_slot.items():
        if not masks:
            continue
        rate = float(np.mean([first[mask].mean() for mask in masks.values()]))
        draws = clusters.draws(
            functools.partial(_slot_mean_draws, masks=list(masks.values()), selected=first)
        )
        few = units[group] < MIN_UNITS
        bounds = None if few else clusters.interval(rate, draws, z, 0.0, 1.0)
        gap = gap_bounds = None
        common = sorted(set(masks) & set(at_slot.get(reference, {})))
        if group != reference and common:
            own_masks = [masks[slot] for slot in common]
            ref_masks = [at_slot[reference][slot] for slot in common]
            gap = float(np.mean([first[m].mean() - first[r].mean()
                                 for m, r in zip(own_masks, ref_masks, strict=True)]))  # fmt: skip
            mine = clusters.draws(
                functools.partial(_slot_mean_draws, masks=own_masks, selected=first)
            )
            theirs = clusters.draws(
                functools.partial(_slot_mean_draws, masks=ref_masks, selected=first)
            )
            differences = [(sign, d - b) for (sign, d), (_, b) in zip(mine, theirs, strict=True)]
            if not few and units.get(reference, 0) >= MIN_UNITS:
                gap_bounds = clusters.interval(gap, differences, z, -1.0, 1.0)
        rows.append(
            {"group": group, "rate": rate, "low": _bound(bounds, 0), "high": _bound(bounds, 1),
             "dp_gap": math.nan if gap is None else gap, "gap_low": _bound(gap_bounds, 0),
             "gap_high": _bound(gap_bounds, 1)}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=FIXED_COLUMNS)


RANK_COLUMNS = ["group", "mean_rank", "mean_rank_low", "mean_rank_high", "rabbi",
                "rabbi_low", "rabbi_high", "n"]  # fmt: skip


def _ranks(
    data: pd.DataFrame,
    groups: NDArray[np.str_],
    rank: NDArray[np.float64],
    depth: NDArray[np.int_],
    clusters: MultiwayClusters,
    reference: str,
    z: float,
    rng: np.random.Generator,
    replicates: int,
) -> pd.DataFrame:
    """Mean rank and RABBI of every group in the full rankings (see ``ranks``).

    RABBI compares two candidates of one answer, so its variance comes from both
    names: the reference candidate's name is one more clustering factor of its
    interval.
    """
    sizes = data.groupby("answer")["slot"].transform("count").to_numpy(int)
    full = depth == sizes
    if not full.any():
        return pd.DataFrame(columns=RANK_COLUMNS)
    answers = data["answer"].astype(str).to_numpy()
    reference_rank = (
        pd.Series(np.where(groups == reference, rank, np.nan)).groupby(answers).transform("max")
    ).to_numpy(float)
    # +1 where the row's candidate stands above its answer's reference candidate.
    above = np.sign(reference_rank - rank)
    by_reference = None
    if "name" in data.columns:
        own = data["name"].astype(str).where(pd.Series(groups == reference, index=data.index))
        reference_name = own.groupby(answers).transform("first").fillna("").to_numpy()
        codes = pd.factorize(groups)[0].astype(np.intp)
        by_reference = MultiwayClusters.of(data, codes, rng, replicates, extra=[reference_name])
    unit_codes = clusters.units.units
    rows = []
    for group in pd.unique(groups):
        mask = full & (groups == group)
        if not mask.any():
            continue
        mean_rank = float(rank[mask].mean())
        n_units = int(np.unique(unit_codes[mask]).size)
        size = float(sizes[mask].max())
        mean_draws = functools.partial(_rate_draws, rows=mask, selected=rank)
        bounds = None
        if n_units >= MIN_UNITS:
            bounds = clusters.interval(mean_rank, clusters.draws(mean_draws), z, 1.0, size)
        rabbi = rabbi_bounds = None
        paired = mask & ~np.isnan(reference_rank) & (groups != reference)
        if paired.any():
            rabbi = float(above[paired].mean())
            if n_units >= MIN_UNITS:
                above_draws = functools.partial(_rate_draws, rows=paired, selected=above)
                pairs = by_reference or clusters
                rabbi_bounds = pairs.interval(rabbi, pairs.draws(above_draws), z, -1.0, 1.0)
        rows.append(
            {"group": str(group), "mean_rank": mean_rank, "mean_rank_low": _bound(bounds, 0),
             "mean_rank_high": _bound(bounds, 1),
             "rabbi": math.nan if rabbi is None else rabbi,
             "rabbi_low": _bound(rabbi_bounds, 0), "rabbi_high": _bound(rabbi_bounds, 1),
             "n": int(mask.sum())}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=RANK_COLUMNS)


def _row(
    group: str, k: int, rate: float, bounds: tuple[float, float] | None, n: int, *, units: int
) -> dict[str, object]:
    return {"group": group, "k": k, "rate": rate, "low": _bound(bounds, 0),
            "high": _bound(bounds, 1), "n": n, "units": units}  # fmt: skip


def _omnibus(
    group_codes: NDArray[np.intp],
    first_weight: NDArray[np.float64],
    depth: NDArray[np.int_],
    units: Units,
    rng: np.random.Generator,
    permutations: int,
) -> float | None:
    """Permutation p of "no group differs" at k = 1: the statistic is the appearances-
    weighted squared spread of the groups' top-1 rates; the names' group labels are
    shuffled (items' within their subtask where there are no names)."""
    eligible = depth >= 1
    if permutations == 0 or not eligible.any():
        return None
    selected = first_weight[eligible]
    codes = group_codes[eligible]
    unit_codes = units.units[eligible]
    unit_ids, unit_rows = np.unique(unit_codes, return_inverse=True)
    group_of_unit = np.zeros(unit_ids.size, dtype=np.intp)
    group_of_unit[unit_rows] = codes
    if np.unique(group_of_unit).size < 2:
        return None
    strata = units.permutation_strata(unit_ids)
    n_groups = int(codes.max()) + 1

    def statistic(labels: NDArray[np.intp]) -> float:
        counts = np.bincount(labels, minlength=n_groups).astype(float)
        chosen = np.bincount(labels, weights=selected, minlength=n_groups)
        present = counts > 0
        rates = chosen[present] / counts[present]
        pooled = chosen.sum() / counts.sum()
        return float((counts[present] * (rates - pooled) ** 2).sum())

    observed = statistic(codes)
    exceed = 0
    for _ in range(permutations):
        shuffled = group_of_unit.copy()
        for stratum in np.unique(strata):
            members = np.flatnonzero(strata == stratum)
            shuffled[members] = rng.permutation(shuffled[members])
        if statistic(shuffled[unit_rows]) >= observed - 1e-12:
            exceed += 1
    return (exceed + 1) / (permutations + 1)
