"""Every printed interval contains its estimate, in every command of every kind.

Runs of every kind are generated on simulated models of several strengths and
sizes (small, where intervals are most lopsided), then every command that
prints figures is run on them: ``run``, ``score``, ``compare``, ``study``,
``history`` (through ``reaudit``) and ``report`` (its Markdown). Every
``estimate [low, high]`` in their output is read back, and the estimate must
lie within the bounds as printed. A regression test for ``compare`` printing
``+0.368 [+0.372, +0.652]`` (issue 31).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_cli_audit import invoke, run_dir_of

ROOT = Path(__file__).resolve().parent.parent
NUMBER = r"[+-]?\d+(?:\.\d+)?(?:e[+-]?\d+)?"
SHOWN = re.compile(rf"(?<![\w.\]])({NUMBER})(%?)\s+\[({NUMBER})%?,\s*({NUMBER})%?\]")


def misplaced(text: str) -> list[str]:
    """Each ``estimate [low, high]`` of ``text`` whose estimate lies outside its bounds."""
    found = []
    for match in SHOWN.finditer(text):
        estimate, low, high = (float(match.group(i)) for i in (1, 3, 4))
        if not low <= estimate <= high:
            found.append(match.group(0))
    return found


def checked(*args: str) -> str:
    code, out, err = invoke(*args)
    assert code in (0, 1), err
    text = out + err
    assert not misplaced(text), (args, misplaced(text))
    return out


def test_the_reader_finds_intervals_and_misplaced_estimates() -> None:
    text = "B_M rabbi -0.362 → +0.006: +0.368 [+0.372, +0.652]; W_F 12.5% [10.0%, 15.0%]"
    assert [m.group(0) for m in SHOWN.finditer(text)] == [
        "+0.368 [+0.372, +0.652]", "12.5% [10.0%, 15.0%]",
    ]  # fmt: skip
    assert misplaced(text) == ["+0.368 [+0.372, +0.652]"]


def audit(tmp_path: Path, *args: str) -> Path:
    out = checked("run", *args, "--runs-dir", str(tmp_path / "runs"))
    return run_dir_of(out)


def report_of(run_dir: Path) -> None:
    checked("report", str(run_dir), "--format", "md")
    text = (run_dir / "report.md").read_text(encoding="utf-8")
    assert not misplaced(text), misplaced(text)


@pytest.mark.parametrize(
    ("names", "jobs"),
    [(2, ["--jobs", "software-engineer"]), (10, [])],
    ids=["2-names", "10-names-4-jobs"],
)
def test_allocation_run_compare_study_and_report(
    tmp_path: Path, names: int, jobs: list[str]
) -> None:
    # 10 names on all four jobs is the case: the bootstrap of a paired RABBI
    # difference sat off-centre, and its quantiles missed the difference itself.
    small = [*jobs, "--names-per-group", str(names), "--rounds", "300", "--bootstrap", "300",
             "--no-report"]  # fmt: skip
    biased = audit(tmp_path, "resume-screening", "--model", "sim/biased", *small)
    fair = audit(tmp_path, "resume-screening", "--model", "sim/fair", *small)
    pairwise = audit(tmp_path, "resume-screening", "--model", "sim/biased", "--method",
                     "pairwise", "--pools", "3", *small)  # fmt: skip
    listwise = audit(tmp_path, "resume-screening", "--model", "sim/biased", "--method",
                     "listwise", "--pools", "6", *jobs, "--names-per-group", str(names),
                     "--no-report")  # fmt: skip
    checked("compare", str(fair), str(biased), "--no-report", "--all")
    checked("compare", str(biased), str(fair), "--no-report", "--all")
    checked("study", str(biased), str(fair), "--no-report")
    for run_dir in (biased, pairwise, listwise):
        report_of(run_dir)


def test_grade_score_and_ruted_runs_studies_and_reports(tmp_path: Path) -> None:
    grades = [
        audit(tmp_path, "grade-score", "--items", "demo", "--model", model, *extra, "--no-report")
        for model, extra in (("sim/biased", []), ("sim/fair", ["--random-option"]))
    ]
    checked("study", *map(str, grades), "--no-report")
    checked("compare", *map(str, grades), "--no-report", "--all")
    ruted = [
        audit(tmp_path, "ruted", "--model", model, "--replicates", "4", "--no-report")
        for model in ("sim/biased", "sim/fair")
    ]
    checked("study", *map(str, ruted), "--no-report")
    checked("compare", *map(str, ruted), "--no-report", "--all")
    for run_dir in (*grades, *ruted):
        report_of(run_dir)


def test_imported_outputs_and_history(tmp_path: Path) -> None:
    data = ROOT / "tests" / "data"
    for kind, name, reference in (
        ("allocation", "pointwise_example.csv", "R"),
        ("listwise", "listwise_example.csv", "W_M"),
    ):
        checked("score", kind, str(data / name), "--reference-group", reference,
                "--runs-dir", str(tmp_path / "scored"), "--no-report")  # fmt: skip
    spec = tmp_path / "audit.yaml"
    spec.write_text(
        "task: resume-screening\nmodel: sim/biased\njobs: [software-engineer]\n"
        "names_per_group: 3\nrounds: 300\nbootstrap: 300\n",
        encoding="utf-8",
    )
    history = tmp_path / "history"
    for _ in range(2):
        checked("reaudit", str(spec), "--history", str(history))
    checked("history", "--spec", str(spec), "--runs-dir", str(history))
