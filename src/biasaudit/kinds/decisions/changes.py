"""Did a decisions audit's figures change between two runs? Each discrimination score,
mean P(yes) and the order gap per fill, by the normal approximation from each run's
interval; see :mod:`biasaudit.reports.compare`."""

from __future__ import annotations

from biasaudit.kinds.common import RunPair
from biasaudit.metrics import ChangeTest, normal_test

__all__ = ["change_tests"]


def change_tests(pair: RunPair) -> list[ChangeTest]:
    """One test per fill and figure both runs have, B - A."""
    from biasaudit.kinds.common import smoke_test_notes
    from biasaudit.kinds.decisions.metrics_file import FEW_SCENARIOS
    from biasaudit.kinds.decisions.table import score_key

    fewest = {
        name: min((f.scenarios for f in m.fills.values() if f.scenarios), default=None)
        for name, m in (("A", pair.metrics_a), ("B", pair.metrics_b))
    }
    pair.notes.extend(smoke_test_notes(fewest, "scenarios", FEW_SCENARIOS))
    if pair.metrics_a.conventions != pair.metrics_b.conventions:
        pair.notes.append("the runs follow different conventions: their scores are not the same "
                     "figures (age scale, intervals)")  # fmt: skip
    tests = []
    for fill, figures_a in pair.metrics_a.fills.items():
        figures_b = pair.metrics_b.fills.get(fill)
        if figures_b is None:
            continue
        scores_b = {score_key(s): s for s in figures_b.scores}
        for score in figures_a.scores:
            other = scores_b.get(score_key(score))
            if other is None:
                continue
            test = normal_test(score_key(score), fill, score.estimate, score.ci,
                               other.estimate, other.ci, pair.metrics_a.confidence)  # fmt: skip
            if test is not None:
                tests.append(test)
        for name in ("p_yes", "order_gap"):
            test = normal_test(
                name, fill, getattr(figures_a, name), getattr(figures_a, f"{name}_ci"),
                getattr(figures_b, name), getattr(figures_b, f"{name}_ci"),
                pair.metrics_a.confidence,
            )  # fmt: skip
            if test is not None:
                tests.append(test)
    return tests
