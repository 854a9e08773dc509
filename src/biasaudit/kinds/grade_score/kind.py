"""The Grade Score kind, declared (:class:`biasaudit.kinds.declare.Kind`)."""

from __future__ import annotations

from biasaudit.kinds.declare import Kind, Ref, Scorer
from biasaudit.kinds.grade_score.spec import GradeScoreSpec

_HERE = "biasaudit.kinds.grade_score"

KIND = Kind(
    name="grade-score",
    specs=(GradeScoreSpec,),
    commands=("grade-score",),
    tasks=Ref(f"{_HERE}.task:TASK_INFOS"),
    metrics=Ref(f"{_HERE}.run:GradeScoreMetrics"),
    run=Ref(f"{_HERE}.run:grade_audit"),
    plan=Ref(f"{_HERE}.task:plan_requests"),
    table=Ref(f"{_HERE}.report:run_table"),
    document=Ref(f"{_HERE}.html:grade_document"),
    study=Ref(f"{_HERE}.study:run_grade_study"),
    study_blocks=Ref(f"{_HERE}.report:grade_study_blocks"),
    study_sections=Ref(f"{_HERE}.html:study_page"),
    change_tests=Ref(f"{_HERE}.changes:change_tests"),
    compare_figures=Ref(f"{_HERE}.html:compare_figures"),
    headline=Ref(f"{_HERE}.report:headline"),
    figures=Ref(f"{_HERE}.run:figure_rows"),
    compared_per="figure",
    scores_file="items.csv",
    power=Ref(f"{_HERE}.power:plan_power"),
    growth=Ref(f"{_HERE}.power:GROWTH"),
    figure_names={
        "grade_score": "Grade Score",
        "entropy": "entropy score",
        "choice": "choice score",
    },
    scorer=Scorer(
        argument="TRIALS_FILE",
        help="""The Grade Score of a judge's answers in TRIALS_FILE, a CSV of item,shown,slot.

    ``shown``: the item's options in the order shown (space-separated indices or
    labels); ``slot``: the one chosen, 1 = shown first (empty: no usable answer);
    optional ``preferred`` and ``replicate``. Writes a run directory as an audit
    does and prints the table and ``run: <dir>``.
    """,
        options=Ref(f"{_HERE}.imported:GradeImportOptions"),
        score=Ref(f"{_HERE}.imported:score_grade"),
    ),
)
