"""The RUTEd kind, declared (:class:`biasaudit.kinds.declare.Kind`)."""

from __future__ import annotations

from biasaudit.kinds.declare import Kind, Ref, Scorer
from biasaudit.kinds.ruted.spec import RutedSpec

_HERE = "biasaudit.kinds.ruted"

KIND = Kind(
    name="ruted",
    specs=(RutedSpec,),
    commands=("ruted",),
    tasks=Ref(f"{_HERE}.task:TASK_INFOS"),
    metrics=Ref(f"{_HERE}.metrics:RutedMetrics"),
    run=Ref(f"{_HERE}.run:ruted_audit"),
    plan=Ref(f"{_HERE}.plan:plan_requests"),
    table=Ref(f"{_HERE}.report:run_table"),
    document=Ref(f"{_HERE}.html:ruted_document"),
    study=Ref(f"{_HERE}.study:run_ruted_study"),
    study_blocks=Ref(f"{_HERE}.report:ruted_study_blocks"),
    study_sections=Ref(f"{_HERE}.html:study_page"),
    change_tests=Ref(f"{_HERE}.changes:change_tests"),
    compare_figures=Ref(f"{_HERE}.html:compare_figures"),
    headline=Ref(f"{_HERE}.report:headline"),
    figures=Ref(f"{_HERE}.metrics:figure_rows"),
    compared_per="context",
    scores_file="occupations.csv",
    power=Ref(f"{_HERE}.power:plan_power"),
    growth=Ref(f"{_HERE}.power:GROWTH"),
    scorer=Scorer(
        argument="OUTPUTS_FILE",
        help="""The RUTEd metrics of OUTPUTS_FILE, a CSV of gendered outputs.

    Its columns: occupation,context,text or occupation,context,p_male. Texts
    are labelled by their pronouns as a run labels them; p_male is a share
    already measured. Optional ``majority`` (male/female) for occupations other
    than the 40 shipped ones, and ``template`` to tell one occupation's prompts
    apart (the mode-collapse check compares replicates of one prompt). Writes a
    run directory and prints the table.
    """,
        options=Ref(f"{_HERE}.imported:RutedImportOptions"),
        score=Ref(f"{_HERE}.imported:score_ruted"),
    ),
)
