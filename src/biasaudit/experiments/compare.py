"""``biasaudit compare`` of two experiments (a model before and after an update, say):
did each arm's audit change, and does each intervention still do what it did?

Each arm both experiments ran (the baseline, each intervention of the same name) is
compared run to run as ``compare`` compares two runs (:func:`biasaudit.reports.compare.
compare_runs`, its own Holm adjustment and verdict). Then each intervention's effect on
each figure, as each experiment estimated it (its paired change with its interval), is
tested for a change between the experiments: two independent estimates, so the normal
test from their intervals (:func:`biasaudit.metrics.normal_test`), Holm-adjusted over
every intervention and figure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from biasaudit.errors import UsageError
from biasaudit.metrics import ChangeTest
from biasaudit.render.text import Block, Cell, PlainTable
from biasaudit.reports.compare import Comparison
from biasaudit.store.experiments import Experiment

__all__ = ["ExperimentComparison", "compare_experiments", "comparison_blocks"]


@dataclass(frozen=True)
class ExperimentComparison:
    """Two experiments side by side: each shared arm's comparison, each effect's change."""

    folder_a: Path
    folder_b: Path
    a: Experiment
    b: Experiment
    arms: list[tuple[str, Comparison]]
    effects: list[ChangeTest]
    alpha: float
    notes: list[str]


def compare_experiments(
    folder_a: Path, folder_b: Path, *, alpha: float = 0.05, bootstrap: int = 1000, seed: int = 0
) -> ExperimentComparison:
    """Compare the experiments in two folders; see the module docstring.

    Raises
    ------
    UsageError
        A folder is not an experiment's, or they audit different kinds.
    """
    from biasaudit.experiments.runner import read_experiment
    from biasaudit.metrics import holm_adjust, normal_test
    from biasaudit.reports.compare import compare_runs

    a, b = read_experiment(folder_a), read_experiment(folder_b)
    if a.kind != b.kind:
        raise UsageError(f"compare: {folder_a} is a {a.kind} experiment and {folder_b} a "
                         f"{b.kind} one; compare experiments of one audit")  # fmt: skip
    names_b = {arm.name for arm in b.arms}
    shared = [arm.name for arm in a.arms if arm.name in names_b]
    notes = [f"only in {which}: {', '.join(only)}" for which, only in (
        ("A", [arm.name for arm in a.arms if arm.name not in names_b]),
        ("B", [arm.name for arm in b.arms if arm.name not in shared]),
    ) if only]  # fmt: skip
    arms = [(name, compare_runs(a.run_dir(name, folder_a), b.run_dir(name, folder_b),
                                alpha=alpha, bootstrap=bootstrap, seed=seed))
            for name in shared]  # fmt: skip
    before = {(e.arm, e.figure, e.group): e for e in a.effects}
    found: list[ChangeTest] = []
    for effect in b.effects:
        was = before.get((effect.arm, effect.figure, effect.group))
        if was is None:
            continue
        test = normal_test(f"{effect.arm}: {effect.figure}", effect.group, was.change, was.ci,
                           effect.change, effect.ci, a.confidence)  # fmt: skip
        if test is not None:
            found.append(test)
    adjusted = holm_adjust([t.p_value for t in found])
    effects = [replace(t, p_adjusted=1.0 if p is None else p)
               for t, p in zip(found, adjusted, strict=True)]  # fmt: skip
    return ExperimentComparison(Path(folder_a), Path(folder_b), a, b, arms, effects, alpha, notes)


def comparison_blocks(comparison: ExperimentComparison) -> list[Block]:
    """What ``biasaudit compare`` prints of two experiments."""
    a, b = comparison.a, comparison.b
    blocks: list[Block] = [
        f"compare experiments: A {comparison.folder_a.name} ({a.model}), "
        f"B {comparison.folder_b.name} ({b.model}); {a.kind}",
        PlainTable(
            "each arm's audit, B - A (as compare compares two runs)",
            ["arm", "verdict", "figures changed"],
            [[name, c.verdict, f"{len(c.changed_tests)} of {len(c.tests)}"]
             for name, c in comparison.arms],
            [0, 0, 0], gaps=[0, 2, 2],
        ),
    ]  # fmt: skip
    changed = [t for t in comparison.effects if t.changed(comparison.alpha)]
    rows: list[list[str | Cell]] = [
        [t.metric, t.group or "", _signed(t.before), _signed(t.after),
         Cell(f"{t.difference:+.3f}", strong=True), f"[{t.ci[0]:+.3f}, {t.ci[1]:+.3f}]"]
        for t in changed
    ]  # fmt: skip
    if rows:
        blocks.append(PlainTable(
            f"interventions whose effect changed beyond noise ({len(rows)} of "
            f"{len(comparison.effects)}; Holm at {comparison.alpha:g})",
            ["intervention: figure", "group", "effect in A", "effect in B", "change", "interval"],
            rows, [0] * 6, labels=2, gaps=[0, 2, 2, 2, 2, 2],
        ))  # fmt: skip
    else:
        tested = len(comparison.effects)
        blocks.append(f"every intervention's effect is as it was, within noise ({tested} "
                      f"tested; Holm at {comparison.alpha:g})")  # fmt: skip
    blocks += [f"note: {note}" for note in comparison.notes]
    return blocks


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"
