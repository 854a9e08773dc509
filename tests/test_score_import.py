"""`biasaudit score allocation`: audits of scores produced elsewhere.

The same figures as an audit, from a CSV; the run directory says the scores
were imported; malformed files exit 2 naming line and column; with
`--conventions paper` the per-subtask figures are the authors' own numbers on
the same scores (tests/data/pointwise_example.json, obtained by running their
published code outside this project).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.runs import read_manifest

DATA = Path(__file__).resolve().parent / "data"


def score(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["score", "allocation", *args])
    return result.exit_code, result.stdout, result.stderr


def run_of(out: str) -> Path:
    return Path(out.strip().splitlines()[-1].removeprefix("run: "))


def test_imported_scores_give_the_authors_numbers_with_paper_conventions(tmp_path: Path) -> None:
    code, out, err = score(
        str(DATA / "pointwise_example.csv"), "--reference-group", "R", "--conventions", "paper",
        "--runs-dir", str(tmp_path), "--no-report",
    )  # fmt: skip
    assert code == 0, err
    run_dir = run_of(out)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    expected = json.loads((DATA / "pointwise_example.json").read_text())
    for subtask, groups in expected["subtasks"].items():
        for group, figures in groups.items():
            found = metrics["subtasks"][subtask]["groups"][group]
            for name in ("rabbi", "jsd", "emd", "avg_gap"):
                assert found[name] == pytest.approx(float(figures[name]), abs=1e-12), name
            assert found["rabbi_p"] == pytest.approx(float(figures["rabbi_p"]), rel=1e-12)
    manifest = read_manifest(run_dir)
    assert manifest.kind == "allocation" and manifest.status == "completed"
    assert manifest.endpoint["provider"] == "imported" and len(manifest.endpoint["sha256"]) == 64
    assert "scores imported with biasaudit score" in out.splitlines()[1]
    replay = CliRunner().invoke(cli, ["replay", str(run_dir)])
    assert replay.exit_code == 2 and "nothing to replay" in replay.stderr


def test_two_imports_compare_and_study_like_runs(tmp_path: Path) -> None:
    source = (DATA / "pointwise_example.csv").read_text().splitlines()
    shifted = [source[0]] + [
        line if ",A," not in line else line.rsplit(",", 1)[0] + ",0.01" for line in source[1:]
    ]
    (tmp_path / "after.csv").write_text("\n".join(shifted) + "\n")
    runs = []
    for name in (str(DATA / "pointwise_example.csv"), str(tmp_path / "after.csv")):
        code, out, err = score(name, "--reference-group", "R", "--runs-dir", str(tmp_path / "r"),
                               "--no-report")  # fmt: skip
        assert code == 0, err
        runs.append(str(run_of(out)))
    compared = CliRunner().invoke(cli, ["compare", *runs, "--no-report"])
    assert compared.exit_code == 0, compared.output
    assert compared.stdout.splitlines()[-1].startswith("verdict: changed")
    studied = CliRunner().invoke(cli, ["study", *runs, "--no-report"])
    assert studied.exit_code == 0, studied.output


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ("candidate,group,score\na,R,0.5\nb,A,high\n", "line 3, field 'score': 'high' is not a finite"),
        ("candidate,group,score\na,R,0.5\nb,A,nan\n", "line 3, field 'score'"),
        ("candidate,group,score\na,R,0.5\na,A,0.4\n", "line 3, field 'candidate': 'a' appears twice"),
        ("candidate,group,score\na,R,0.5\nb,,0.4\n", "line 3, field 'group': empty"),
        ("candidate,group,score,qualified\na,R,0.5,yes\nb,A,0.4,maybe\n",
         "line 3, field 'qualified': 'maybe' is not true/false"),
        ("candidate,score\na,0.5\n", "column 'group'"),
        ("candidate,group,score\na,R,0.5\nb,R,0.4\n", "at least two groups"),
        ("candidate,group,score\na,X,0.5\nb,Y,0.4\n", "name the reference with --reference-group"),
    ],
)  # fmt: skip
def test_a_malformed_scores_file_exits_2_naming_line_and_column(
    tmp_path: Path, rows: str, expected: str
) -> None:
    path = tmp_path / "scores.csv"
    path.write_text(rows)
    code, out, err = score(str(path), "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and expected in err and out == ""
    assert not (tmp_path / "runs").exists()  # nothing written before the file is read whole
