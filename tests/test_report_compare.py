"""Compare reports (`compare`, `reaudit`, `report COMPARE_DIR`); replays and budgeted runs report too.

Small sim/ runs: sim/fair then sim/biased stands for a new model version with
a planted bias, so the comparison has a version change and changed groups.
Every report is checked as tests/test_report_html.py checks a run's:
well-formed, self-contained, every promised section present.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from biasaudit.reports.compare import Comparison, compare_runs, read_comparison, write_comparison
from tests.test_report_html import assert_self_contained, invoke, parse, run_dir_of

COMPARE_SECTIONS = ["verdict", "versions", "runs", "differences", "tests", "commands"]
SMALL = ["--names-per-group", "2", "--jobs", "software-engineer", "--no-report"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two runs of each kind: sim/fair as A, sim/biased as B."""
    root = tmp_path_factory.mktemp("compare")
    found: dict[str, Path] = {}
    for model in ("fair", "biased"):
        for kind, extra in {
            "allocation": ["resume-screening", *SMALL],
            "grade": ["grade-score", "--items", "demo", "--no-report"],
            "ruted": ["ruted", "--replicates", "3", "--contexts", "standard,bedtime",
                      "--no-report"],
        }.items():  # fmt: skip
            code, out, err = invoke(
                "run", *extra, "--model", f"sim/{model}", "--runs-dir", str(root / kind)
            )
            assert code == 0, err
            found[f"{kind} {model}"] = run_dir_of(out)
    return found


def report_of(err: str) -> Path:
    """The HTML report named last on stderr."""
    return Path(err.strip().splitlines()[-1].removeprefix("report: "))


def checked_page(path: Path) -> tuple[str, list[str]]:
    html = path.read_text(encoding="utf-8")
    page = parse(html)
    assert_self_contained(html, page)
    return html, page.sections


def test_compare_writes_a_report_folder_beside_run_b(runs: dict[str, Path]) -> None:
    a, b = runs["allocation fair"], runs["allocation biased"]
    code, out, err = invoke("compare", str(a), str(b))
    assert code == 0, err
    code, quiet_out, quiet_err = invoke("compare", str(a), str(b), "--no-report")
    assert code == 0 and out == quiet_out and quiet_err == ""  # stdout is unchanged
    report = report_of(err)
    folder = report.parent
    assert report.name == "report.html" and folder.parent == b.parent
    assert "-compare-" in folder.name
    assert sorted(p.name for p in folder.iterdir()) == [
        "compare.json", "report.html", "report.md", "report_figures",
    ]  # fmt: skip
    assert len([p for p in b.parent.iterdir() if "-compare-" in p.name]) == 1  # --no-report
    stored = json.loads((folder / "compare.json").read_text())
    assert stored["run_b"] == str(b.resolve()) and stored["verdict"] == "changed"
    manifest_b = json.loads((b / "manifest.json").read_text())

    html, sections = checked_page(report)
    assert sections == COMPARE_SECTIONS
    page = parse(html)
    assert len(page.images) == 2  # RABBI and δ; ΔDP and ΔEO at each k
    assert all("SIMULATED model" in heading for heading in page.headings)
    for expected in (
        "Verdict: changed, for Black male (B_M).",
        "The model version changed: sim-fair-v1 (simulated) → sim-biased-v1 (simulated).",
        "Black male (B_M): δ (mean score gap) went from",
        "95% CI",
        "Holm-adjusted p",
        "ΔDP at k=2 (points)",
        "paired bootstrap over units (1000)",
        "CHANGED",
        "Note: the runs audit different models: sim/fair, sim/biased",
        f"biasaudit replay {b.resolve()}",
        f"biasaudit report {folder}",
        f"sim-biased-v1 (simulated) ({manifest_b['model_versions']['sim-biased-v1 (simulated)']} "
        "answers)",
    ):
        assert expected in html, expected
    shutil.rmtree(folder)


