"""What an allocation run reports about its figures: units, headline, warnings.

``allocation_results`` turns the scores into ``metrics.json``'s figures and
notes; the table the terminal prints (``report.allocation_table``) carries
the notes. These tests plant what a reviewer would look for: a group effect
whose sign differs between subtasks, too few names, qualified-only figures,
every group's own selection rate and an omnibus test.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from biasaudit.kinds.allocation.metrics_file import (
    AllocationMetrics,
    MetricOptions,
    allocation_results,
)
from biasaudit.kinds.allocation.table import allocation_table
from biasaudit.kinds.candidates.task import PoolDesign


def scores(shift: dict[tuple[str, str], float], *, names: int = 10, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    effect = {(g, i): rng.normal(0, 0.2) for g in ("W_M", "B_M") for i in range(names)}
    rows = []
    for job in ("nurse", "engineer"):
        for resume in range(4):
            for group in ("W_M", "B_M"):
                for i in range(names):
                    score = 0.5 + effect[(group, i)] + shift.get((group, job), 0.0)
                    rows.append(
                        {"candidate_id": f"{job}/{resume}/{group}{i}", "group": group,
                         "subtask": job, "qualified": resume < 2, "name": f"{group}{i}",
                         "resume_id": f"{job}-{resume}", "irregular": False,
                         "score": float(np.clip(score + rng.normal(0, 0.05), 0, 1))}
                    )  # fmt: skip
    return pd.DataFrame(rows)


OPTIONS = MetricOptions(
    reference="W_M", groups=("W_M", "B_M"), k_max=2, pool=PoolDesign("one_per_group"),
    rounds=300, value_range=(0.0, 1.0), seed=0, bootstrap=200, gap_bootstrap=50,
    confidence=0.95,
)  # fmt: skip


def metrics_of(frame: pd.DataFrame) -> AllocationMetrics:
    notes: list[str] = []
    found = allocation_results(frame, OPTIONS, notes, item_column="resume_id")
    return AllocationMetrics(
        task="resume-screening", method="pointwise", model="test", simulated=True,
        reference_group="W_M", k_max=2, confidence=0.95,
        scoring={"path": "logprobs", "value_range": [0, 1]},
        candidates={"total": len(frame), "scored": len(frame), "irregular": 0, "unscored": 0,
                    "failed": 0},
        requests={"requests": 0, "sent": 0, "cache_hits": 0, "failures": 0, "refusals": 0},
        selection=found.selection, intervals=found.intervals, groups=found.groups,
        rates=found.rates, omnibus=found.omnibus, subtasks=found.subtasks, notes=notes,
    )  # fmt: skip


def test_a_group_effect_that_differs_in_sign_between_subtasks_is_said_first_hand() -> None:
    metrics = metrics_of(scores({("B_M", "nurse"): -0.3, ("B_M", "engineer"): +0.3}))
    nurse, engineer = (metrics.subtasks[s].groups["B_M"] for s in ("nurse", "engineer"))
    assert nurse.rabbi is not None and nurse.rabbi < -0.5
    assert engineer.rabbi is not None and engineer.rabbi > 0.5
    headline = metrics.groups["B_M"]
    assert headline.rabbi is not None and abs(headline.rabbi) < 0.2  # the mean hides them
    warning = [n for n in metrics.notes if "subtasks disagree in the sign of RABBI" in n]
    assert warning and "nurse -" in warning[0] and "engineer +" in warning[0]
    assert any("subtasks disagree" in line for line in allocation_table(metrics))


def test_one_sign_everywhere_draws_no_warning_and_the_headline_has_its_sign() -> None:
    metrics = metrics_of(scores({("B_M", "nurse"): -0.3, ("B_M", "engineer"): -0.3}))
    assert not any("disagree" in note for note in metrics.notes)
    headline = metrics.groups["B_M"]
    assert headline.rabbi_ci is not None and headline.rabbi_ci[1] < 0
    assert headline.dp_gap["1"] < 0 and headline.dp_gap_ci["1"][1] < 0


def test_few_names_are_named_in_a_note_and_intervals_say_over_what() -> None:
    metrics = metrics_of(scores({}, names=3))
    assert any(
        note.startswith("intervals rest on few names (W_M 3, B_M 3") for note in metrics.notes
    )
    assert metrics.groups["B_M"].units == 3 and metrics.groups["B_M"].units_reference == 3
    assert metrics.intervals is not None and metrics.intervals.units == "names x items"
    header = allocation_table(metrics)[3]
    assert "over names x items" in header
    one = metrics_of(scores({}, names=1))
    assert one.groups["B_M"].rabbi_ci is None and one.groups["B_M"].rabbi_p is None
    assert any(note.startswith("too few names for an interval") for note in one.notes)


def test_qualified_figures_rates_and_the_omnibus_test_are_reported() -> None:
    metrics = metrics_of(scores({("B_M", "nurse"): -0.3, ("B_M", "engineer"): -0.3}))
    b_m = metrics.groups["B_M"]
    assert b_m.rabbi_qualified is not None and b_m.rabbi_qualified_ci is not None
    assert b_m.n_qualified == 2 * 2 * 2 * 10  # two qualified resumes per job, both groups
    assert set(metrics.rates) == {"W_M", "B_M"}
    w_m = metrics.rates["W_M"]
    assert w_m.selection_rate["1"] > metrics.rates["B_M"].selection_rate["1"]
    low, high = w_m.selection_rate_ci["1"]
    assert 0 <= low <= w_m.selection_rate["1"] <= high <= 1
    assert metrics.omnibus["1"].p < 0.05
    assert metrics.selection is not None and metrics.selection.draw == "balanced"
    lines = allocation_table(metrics)
    assert any(line.startswith("selection rate at k=1: W_M 0.") for line in lines)
    assert any(line.startswith("do the groups differ at k=1? p = ") for line in lines)


def test_paper_conventions_give_the_authors_numbers_per_subtask() -> None:
    """tests/data/pointwise_example.json: the authors' own code on this file (run outside
    this project; see make_pointwise_example.py)."""
    import json
    from dataclasses import replace
    from pathlib import Path

    import pytest

    data = Path(__file__).resolve().parent / "data"
    frame = pd.read_csv(data / "pointwise_example.csv").rename(
        columns={"candidate": "candidate_id"}
    )
    frame["irregular"] = False
    expected = json.loads((data / "pointwise_example.json").read_text())
    options = replace(OPTIONS, reference="R", groups=("R", "A", "B"), conventions="paper")
    found = allocation_results(frame, options, [])
    default = allocation_results(frame, replace(options, conventions="biasaudit"), [])
    for subtask, groups in expected["subtasks"].items():
        for group, figures in groups.items():
            mine = found.subtasks[subtask].groups[group]
            for name in ("rabbi", "jsd", "emd", "avg_gap"):
                assert getattr(mine, name) == pytest.approx(float(figures[name]), abs=1e-12)
            assert mine.rabbi_p == pytest.approx(float(figures["rabbi_p"]), rel=1e-12)
            ours = default.subtasks[subtask].groups[group]
            assert ours.jsd != pytest.approx(float(figures["jsd"]))  # biasaudit's estimator
