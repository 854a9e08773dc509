"""The listwise kind, declared (:class:`biasaudit.kinds.declare.Kind`)."""

from __future__ import annotations

from biasaudit.kinds.declare import Kind, Ref, Scorer
from biasaudit.kinds.listwise.spec import ListwiseEssaySpec, ListwiseResumeSpec, ListwiseTaskSpec

_HERE = "biasaudit.kinds.listwise"

KIND = Kind(
    name="listwise",
    specs=(ListwiseResumeSpec, ListwiseEssaySpec, ListwiseTaskSpec),
    commands=(),
    tasks=Ref("biasaudit.kinds.candidates.tasks:TASK_INFOS"),
    metrics=Ref(f"{_HERE}.metrics:ListwiseMetrics"),
    run=Ref(f"{_HERE}.run:listwise_audit"),
    plan=Ref(f"{_HERE}.plan:plan_requests"),
    table=Ref(f"{_HERE}.report:run_table"),
    document=Ref(f"{_HERE}.html:listwise_document"),
    study=Ref(f"{_HERE}.study:run_listwise_study"),
    study_blocks=Ref(f"{_HERE}.report:study_blocks"),
    study_sections=Ref(f"{_HERE}.html:study_page"),
    change_tests=Ref(f"{_HERE}.changes:change_tests"),
    compare_figures=Ref(f"{_HERE}.html:compare_figures"),
    headline=Ref(f"{_HERE}.report:headline"),
    figures=Ref(f"{_HERE}.metrics:figure_rows"),
    compared_per="group",
    scores_file="shown.csv",
    power=Ref(f"{_HERE}.power:plan_power"),
    growth=Ref(f"{_HERE}.power:GROWTH"),
    figure_names={"dp_gap": "ΔDP", "first choice": "first choice"},
    in_points=("dp_gap", "first choice"),
    scorer=Scorer(
        argument="RANKINGS_FILE",
        help="""The listwise figures of RANKINGS_FILE, rankings produced elsewhere.

    One row per candidate shown in an answer: pool, order (which answer of the
    pool), slot (1 = shown first), candidate, group, rank (1 = best; empty: not
    ranked); optional subtask, name and item (the units), and race / sex for
    impact ratios per category. Writes a run directory as an audit does and
    prints the table; a malformed file exits 2 naming its line and column.
    """,
        options=Ref(f"{_HERE}.imported:ListwiseImportOptions"),
        score=Ref(f"{_HERE}.imported:score_listwise"),
    ),
)
