"""Did a RUTEd audit's figures change between two runs? Neutrality, skew and stereotype
per context by the normal approximation from each run's interval; see
:mod:`biasaudit.reports.compare`."""

from __future__ import annotations

from biasaudit.kinds.common import RunPair
from biasaudit.metrics import ChangeTest, normal_test

__all__ = ["change_tests"]

_RUTED_METRICS = ("neutrality", "skew", "stereotype")


def change_tests(pair: RunPair) -> list[ChangeTest]:
    """One test per context and metric, B - A."""
    from biasaudit.kinds.common import smoke_test_notes
    from biasaudit.metrics import FEW_UNITS

    fewest = {"A": pair.metrics_a.occupations, "B": pair.metrics_b.occupations}
    pair.notes.extend(smoke_test_notes(fewest, "occupations", FEW_UNITS))
    tests = []
    for context, figures_a in pair.metrics_a.contexts.items():
        figures_b = pair.metrics_b.contexts.get(context)
        if figures_b is None:
            continue
        for metric in _RUTED_METRICS:
            test = normal_test(
                metric,
                context,
                getattr(figures_a, metric),
                getattr(figures_a, f"{metric}_ci"),
                getattr(figures_b, metric),
                getattr(figures_b, f"{metric}_ci"),
                pair.metrics_a.confidence,
            )
            if test is not None:
                tests.append(test)
    return tests
