"""``biasaudit ll144``: the Local Law 144 summary from an employer's file, as a user runs it."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.metrics import ll144_rates
from biasaudit.textfiles import EXAMPLES_DIR

EXAMPLE = EXAMPLES_DIR / "ll144-outcomes.csv"


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["ll144", *map(str, args)])
    return result.exit_code, result.output


def test_the_example_summary_matches_the_figures_and_states_the_facts(tmp_path: Path) -> None:
    code, output = _run(
        EXAMPLE, "--out", tmp_path / "s", "--tool", "ScreenCo", "--source", "Applicants of 2025",
        "--distribution-date", "2024-03-01", "--audit-date", "2026-11-27",
    )  # fmt: skip
    assert code == 0, output
    assert "2,383 individuals assessed (17 left out)" in output
    table = pd.read_csv(tmp_path / "s" / "summary.csv")
    frame = pd.read_csv(EXAMPLE, dtype=str, keep_default_na=False)
    frame = frame[frame["selected"] != ""]
    sexes = [s or None for s in frame["sex"]]
    races = [None if r == "Declined" else r for r in frame["race"]]
    expected = ll144_rates(sexes, races, frame["selected"].astype(float))
    assert len(table) == len(expected.rows) == 2 + 7 + 14
    for row, want in zip(table.itertuples(), expected.rows, strict=True):
        assert (row.category, row.n, row.selected) == (want.category, want.n, want.selected)
        if want.ratio is not None:
            assert row.impact_ratio == pytest.approx(want.ratio)
    markdown = (tmp_path / "s" / "summary.md").read_text()
    for fact in ("Date of this audit | 2026-11-27", "Distribution date of the tool | 2024-03-01",
                 "historical data: Applicants of 2025", "Of an unknown sex | 23", "Left out | 17 of 2,400",
                 "## Impact ratios: intersectional categories"):  # fmt: skip
        assert fact in markdown
    html = (tmp_path / "s" / "summary.html").read_text()
    assert 'href="#impact-race-ethnicity"' in html and "<table>" in html
    record = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert record["source"]["left_out"] == 17 and record["unknown"]["race/ethnicity"] == 77
    # run again: the same files, replaced
    assert _run(EXAMPLE, "--out", tmp_path / "s", "--audit-date", "2026-11-27")[0] == 0


def test_a_file_where_nobody_was_selected_says_why_there_is_no_impact_ratio(
    tmp_path: Path,
) -> None:
    rows = [{"sex": sex, "race": race, "selected": 0}
            for sex in ("Male", "Female") for race in ("White", "Asian") for _ in range(5)]  # fmt: skip
    code, output = _run(_write(tmp_path / "none.csv", rows), "--out", tmp_path / "s")
    assert code == 0, output
    assert "20 individuals assessed (0 left out); no impact ratio: nobody selected, so every " \
        "rate is 0" in output  # fmt: skip
    markdown = (tmp_path / "s" / "summary.md").read_text()
    assert "**No individual was selected in any category, so every rate is 0" in markdown
    male = "[Male](<evidence.html#view=rows&sex=Male>)"  # the rows behind it
    assert f"| {male} | 10 | 0 | 0.0% [0.0%, 27.8%] | — (every rate is 0) |  |" in markdown
    assert "categories have an impact ratio under four fifths" not in markdown


def test_a_file_of_unknown_categories_only_says_so_not_that_nobody_was_selected(
    tmp_path: Path,
) -> None:
    rows = [{"sex": "unknown", "race": "declined", "selected": i % 2} for i in range(20)]
    code, output = _run(_write(tmp_path / "unknown.csv", rows), "--out", tmp_path / "s")
    assert code == 0, output
    assert "20 individuals assessed (0 left out); 10 selected; no impact ratio: no " \
        "individual's sex or race/ethnicity is known" in output  # fmt: skip
    markdown = (tmp_path / "s" / "summary.md").read_text()
    assert "**20 individuals were assessed and 10 selected, but no individual's sex" in markdown
    assert "No individual was selected" not in markdown
    assert json.loads((tmp_path / "s" / "summary.json").read_text())["counted"] == 10


def test_scores_labels_ethnicity_column_and_small_categories(tmp_path: Path) -> None:
    rows = []
    for i in range(200):
        rows.append({
            "gender": "W" if i % 2 else "M",
            "hispanic": "yes" if i % 5 == 0 else "no",
            "race_alone": "white" if i % 3 else "Black",
            "score": str(i % 10),
        })  # fmt: skip
    rows[1]["race_alone"] = "Pacific Islander"  # one person: under 2%
    data = _write(tmp_path / "d.csv", rows)
    code, output = _run(
        data, "--sex", "gender", "--race", "race_alone", "--ethnicity", "hispanic",
        "--score", "score", "--label", "W=Female", "--exclude-small", "one person",
        "--data", "test", "--source", "generated resumes", "--out", tmp_path / "o",
    )  # fmt: skip
    assert code == 0, output
    table = pd.read_csv(tmp_path / "o" / "summary.csv")
    sex = table[table["dimension"] == "sex"].set_index("category")
    assert sex.loc["Female", "n"] == 100 and "above_median" in table.columns
    hispanic = table[table["category"] == "Hispanic or Latino"].iloc[0]
    assert hispanic["n"] == 40
    small = table[table["category"].str.startswith("Native Hawaiian")].iloc[0]
    assert small["excluded_small"] and pd.isna(small["impact_ratio"]) and small["n"] == 1
    markdown = (tmp_path / "o" / "summary.md").read_text()
    assert "These are test data" in markdown and "Why: one person" in markdown
    assert "scored exactly the median" in markdown  # ties at the median, said


@pytest.mark.parametrize(
    ("rows", "args", "where"),
    [
        ([{"sex": "Male", "race": "Martian", "selected": "1"}], [], "line 2, field 'race'"),
        ([{"sex": "Male", "race": "White", "selected": "maybe"}], [], "line 2, field 'selected'"),
        ([{"sex": "Male", "race": "White", "score": "high"}], [], "line 2, field 'score'"),
        (
            [{"sex": "Male", "race": "Hispanic", "selected": "1", "eth": "no"}],
            ["--ethnicity", "eth"],
            "line 2, field 'eth'",
        ),
        ([{"sex": "Male", "race": "White", "picked": "1"}], [], "--selected COLUMN"),
        # every missing column named at once, each with the option that names it
        (
            [{"gender": "Male", "ethnic": "White", "x": "1"}],
            [],
            "no column 'sex' (name its column with --sex COLUMN); no column 'race' (name its "
            "column with --race COLUMN); name the outcome's column with --selected COLUMN",
        ),
        (
            [{"sex": "Male", "race": "Martian", "selected": "1"}],
            [],
            "map it with --label Martian=CATEGORY",
        ),
        (
            [{"sex": "Male", "race": "Pacific Isl", "selected": "1"}],
            [],
            "map it with --label 'Pacific Isl=CATEGORY'",
        ),
        (
            [{"sex": "Male", "race": "White", "selected": "1"}],
            ["--race", "ethnicity"],
            "no column 'ethnicity'",
        ),
        ([{"sex": "Male", "race": "White", "selected": "1"}], ["--label", "X"], "RAW=CATEGORY"),
        (
            [{"sex": "Male", "race": "White", "selected": "1"}],
            ["--label", "X=Martian"],
            "is none of",
        ),
        (
            [{"sex": "Male", "race": "White", "selected": "1"}],
            ["--distribution-date", "May"],
            "YYYY-MM-DD",
        ),
        ([{"sex": "Male", "race": "White", "selected": ""}], [], "no row has an outcome"),
    ],
)
def test_bad_input_exits_2_naming_where_and_writes_nothing(
    tmp_path: Path, rows: list[dict[str, object]], args: list[str], where: str
) -> None:
    data = _write(tmp_path / "bad.csv", rows)
    code, output = _run(data, *args, "--out", tmp_path / "out")
    assert code == 2 and where in output and "Traceback" not in output, output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("sex,race,selected\nMale,White,1,Smith\nFemale,Black,0\n",
         "line 2: 4 fields where the header has 3"),
        ("sex,race,selected\nMale,White,1\nFemale,Black,0\nFemale,Black\n",
         "line 4: 2 fields where the header has 3"),
    ],
)  # fmt: skip
def test_a_row_of_another_field_count_is_refused_whatever_its_line(
    tmp_path: Path, text: str, where: str
) -> None:
    """An unquoted comma in the first data row once made pandas read the first column
    as an index and every column shifted: the summary said nobody was selected."""
    data = tmp_path / "bad.csv"
    data.write_text(text * 1, encoding="utf-8")
    code, output = _run(data, "--out", tmp_path / "out")
    assert code == 2 and where in output, output
    assert not (tmp_path / "out").exists()


def _audit(tmp_path: Path, **fields: object) -> Path:
    from biasaudit.kinds.registry import run_spec
    from biasaudit.spec import parse_spec

    spec = parse_spec({"task": "resume-screening", "model": "sim/biased", "jobs": "software-engineer",
                       "names_per_group": 3, "runs_dir": str(tmp_path / "runs"), **fields})  # fmt: skip
    return run_spec(spec, command=["test"]).run_dir


@pytest.mark.parametrize(
    "fields",
    [
        {"rounds": 200, "bootstrap": 200, "gap_bootstrap": 40},
        {"method": "listwise", "pools": 12},
    ],
)
def test_an_audits_run_gives_its_impact_ratios_as_test_data(
    tmp_path: Path, fields: dict[str, object]
) -> None:
    run_dir = _audit(tmp_path, **fields)
    code, output = _run(run_dir, "--out", tmp_path / "s", "--k", "1")
    assert code == 0, output
    metrics = json.loads((run_dir / "metrics.json").read_text())
    table = pd.read_csv(tmp_path / "s" / "summary.csv")
    impact = [r for r in metrics["impact"] if r.get("k", 1) == 1]
    race = {r["value"]: r for r in impact if r["category"] == "race"}
    black = table[table["category"] == "Black or African American (Not Hispanic or Latino)"]
    assert black.iloc[0]["rate"] == pytest.approx(race["Black"]["rate"])
    assert black.iloc[0]["impact_ratio"] == pytest.approx(race["Black"]["ratio"])
    assert black.iloc[0]["rate_low"] == pytest.approx(race["Black"]["rate_ci"][0])
    group = {r["value"]: r for r in impact if r["category"] == "group"}
    b_m = table[table["category"] == "Black or African American (Not Hispanic or Latino), Male"]
    assert b_m.iloc[0]["impact_ratio"] == pytest.approx(group["B_M"]["ratio"])
    absent = table[table["category"].str.startswith("Two or More Races")]
    assert (absent["n"] == 0).all() and absent["rate"].isna().all()
    markdown = (tmp_path / "s" / "summary.md").read_text()
    assert "test data: an audit by biasaudit of sim/biased (a SIMULATED model)" in markdown
    assert "SIMULATED model" in markdown.splitlines()[0]
    unit = "Appearances in the answers" if fields.get("method") == "listwise" else "Candidates"
    assert f"| Category | {unit} |" in markdown
    # the run's own report: impact ratios under a heading of their own, in the contents
    from biasaudit.reports.html import write_report

    html = next(p for p in write_report(run_dir, "html") if p.suffix == ".html").read_text()
    assert '<a href="#impact">Impact ratios (four-fifths rule, Local Law 144)' in html
    assert '<section id="impact">' in html


def test_a_run_without_the_rules_categories_is_refused(tmp_path: Path) -> None:
    run_dir = _audit(tmp_path, rounds=100, bootstrap=200, gap_bootstrap=40)
    code, output = _run(run_dir, "--selected", "x", "--out", tmp_path / "s")
    assert code == 2 and "is a run directory" in output
    from biasaudit.kinds.registry import run_spec
    from biasaudit.spec import parse_spec

    spec = parse_spec({"task": "grade-score", "items": "demo", "model": "sim/biased",
                       "runs_dir": str(tmp_path / "runs")})  # fmt: skip
    grade = run_spec(spec, command=["test"]).run_dir
    code, output = _run(grade, "--out", tmp_path / "g")
    assert code == 2 and "is a grade-score run" in output


def test_a_pointwise_audit_gives_scoring_rates_over_names_and_resumes(tmp_path: Path) -> None:
    run_dir = _audit(tmp_path, rounds=100, bootstrap=200, gap_bootstrap=40)
    code, output = _run(run_dir, "--scoring", "--out", tmp_path / "s")
    assert code == 0, output
    table = pd.read_csv(tmp_path / "s" / "summary.csv")
    scores = pd.read_csv(run_dir / "scores.csv")
    above = scores["score"] > scores["score"].median()
    b_m = table[table["category"] == "Black or African American (Not Hispanic or Latino), Male"]
    assert b_m.iloc[0]["above_median"] == int(above[scores["group"] == "B_M"].sum())
    assert b_m.iloc[0]["rate_low"] < b_m.iloc[0]["rate"] < b_m.iloc[0]["rate_high"]
    assert (
        "scoring rates are the shares of candidates scoring above the median"
        in (tmp_path / "s" / "summary.md").read_text()
    )
    # the same scores imported (groups coded as the built-in names): the same summary
    scores.rename(columns={"candidate_id": "candidate", "resume_id": "item"})[
        ["candidate", "group", "score", "subtask", "name", "item", "qualified"]
    ].to_csv(tmp_path / "imported.csv", index=False)
    imported = CliRunner().invoke(
        cli, ["score", "allocation", str(tmp_path / "imported.csv"), "--rounds", "100",
              "--no-report", "--runs-dir", str(tmp_path / "imports")],
    )  # fmt: skip
    assert imported.exit_code == 0, imported.output
    import_dir = next((tmp_path / "imports").iterdir())
    code, output = _run(import_dir, "--scoring", "--out", tmp_path / "i")
    assert code == 0, output
    again = pd.read_csv(tmp_path / "i" / "summary.csv")
    assert again[["category", "n", "rate", "rate_low", "impact_ratio"]].equals(
        table[["category", "n", "rate", "rate_low", "impact_ratio"]]
    )
    code, output = _run(import_dir, "--out", tmp_path / "i2")
    assert code == 2 and "--scoring" in output  # its impact ratios are per group only
    listwise = _audit(tmp_path / "l", method="listwise", pools=8)
    code, output = _run(listwise, "--scoring", "--out", tmp_path / "l2")
    assert code == 2 and "pointwise audit" in output


# Bloomberg's published table (Yin, Alba & Nicoletti, "OpenAI's GPT is a recruiter's dream
# tool. Tests show there's racial bias", Bloomberg, 2024): GPT-3.5 ranking 1,000 pools of
# eight resumes for an HR specialist, how often each group's name came first. Its stored
# rankings, converted outside the project (one row per name shown, the rank the order of
# first mention), give every rate and ratio of the table through `score listwise` and
# `ll144` (all 64 rows of both models and four jobs, checked 2026-11-27); here, rankings
# with the same first places stand in for them.
BLOOMBERG_HR_GPT35 = {
    "H_F": 181, "A_F": 148, "W_F": 138, "B_F": 130, "B_M": 106, "H_M": 103, "A_M": 98, "W_M": 96,
}  # fmt: skip
_RACES = {"H": "Hispanic", "A": "Asian", "W": "White", "B": "Black"}


def test_bloombergs_published_table_through_an_import_and_the_summary(tmp_path: Path) -> None:
    import random

    draw = random.Random(2024)
    winners = [g for g, count in BLOOMBERG_HR_GPT35.items() for _ in range(count)]
    draw.shuffle(winners)
    rows = []
    for pool, winner in enumerate(winners):
        shown = list(BLOOMBERG_HR_GPT35)
        draw.shuffle(shown)
        others = [g for g in shown if g != winner]
        draw.shuffle(others)
        ranks = {winner: 1, **{g: i + 2 for i, g in enumerate(others)}}
        for slot, group in enumerate(shown, start=1):
            rows.append({"pool": f"p{pool}", "order": 1, "slot": slot,
                         "candidate": f"p{pool}-{group}", "group": group,
                         "rank": ranks[group], "race": _RACES[group[0]],
                         "sex": "female" if group.endswith("F") else "male"})  # fmt: skip
    data = _write(tmp_path / "rankings.csv", rows)
    imported = CliRunner().invoke(
        cli,
        [
            "score",
            "listwise",
            str(data),
            "--bootstrap",
            "100",
            "--no-report",
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
    )
    assert imported.exit_code == 0, imported.output
    run_dir = next((tmp_path / "runs").iterdir())
    code, output = _run(run_dir, "--k", "1", "--out", tmp_path / "s")
    assert code == 0, output
    table = pd.read_csv(tmp_path / "s" / "summary.csv").set_index("category")
    for group, count in BLOOMBERG_HR_GPT35.items():
        race = {"H": "Hispanic or Latino", "A": "Asian (Not Hispanic or Latino)",
                "W": "White (Not Hispanic or Latino)",
                "B": "Black or African American (Not Hispanic or Latino)"}[group[0]]  # fmt: skip
        row = table.loc[f"{race}, {'Female' if group.endswith('F') else 'Male'}"]
        assert row["rate"] == pytest.approx(count / 1000)
        assert row["impact_ratio"] == pytest.approx(count / 181)  # 0.530 for White men
    markdown = (tmp_path / "s" / "summary.md").read_text()
    assert "outputs of imported produced elsewhere, imported with biasaudit score" in markdown


def test_unusable_paths_exit_2_with_what_to_do(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    code, output = _run(EXAMPLE, "--out", a_file / "summary")
    assert code == 2 and "give --out a folder that may be written" in output
    code, output = _run(tmp_path / "missing.csv")
    assert code == 2 and "cannot read outcomes file" in output
    code, output = _run(tmp_path)
    assert code == 2 and "is a folder but not a run directory (no manifest.json)" in output
    assert (
        "employer's outcomes CSV file or the run directory of an allocation or listwise" in output
    )


def test_a_summary_without_the_tool_or_its_source_warns_before_it_is_published(
    tmp_path: Path,
) -> None:
    data = _write(tmp_path / "outcomes.csv",
                  [{"sex": s, "race": "White", "selected": str(i % 2)}
                   for i, s in enumerate(["Male", "Female"] * 5)])  # fmt: skip
    result = CliRunner().invoke(cli, ["ll144", str(data), "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    assert ("warning: the summary does not name the tool audited (--tool) nor where the data "
            "came from (--source)") in result.stderr  # fmt: skip
    named = CliRunner().invoke(cli, ["ll144", str(data), "--out", str(tmp_path / "b"), "--tool",
                                     "Screener", "--source", "synthetic"])  # fmt: skip
    assert named.exit_code == 0 and "warning" not in named.stderr
