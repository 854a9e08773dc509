"""``biasaudit compare`` of two listwise runs: a test of "no change" for every ΔDP
and the share of first choices in each slot, B - A, from the runs' intervals."""

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
    gaps_b = {(g.group, g.k): g for g in pair.metrics_b.gaps}
    for gap in pair.metrics_a.gaps:
        other = gaps_b.get((gap.group, gap.k))
        if other is None:
            continue
        test = normal_test(
            f"dp_gap k={gap.k}", gap.group, gap.dp_gap, gap.ci, other.dp_gap, other.ci,
            pair.metrics_a.confidence,
        )  # fmt: skip
        if test is not None:
            tests.append(test)
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
