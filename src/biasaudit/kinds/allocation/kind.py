"""The allocation kind, declared (:class:`biasaudit.kinds.declare.Kind`).

Resume screening, essay grading and a task of your own are one kind: their
runs share the manifest kind ``allocation``, one ``metrics.json`` shape, one
table and one report.
"""

from __future__ import annotations

from biasaudit.kinds.allocation.spec import (
    AllocationTaskSpec,
    EssayGradingSpec,
    ResumeScreeningSpec,
)
from biasaudit.kinds.declare import Kind, Ref, Scorer

_HERE = "biasaudit.kinds.allocation"

KIND = Kind(
    name="allocation",
    specs=(ResumeScreeningSpec, EssayGradingSpec, AllocationTaskSpec),
    commands=("resume-screening", "essay-grading"),
    tasks=Ref("biasaudit.kinds.candidates.tasks:TASK_INFOS"),
    metrics=Ref(f"{_HERE}.metrics:AllocationMetrics"),
    run=Ref(f"{_HERE}.run:audit"),
    plan=Ref(f"{_HERE}.scoring:plan_requests"),
    table=Ref(f"{_HERE}.report:run_table"),
    document=Ref(f"{_HERE}.html:allocation_document"),
    study=Ref(f"{_HERE}.study:run_study"),
    study_blocks=Ref(f"{_HERE}.report:study_blocks"),
    study_sections=Ref(f"{_HERE}.html:study_page"),
    change_tests=Ref(f"{_HERE}.changes:change_tests"),
    compare_figures=Ref(f"{_HERE}.html:compare_figures"),
    headline=Ref(f"{_HERE}.report:headline"),
    figures=Ref(f"{_HERE}.metrics:figure_rows"),
    compared_per="group",
    scores_file="scores.csv",
    power=Ref(f"{_HERE}.power:plan_power"),
    growth=Ref(f"{_HERE}.power:growth"),
    compare_note=" ΔDP and ΔEO in percentage points.",
    figure_names={
        "rabbi": "RABBI",
        "avg_gap": "δ (mean score gap)",
        "dp_gap": "ΔDP",
        "eo_gap": "ΔEO",
    },
    in_points=("dp_gap", "eo_gap"),
    scorer=Scorer(
        argument="SCORES_FILE",
        help="""Every allocation figure of SCORES_FILE, a CSV of candidate,group,score.

    Optional columns: qualified (true/false; empty: not rated), subtask, name,
    item, pool. Writes a run directory as an audit does (the manifest says the
    scores were imported), prints the table and ``run: <dir>``; a malformed
    file exits 2 naming its line and column.
    """,
        options=Ref(f"{_HERE}.imported:ImportOptions"),
        score=Ref(f"{_HERE}.imported:score_allocation"),
    ),
)
