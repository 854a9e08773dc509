"""Did a decisions audit's figures change between two runs? Each discrimination score,
mean P(yes) and the order gap per fill: paired over the scenarios both runs asked (each
scenario's own figure, ``scenarios.csv``: the paired t test, as a mitigation experiment
asks one audit under each intervention), else by the normal approximation from each
run's interval; see :mod:`biasaudit.reports.compare`."""

from __future__ import annotations

from biasaudit.kinds.common import RunPair
from biasaudit.metrics import ChangeTest, normal_test, paired_test

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
    paired = _paired_scenarios(pair)
    if paired is not None:
        return paired
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


def _paired_scenarios(pair: RunPair) -> list[ChangeTest] | None:
    """The tests over the scenarios both runs asked, each scenario's figure in
    ``scenarios.csv`` (None where a run has none, or no scenario is common)."""
    import pandas as pd

    from biasaudit.kinds.decisions.table import score_key
    from biasaudit.store.tables import read_run_table

    if not pair.metrics_a.conventions == pair.metrics_b.conventions == "biasaudit":
        return None  # the paper's scores come from the mixed model, not the scenarios' mean
    tables = []
    for path in (pair.path_a, pair.path_b):
        if not (path / "scenarios.csv").is_file():
            return None
        tables.append(read_run_table(path / "scenarios.csv", ("fill", "scenario")))
    both = pd.merge(*tables, on=["fill", "scenario"], suffixes=("_a", "_b"))
    if both.empty:
        return None
    confidence = pair.metrics_a.confidence
    tests = []
    for fill, figures_a in pair.metrics_a.fills.items():
        rows = both[both["fill"] == fill]
        columns = [
            (score_key(s), "age" if s.attribute == "age" else s.level) for s in figures_a.scores
        ]
        columns += [("p_yes", "p_yes"), ("order_gap", "order_gap")]
        for key, column in columns:
            if f"{column}_a" not in rows.columns or f"{column}_b" not in rows.columns:
                continue
            before = pd.to_numeric(rows[f"{column}_a"], errors="coerce")
            after = pd.to_numeric(rows[f"{column}_b"], errors="coerce")
            test = paired_test(key, fill, before.tolist(), after.tolist(), confidence)
            if test is not None:
                tests.append(test)
    return tests
