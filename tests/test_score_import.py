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
from biasaudit.store.runs import read_manifest

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


TRIALS = """item,shown,slot,preferred
q1,A B C,1,B
q1,B C A,1,B
q1,C A B,3,B
q2,0 1 2,2,
q2,1 2 0,1,
q2,2 0 1,,
"""


def test_a_judges_answers_from_elsewhere_get_their_grade_score(tmp_path: Path) -> None:
    from biasaudit.metrics import grade_score

    (tmp_path / "trials.csv").write_text(TRIALS)
    result = CliRunner().invoke(
        cli, ["score", "grade-score", str(tmp_path / "trials.csv"), "--runs-dir",
              str(tmp_path / "runs"), "--no-report"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    run_dir = run_of(result.stdout)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    # q1: slots 1, 1, 3 of orders ABC, BCA, CAB -> options A, B, B (labels sorted: A=0, B=1)
    expected = grade_score([0, 0, 2], [0, 1, 1], 3)
    assert metrics["items"] == 1 and metrics["partial"] == 1  # q2 has an unusable answer
    assert metrics["grade_score"] == pytest.approx(expected.grade)
    assert metrics["usable"] == 5 and metrics["unparsed"] == 1
    assert metrics["agreement"]["items"] == 1  # q1 names a preferred option
    assert read_manifest(run_dir).endpoint["provider"] == "imported"
    assert "answers imported with biasaudit score" in result.stdout.splitlines()[1]


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ("item,shown,slot\nq,A B C,4\n", "line 2, field 'slot': '4' is not a slot from 1 to 3"),
        ("item,shown,slot\nq,A B C,1\nq,A B D,1\n", "line 3, field 'shown'"),
        ("item,shown,slot\nq,A A C,1\n", "line 2, field 'shown'"),
        ("item,shown,slot,preferred\nq,A B C,1,Z\n", "line 2, field 'preferred'"),
        ("item,shown\nq,A B C\n", "column 'slot'"),
    ],
)
def test_a_malformed_trials_file_exits_2_naming_line_and_column(
    tmp_path: Path, rows: str, expected: str
) -> None:
    (tmp_path / "trials.csv").write_text(rows)
    result = CliRunner().invoke(
        cli, ["score", "grade-score", str(tmp_path / "trials.csv"), "--runs-dir",
              str(tmp_path / "runs")],
    )  # fmt: skip
    assert result.exit_code == 2 and expected in result.stderr
    assert not (tmp_path / "runs").exists()


def test_gendered_outputs_from_elsewhere_get_the_ruted_metrics(tmp_path: Path) -> None:
    from biasaudit.metrics import neutrality, skew

    shares = tmp_path / "shares.csv"
    shares.write_text(
        "occupation,context,p_male\nnurse,standard,0.2\ncarpenter,standard,0.8\n"
        "secretary,standard,0.3\nmechanic,standard,0.9\n"
    )
    result = CliRunner().invoke(
        cli, ["score", "ruted", str(shares), "--runs-dir", str(tmp_path / "runs"), "--no-report"]
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads((run_of(result.stdout) / "metrics.json").read_text())
    standard = metrics["contexts"]["standard"]
    p = [0.2, 0.8, 0.3, 0.9]
    assert standard["neutrality"] == pytest.approx(neutrality(p).value)
    assert standard["skew"] == pytest.approx(skew(p).value)
    texts = tmp_path / "texts.csv"
    texts.write_text(
        "occupation,context,text\nnurse,esl,She is kind.\nnurse,esl,He is kind.\n"
        "nurse,esl,She said her piece.\ncarpenter,esl,He works.\ncarpenter,esl,They work.\n"
        "plumber,esl,He fixes.\n"
    )
    result = CliRunner().invoke(
        cli, ["score", "ruted", str(texts), "--runs-dir", str(tmp_path / "runs"), "--no-report"]
    )
    assert result.exit_code == 2 and "line 7, field 'majority'" in result.stderr
    texts.write_text(texts.read_text().replace("plumber", "mechanic"))
    result = CliRunner().invoke(
        cli, ["score", "ruted", str(texts), "--runs-dir", str(tmp_path / "runs"), "--no-report"]
    )
    assert result.exit_code == 0, result.output
    run_dir = run_of(result.stdout)
    esl = json.loads((run_dir / "metrics.json").read_text())["contexts"]["esl"]
    # nurse 1 of 3 male, carpenter 1 of 1 (one text without pronouns dropped), mechanic 1 of 1
    assert esl["skew"] == pytest.approx(skew([1 / 3, 1.0, 1.0], n=[3, 1, 1]).value)
    assert 0.0 <= esl["neutrality_ci"][0] <= esl["neutrality_ci"][1] <= 1.0


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ("occupation,context,p_male\nnurse,standard,1.5\n", "line 2, field 'p_male'"),
        ("occupation,context,p_male\nnurse,standard,0.5\nnurse,standard,0.4\n", "line 3"),
        ("occupation,context\nnurse,standard\n", "either a 'text' column or a 'p_male'"),
        ("occupation,context,p_male,majority\nnurse,standard,0.5,both\n", "field 'majority'"),
    ],
)
def test_a_malformed_ruted_file_exits_2(tmp_path: Path, rows: str, expected: str) -> None:
    (tmp_path / "f.csv").write_text(rows)
    result = CliRunner().invoke(
        cli, ["score", "ruted", str(tmp_path / "f.csv"), "--runs-dir", str(tmp_path / "runs")]
    )
    assert result.exit_code == 2 and expected in result.stderr
    assert not (tmp_path / "runs").exists()


