"""``biasaudit compare`` of two listwise runs: a test of "no change" for every ΔDP
and the share of first choices in each slot, B - A. ΔDP is paired over the appearances
both runs answered where they showed the same (the same pools, orders and candidates,
as a mitigation experiment's arms do: :func:`~biasaudit.metrics.paired_gap_tests`),
else read from the runs' intervals, as the slots' shares are."""

from __future__ import annotations

from biasaudit.kinds.common import RunPair
from biasaudit.metrics import ChangeTest, normal_test

__all__ = ["change_tests"]


def change_tests(pair: RunPair) -> list[ChangeTest]:
    """One test per group and k (ΔDP) and per slot (first choices), B - A."""
    from biasaudit.kinds.common import smoke_test_notes
    from biasaudit.kinds.listwise.table import fewest_units
    from biasaudit.metrics import FEW_UNITS

    fewest = {"A": fewest_units(pair.metrics_a), "B": fewest_units(pair.metrics_b)}
    pair.notes.extend(smoke_test_notes(fewest, "units", FEW_UNITS))
    tests = []
    paired = _paired_gaps(pair)
    gaps_b = {(g.group, g.k): g for g in pair.metrics_b.gaps}
    for gap in pair.metrics_a.gaps if paired is None else ():
        other = gaps_b.get((gap.group, gap.k))
        if other is None:
            continue
        test = normal_test(
            f"dp_gap k={gap.k}", gap.group, gap.dp_gap, gap.ci, other.dp_gap, other.ci,
            pair.metrics_a.confidence,
        )  # fmt: skip
        if test is not None:
            tests.append(test)
    tests += paired or []
    slots_b = {s.slot: s for s in pair.metrics_b.slots}
    for slot in pair.metrics_a.slots:
        other = slots_b.get(slot.slot)
        if other is None:
            continue
        test = normal_test(
            "first choice", f"slot {slot.slot}", slot.rate, slot.ci, other.rate, other.ci,
            pair.metrics_a.confidence,
        )  # fmt: skip
        if test is not None:
            tests.append(test)
    return tests


def _paired_gaps(pair: RunPair) -> list[ChangeTest] | None:
    """ΔDP's tests at every k both runs have, paired over the appearances both answered
    (None where a run has no ``shown.csv`` or they showed different appearances)."""
    import pandas as pd

    from biasaudit.metrics import paired_gap_tests
    from biasaudit.store.tables import read_run_table

    keys = ["answer", "candidate"]
    tables = []
    for path in (pair.path_a, pair.path_b):
        if not (path / "shown.csv").is_file():
            return None
        tables.append(read_run_table(path / "shown.csv", (*keys, "group", "pool", "rank")))
    a, b = tables
    if pair.metrics_a.reference_group != pair.metrics_b.reference_group or len(a) != len(b):
        return None
    both = pd.merge(a, b[[*keys, "rank"]], on=keys, suffixes=("", "_b"))
    if len(both) != len(a):
        return None  # other appearances: not the same audit's units
    depth_a = both.groupby("answer")["rank"].transform("count")
    depth_b = both.groupby("answer")["rank_b"].transform("count")
    tests = []
    for k in sorted({g.k for g in pair.metrics_a.gaps} & {g.k for g in pair.metrics_b.gaps}):
        rows = both.drop(columns=["rank", "rank_b"]).assign(
            selected_a=(both["rank"] <= k).astype(float).where(depth_a >= k),
            selected_b=(both["rank_b"] <= k).astype(float).where(depth_b >= k),
        )
        seed = int(pair.rng.integers(2**31))
        tests += paired_gap_tests(rows, reference=pair.metrics_a.reference_group,
                                  metric=f"dp_gap k={k}", confidence=pair.metrics_a.confidence,
                                  replicates=pair.bootstrap, seed=seed)  # fmt: skip
    return tests
