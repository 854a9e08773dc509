"""The report page of a mitigation experiment (``experiment.json``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from biasaudit.render.document import (
    Block,
    Bullets,
    Document,
    Figure,
    Links,
    Paragraph,
    Section,
    Table,
)
from biasaudit.store.experiments import EXPERIMENT_COMPARE_FILE

if TYPE_CHECKING:
    from biasaudit.store.experiments import Experiment

__all__ = ["experiment_compare_document", "experiment_document"]


def experiment_document(folder: Path) -> Document:
    """The experiment in ``folder``: the ranking, each intervention's effects, its arms."""
    from biasaudit.experiments.runner import read_experiment
    from biasaudit.reports.experiment import (
        EFFECT_HEADER,
        RANKING_HEADER,
        effect_rows,
        ranking_rows,
    )

    experiment = read_experiment(folder)
    title = f"Mitigation experiment: {experiment.task} on {experiment.model}"
    subtitle = (
        f"{experiment.kind} audit, baseline and {len(experiment.arms) - 1} interventions, "
        "every unit asked under each and paired"
    )
    if experiment.simulated:
        subtitle += ". A SIMULATED model, not a real one"
    document = Document(title, subtitle, experiment.simulated)
    best = experiment.costs[0] if experiment.costs else None
    headline = f"Best: {best.arm}, {best.verdict}." if best is not None else "No intervention ran."
    sections = [
        Section("Interventions, best first", "ranking", [
            Paragraph(headline, strong=True),
            Table(list(RANKING_HEADER), ranking_rows(experiment),
                  caption="Bias removed: the share of the bias figures' summed absolute values "
                  "removed, 1 - sum |under| / sum |baseline|. Decisions and validity: the "
                  "paired change with its "
                  f"{experiment.confidence:.0%} interval over the units that vary. Tokens: "
                  "each run estimated alike from its prompts, the cache set aside. An "
                  "intervention that flattens the decisions is ranked last.",
                  left=frozenset({0, 6})),
        ]),
    ]  # fmt: skip
    figures = _figures(experiment)
    if figures:
        sections.append(Section("Each figure under each intervention", "figures", [
            Paragraph("One panel per figure: the baseline's value, and each intervention's "
                      "value with the interval of its paired change from the baseline (so a "
                      "bar that misses the baseline's mark is a change beyond its own noise; "
                      "the table's * also holds across the whole experiment)."),
            *figures,
        ]))  # fmt: skip
    for cost in experiment.costs:
        mine = [e for e in experiment.effects if e.arm == cost.arm]
        arm = experiment.arm(cost.arm)
        blocks: list[Block] = [Paragraph(cost.verdict, strong=True)]
        if arm.intervention is not None:
            blocks.append(Paragraph(f"What it does: {arm.intervention.described()}."))
            if arm.intervention.source:
                blocks.append(Paragraph(f"Source: {arm.intervention.source}."))
        rows = [[str(c) for c in row] for row in effect_rows(mine, everything=True)]
        blocks.append(Table(list(EFFECT_HEADER), rows, left=frozenset({0, 1}),
                            caption=f"Every figure, paired with the baseline; * beyond noise "
                            f"({experiment.family})."))  # fmt: skip
        sections.append(Section(f"Under {cost.arm}", f"arm-{cost.arm}", blocks))
    links = []
    for arm in experiment.arms:
        run = experiment.run_dir(arm.name, folder)
        links.append(
            (f"{arm.name}: its run's report", os.path.relpath(run / "report.html", folder))
        )
    sections.append(Section("The runs", "runs", [
        Paragraph("Each arm is an ordinary run, with its own report, evidence page and "
                  "replay; evidence.html beside this page shows every answer under every "
                  "arm side by side."),
        Links([("every answer under every arm", "evidence.html"), *links]),
    ]))  # fmt: skip
    if (folder / "compare" / EXPERIMENT_COMPARE_FILE).is_file():  # a re-audit's
        sections.append(Section("Compared with the experiment before", "compare", [
            Paragraph("This experiment re-audits an earlier one of the same audit and "
                      "interventions (biasaudit reaudit): what changed in each arm's audit "
                      "and in each intervention's effect."),
            Links([("what changed since the experiment before", "compare/report.html")]),
        ]))  # fmt: skip
    if experiment.notes:
        sections.append(Section("Notes", "notes", [Bullets(experiment.notes)]))
    document.sections = sections
    return document


