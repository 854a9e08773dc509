"""The listwise kind, declared (:class:`biasaudit.kinds.declare.Kind`)."""

from __future__ import annotations

from biasaudit.kinds.declare import Kind, Ref
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
    compared_per="group",
    figure_names={"dp_gap": "ΔDP", "first choice": "first choice"},
    in_points=("dp_gap", "first choice"),
)
