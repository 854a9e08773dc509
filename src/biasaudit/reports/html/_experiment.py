"""The report page of a mitigation experiment (``experiment.json``)."""

from __future__ import annotations

import os
from pathlib import Path

from biasaudit.render.document import Bullets, Document, Links, Paragraph, Section, Table

__all__ = ["experiment_document"]


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
                  caption="Bias removed: the median share of the baseline's summed absolute "
                  "bias figures removed. Decisions and validity: the paired change with its "
                  f"{experiment.confidence:.0%} interval over the units that vary. Tokens: "
                  "each run estimated alike from its prompts, the cache set aside. An "
                  "intervention that flattens the decisions is ranked last.",
                  left=frozenset({0, 6})),
        ]),
    ]  # fmt: skip
    for cost in experiment.costs:
        mine = [e for e in experiment.effects if e.arm == cost.arm]
        arm = experiment.arm(cost.arm)
        blocks: list[object] = [Paragraph(cost.verdict, strong=True)]
        if arm.intervention is not None:
            blocks.append(Paragraph(f"What it does: {arm.intervention.described()}."))
            if arm.intervention.source:
                blocks.append(Paragraph(f"Source: {arm.intervention.source}."))
        rows = [[str(c) for c in row] for row in effect_rows(mine, everything=True)]
        blocks.append(Table(list(EFFECT_HEADER), rows, left=frozenset({0, 1}),
                            caption=f"Every figure, paired with the baseline; * beyond noise "
                            f"({experiment.family})."))  # fmt: skip
        sections.append(Section(f"Under {cost.arm}", f"arm-{cost.arm}", blocks))  # type: ignore[arg-type]
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
    if experiment.notes:
        sections.append(Section("Notes", "notes", [Bullets(experiment.notes)]))
    document.sections = sections
    return document