def _figures(experiment: Experiment) -> list[Figure]:
    """One figure per bias figure the kind reports: the baseline and every arm, by group."""
    from biasaudit.render.figures import DotPanel, Series, dot_panels

    found = []
    figures = list(dict.fromkeys(e.figure for e in experiment.effects if e.bias))
    arms = [arm.name for arm in experiment.arms[1:]]
    for index, figure in enumerate(figures):
        effects = [e for e in experiment.effects if e.figure == figure]
        groups = list(dict.fromkeys(e.group or "" for e in effects))
        by = {(e.arm, e.group or ""): e for e in effects}
        baseline = [next((by[(a, g)].baseline for a in arms if (a, g) in by), None) for g in groups]
        series = [Series("baseline", baseline)]
        for arm in arms:
            here = [by.get((arm, g)) for g in groups]
            placed = [e if e is not None and e.baseline is not None else None for e in here]
            series.append(Series(
                arm, [e.under if e else None for e in here],
                [e.baseline + e.ci[0] if e and e.baseline is not None else None for e in placed],
                [e.baseline + e.ci[1] if e and e.baseline is not None else None for e in placed],
            ))  # fmt: skip
        png = dot_panels(groups, [DotPanel(figure, series, figure)],
                         simulated=experiment.simulated)  # fmt: skip
        found.append(Figure(f"experiment-{index}.png", png,
                            f"{figure} by group, baseline and under each intervention",
                            "Marks: the figure; bars: the paired change's interval, placed "
                            "at the baseline's value plus the change."))  # fmt: skip
    return found


def experiment_compare_document(folder: Path) -> Document:
    """Two experiments compared (``biasaudit compare EXP_A EXP_B``, a re-audit of an
    experiment): the verdict, each arm's audit (linked to its own comparison's report),
    and each intervention's effect in both, with the test of its change."""
    from biasaudit.reports.experiment import read_experiment_comparison

    found = read_experiment_comparison(folder)
    a, b = found.a, found.b
    model = a.model if a.model == b.model else f"{a.model} → {b.model}"
    simulated = a.simulated or b.simulated
    document = Document(
        f"What changed: mitigation experiment of {model}",
        f"{a.kind} audit; experiment A {found.folder_a.name} → B {found.folder_b.name}; "
        f"{len(found.arms)} arms and {len(found.effects)} effects tested for change"
        + (". A SIMULATED model, not a real one" if simulated else ""),
        simulated,
    )
    rows = [[name, c.verdict, f"{len(c.changed_tests)} of {len(c.tests)}"]
            for name, c in found.arms]  # fmt: skip
    links = [(f"{name}: what changed in its audit", f"arm-{name}/report.html")
             for name, _ in found.arms]  # fmt: skip
    effects = [
        [t.metric, t.group or "", _signed(t.before), _signed(t.after),
         f"{t.difference:+.3f}" + (" *" if t.changed(found.alpha) else ""),
         f"[{t.ci[0]:+.3f}, {t.ci[1]:+.3f}]", f"{t.p_adjusted:.2g}"]
        for t in found.effects
    ]  # fmt: skip
    sections = [
        Section("Verdict", "verdict", [
            Paragraph(f"Verdict: {found.verdict}.", strong=True),
            Paragraph("Each arm both experiments ran (the baseline, each intervention of one "
                      "name) is compared as biasaudit compare compares two runs, with its own "
                      "Holm adjustment; then each intervention's effect on each figure, as "
                      "each experiment estimated it (its paired change from its own "
                      "baseline), is tested for a change between them: two independent "
                      "estimates, the normal test from their intervals, Holm-adjusted over "
                      f"every intervention and figure at alpha {found.alpha:g}."),
        ]),
        Section("Each arm's audit, B - A", "arms", [
            Table(["arm", "verdict", "figures changed"], rows, left=frozenset({0, 1})),
            Links(links),
        ]),
        Section("Each intervention's effect, A and B", "effects", [
            Table(["intervention: figure", "group", "effect in A", "effect in B", "change",
                   "interval", "p adj."], effects, left=frozenset({0, 1}),
                  caption="Changed beyond noise: marked * (Holm over every effect)."),
        ]),
    ]  # fmt: skip
    if found.notes:
        sections.append(Section("Notes", "notes", [Bullets(found.notes)]))
    sections.append(Section("The experiments", "experiments", [Links([
        ("experiment A's report", os.path.relpath(found.folder_a / "report.html", folder)),
        ("experiment B's report", os.path.relpath(found.folder_b / "report.html", folder)),
    ])]))  # fmt: skip
    document.sections = sections
    return document


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"