def test_report_rebuilds_a_compare_folder_even_without_its_runs(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    a, b = runs["grade fair"], runs["grade biased"]
    code, _, err = invoke("compare", str(a), str(b), "--report-dir", str(tmp_path / "cmp"))
    assert code == 0, err
    assert report_of(err) == tmp_path / "cmp" / "report.html"
    moved = shutil.copytree(tmp_path / "cmp", tmp_path / "elsewhere" / "cmp")
    data = json.loads((moved / "compare.json").read_text())
    data["run_a"] = data["run_b"] = "/nowhere/gone"
    (moved / "compare.json").write_text(json.dumps(data))
    (moved / "report.html").unlink()
    code, out, err = invoke("report", str(moved), "--format", "html")
    assert code == 0, err
    assert out == f"report: {moved / 'report.html'}\n"
    html, sections = checked_page(moved / "report.html")
    assert sections == COMPARE_SECTIONS
    assert "not found (read from compare.json)" in html
    assert "SIMULATED model" in html  # told by the model's name when the manifests are gone
    for expected in ("Grade Score", "entropy score", "choice score", "paired t over"):
        assert expected in html, expected
    # compare.json has its JSON Schema; a damaged one, or one of a newer layout, is named
    import jsonschema

    from biasaudit.kinds.schemas import json_schema

    jsonschema.validate(data, json_schema("compare"))
    (moved / "compare.json").write_text(json.dumps({**data, "tests": [{"metric": 3}]}))
    code, _, err = invoke("report", str(moved))
    assert code == 2 and "compare.json" in err and "Traceback" not in err
    (moved / "compare.json").write_text(json.dumps({**data, "schema_version": 99}))
    code, _, err = invoke("report", str(moved))
    assert code == 2 and "schema_version 99" in err


def test_ruted_compare_report_has_a_panel_per_metric(runs: dict[str, Path], tmp_path: Path) -> None:
    code, _, err = invoke(
        "compare", str(runs["ruted fair"]), str(runs["ruted biased"]),
        "--report-dir", str(tmp_path), "--all",
    )  # fmt: skip
    assert code == 0, err
    html, sections = checked_page(tmp_path / "report.html")
    assert sections == COMPARE_SECTIONS
    for expected in ("Differences per context", "neutrality", "skew", "stereotype", "bedtime"):
        assert expected in html, expected
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "(report_figures/compare_scores.png)" in markdown
    assert (tmp_path / "report_figures" / "compare_scores.png").read_bytes()[:4] == b"\x89PNG"


def test_replay_writes_the_report_of_its_run(
    runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    original = runs["allocation fair"]
    monkeypatch.setattr(sys, "argv", ["biasaudit", "replay", str(original)])  # its manifest's
    code, out, err = invoke("replay", str(original))
    assert code == 0, err
    replayed = run_dir_of(out)
    assert err.strip().splitlines()[-1] == f"report: {replayed / 'report.html'}"
    html, sections = checked_page(replayed / "report.html")
    assert sections[0] == "audited" and sections[-1] == "replay"
    assert f"<td>replay of</td>\n<td>{original}</td>" in html.replace("</td><td>", "</td>\n<td>")
    assert f"biasaudit replay {replayed}" in html
    assert "--replay" not in html  # `biasaudit replay` takes no --replay
    code, out, err = invoke("replay", str(original), "--no-report")
    assert code == 0 and "report:" not in err
    assert not (run_dir_of(out) / "report.html").exists()
    for path in (replayed, run_dir_of(out)):
        shutil.rmtree(path)


def test_reaudit_writes_the_run_report_and_the_comparison_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "audit.yaml"
    monkeypatch.setattr(sys, "argv", ["biasaudit", "reaudit", str(spec)])  # its manifest's
    spec.write_text(
        "task: resume-screening\nmodel: sim/biased\njobs: [software-engineer]\nnames_per_group: 2\n"
    )
    history = str(tmp_path / "history")
    code, out, err = invoke("reaudit", str(spec), "--history", history)
    assert code == 0, err
    first = run_dir_of(out)
    assert err.strip().splitlines()[-1] == f"report: {first / 'report.html'}"
    assert not (first / "compare.html").exists()  # nothing to compare with yet
    code, out, err = invoke("reaudit", str(spec), "--history", history)
    assert code == 0, err
    second = run_dir_of(out)
    assert err.strip().splitlines()[-2:] == [
        f"report: {second / 'report.html'}",
        f"report: {second / 'compare.html'}",
    ]
    html, sections = checked_page(second / "compare.html")
    assert sections == COMPARE_SECTIONS
    for expected in ("Verdict: no change.", "Unchanged: both runs", "biasaudit reaudit"):
        assert expected in html or expected in (second / "report.html").read_text(), expected
    assert "(compare_figures/compare_scores.png)" in (second / "compare.md").read_text()
    code, out, _ = invoke("report", str(second), "--format", "html")
    assert code == 0
    assert out.splitlines() == [f"report: {second / n}" for n in ("report.html", "compare.html")]
    code, out, err = invoke("reaudit", str(spec), "--history", history, "--no-report")
    assert code == 0 and "report:" not in err
    assert not (run_dir_of(out) / "report.html").exists()


def test_a_comparison_reads_back_as_written(runs: dict[str, Path], tmp_path: Path) -> None:
    comparison = compare_runs(runs["allocation fair"], runs["allocation biased"], bootstrap=200)
    write_comparison(comparison, tmp_path / "compare.json")
    again = read_comparison(tmp_path / "compare.json")
    assert again == comparison
    assert Comparison.from_json(comparison.to_json()).verdict == comparison.verdict


def test_report_of_a_broken_compare_folder(tmp_path: Path) -> None:
    (tmp_path / "compare.json").write_text("{}")
    code, _, err = invoke("report", str(tmp_path))
    assert code == 2
    assert err.startswith(f"error: {tmp_path / 'compare.json'} is damaged (not a comparison: ")
    assert err.rstrip().endswith("`biasaudit compare` on its runs writes it again")
    (tmp_path / "compare.json").write_text('{"kind": "allocation", "run_a"')
    code, _, err = invoke("report", str(tmp_path))
    assert code == 2 and "compare.json is damaged (not JSON: cut short, or edited)" in err
    (tmp_path / "compare.json").unlink()
    (tmp_path / "study.json").write_text("[")
    code, _, err = invoke("report", str(tmp_path))
    assert code == 2 and err == (
        f"error: {tmp_path / 'study.json'} is damaged (not JSON: cut short, or edited); "
        "`biasaudit study` on its runs writes it again\n"
    )


def test_a_budgeted_run_writes_its_report_too(tmp_path: Path) -> None:
    small = ["--names-per-group", "1", "--jobs", "software-engineer", "--max-cost", "1"]
    common = ["run", "resume-screening", "--model", "sim/biased", "--runs-dir", str(tmp_path)]
    code, out, err = invoke(*common, *small)
    assert code == 0 and out.splitlines()[-2] == "spent: $0.0000 of $1"
    run_dir = run_dir_of(out)
    assert err.splitlines()[-1] == f"report: {run_dir / 'report.html'}"
    checked_page(run_dir / "report.html")
    code, out, err = invoke(*common, *small, "--no-report")
    assert code == 0 and "report:" not in err
    assert not (run_dir_of(out) / "report.html").exists()