def test_imported_pools_select_within_the_pools_given(tmp_path: Path) -> None:
    """A 'pool' column: the top k of each given pool, as pairwise runs select."""
    lines = ["candidate,group,pool,score"]
    for pool in range(6):
        for group, value in (("W_M", 0.9), ("B_M", 0.1), ("A_F", 0.5)):
            lines.append(f"p{pool}-{group},{group},p{pool},{value}")
    (tmp_path / "pooled.csv").write_text("\n".join(lines) + "\n")
    code, out, err = score(str(tmp_path / "pooled.csv"), "--runs-dir", str(tmp_path / "runs"),
                           "--no-report")  # fmt: skip
    assert code == 0, err
    metrics = json.loads((run_of(out) / "metrics.json").read_text())
    assert metrics["selection"]["pool"] == "given" and metrics["selection"]["rounds"] == 6
    assert metrics["groups"]["B_M"]["dp_gap"]["1"] == pytest.approx(-1.0)  # W_M always first
    assert metrics["groups"]["A_F"]["dp_gap"]["2"] == pytest.approx(0.0)  # both in the top 2


def test_imported_pools_with_some_candidates_unrated_say_why_there_is_no_eo(
    tmp_path: Path,
) -> None:
    lines = ["candidate,group,pool,score,qualified"]
    for pool in range(6):
        for group, value in (("W_M", 0.9), ("B_M", 0.1)):
            lines.append(f"p{pool}-{group},{group},p{pool},{value},{'yes' if pool else ''}")
    (tmp_path / "pooled.csv").write_text("\n".join(lines) + "\n")
    code, out, err = score(str(tmp_path / "pooled.csv"), "--runs-dir", str(tmp_path / "runs"),
                           "--no-report")  # fmt: skip
    assert code == 0, err
    metrics = json.loads((run_of(out) / "metrics.json").read_text())
    assert metrics["groups"]["B_M"]["dp_gap"] and not metrics["groups"]["B_M"]["eo_gap"]
    assert "no ΔEO in the pools given: some candidates are not rated" in metrics["notes"]


@pytest.mark.parametrize(
    ("kind", "missing"),
    [
        ("allocation", "no columns 'candidate', 'group', 'score'"),
        ("listwise", "no columns 'pool', 'order', 'slot', 'candidate', 'group', 'rank'"),
        ("decisions", "no columns 'scenario', 'age', 'gender', 'race'"),
        ("grade-score", "no columns 'item', 'shown', 'slot'"),
        ("ruted", "no columns 'occupation', 'context'"),
    ],
)
def test_every_missing_column_is_named_at_once(kind: str, missing: str, tmp_path: Path) -> None:
    """One try names them all (it named one a try: 'candidate', then 'group', ...)."""
    path = tmp_path / "file.csv"
    path.write_text("x,y\n1,2\n")
    result = CliRunner().invoke(cli, ["score", kind, str(path), "--runs-dir",
                                      str(tmp_path / "runs")])  # fmt: skip
    assert result.exit_code == 2 and f"{missing} (columns: x, y)" in result.stderr
    assert not (tmp_path / "runs").exists()
