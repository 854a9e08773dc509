"""Every kind writes an evidence page with its report, and every link the report gives
into it opens a view it has, filtered by columns that view has, to the rows behind the
figure: decisions' persons of a score beyond noise, RUTEd's texts with their gendered
words marked, listwise's pools as shown, Grade Score's trials in every order, a
pairwise run's comparisons in both orders."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from biasaudit.reports.evidence import read_page_data
from biasaudit.textfiles import EXAMPLES_DIR
from tests.test_cli_audit import invoke, run_dir_of

RUNS = {
    "listwise": ("resume-screening", "--method", "listwise", "--names-per-group", "3",
                 "--jobs", "software-engineer"),
    "pairwise": ("resume-screening", "--method", "pairwise", "--names-per-group", "3",
                 "--jobs", "software-engineer"),
    "decisions": ("decisions", "--scenario-limit", "6"),
    "grade-score": ("grade-score", "--items", "demo"),
    "ruted": ("ruted", "--contexts", "standard,bedtime", "--replicates", "2"),
}  # fmt: skip
VIEWS = {
    "listwise": {"shown", "answers"},
    "pairwise": {"candidates", "pairs", "comparisons"},
    "decisions": {"persons", "scenarios"},
    "grade-score": {"trials", "items"},
    "ruted": {"occupations", "texts"},
}


def page_data(run_dir: Path) -> dict:
    return read_page_data(run_dir / "evidence.html")


def shown(value: object) -> str:
    """A cell as the page's script shows it (and filters it): a whole number without its
    decimals, another number to four places."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return str(int(value)) if float(value).is_integer() else f"{value:.4f}"
    return str(value)


def report_links(run_dir: Path) -> list[str]:
    text = (run_dir / "report.html").read_text()
    return [html.unescape(h) for h in re.findall(r'href="(evidence\.html#[^"]*)"', text)]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_kind_writes_its_evidence_and_links_into_it(name: str, tmp_path: Path) -> None:
    code, out, err = invoke("run", *RUNS[name], "--model", "sim/biased",
                            "--runs-dir", str(tmp_path))  # fmt: skip
    assert code == 0, err
    run_dir = run_dir_of(out)
    data = page_data(run_dir)
    views = {view["id"]: view for view in data["views"]}
    assert set(views) == VIEWS[name] and data["prompts_verified"]
    assert all(view["rows"] for view in views.values())
    links = report_links(run_dir)
    assert links
    # the figures' own rows link to their units: a table cell of the report, not a list
    assert '<td><a href="evidence.html#' in (run_dir / "report.html").read_text()
    for address in links:
        query = dict(parse_qsl(urlsplit(address).fragment))
        view = views[query.pop("view")]
        columns = {key for key, _ in view["columns"]}
        query.pop("down", None)
        assert query.pop("sort", next(iter(columns))) in columns, address
        filters = query
        assert filters.keys() <= columns, address  # every filter names a column
        assert any(all(shown(row.get(k)) == v for k, v in filters.items())
                   for row in view["rows"]), address  # fmt: skip
    # the reference page names every view and every column it always has
    reference = (Path(__file__).parent.parent / "docs" / "reference" / "evidence.md").read_text()
    for view in views.values():
        assert f"| `{view['id']}` |" in reference, view["id"]
        if view["id"] not in ("scenarios", "items", "occupations"):  # the data's own columns
            row = [line for line in reference.splitlines()
                   if line.startswith(f"| `{view['id']}` |")][-1]  # fmt: skip
            assert all(f"`{key}`" in row for key, _ in view["columns"]), view["id"]
    with_prompts = [v for v in views.values() if "prompt" in {k for k, _ in v["columns"]}]
    assert any(row["prompt"] for view in with_prompts for row in view["rows"])


def test_a_decisions_score_beyond_noise_links_to_its_persons_and_scenarios(
    tmp_path: Path,
) -> None:
    code, out, err = invoke("run", "decisions", "--model", "sim/biased", "--runs-dir",
                            str(tmp_path))  # fmt: skip
    assert code == 0, err
    run_dir = run_dir_of(out)
    links = report_links(run_dir)
    # sim/biased plants a race effect against Black persons described explicitly
    assert "evidence.html#view=persons&fill=explicit&race=black" in links
    assert "evidence.html#view=scenarios&fill=explicit&sort=black" in links
    html_text = (run_dir / "report.html").read_text()
    cell = '<td><a href="evidence.html#view=persons&amp;fill=explicit&amp;race=black">race: black'
    assert cell in html_text  # the score's own row in the table
    persons = page_data(run_dir)["views"][0]["rows"]
    black = [p for p in persons if p["fill"] == "explicit" and p["race"] == "black"]
    white = [p for p in persons if p["fill"] == "explicit" and p["race"] == "white"]
    assert black and sum(p["p_yes"] for p in black) / len(black) < sum(
        p["p_yes"] for p in white) / len(white)  # fmt: skip
    assert all(p["p_yes-first"] is not None and p["p_no-first"] is not None for p in black)


RULE_COLUMNS = {"sex": "sex", "race/ethnicity": "race", "intersectional": "intersectional"}
"""The evidence page's column of each dimension of an LL144 summary."""


def _summary(out: Path) -> tuple[dict, list[dict], set[str]]:
    """An LL144 summary's JSON, its evidence page's rows and the summary's links into them."""
    summary = json.loads((out / "summary.json").read_text())
    text = html.unescape((out / "summary.html").read_text())
    links = set(re.findall(r'href="(evidence\.html#[^"]*)"', text))
    return summary, page_data(out)["views"][0]["rows"], links


@pytest.mark.parametrize("outcome", ["selected", "score"])
def test_an_ll144_summary_links_each_category_to_exactly_the_rows_behind_its_rate(
    outcome: str, tmp_path: Path
) -> None:
    """An employer's file: every category of the summary links to the file's rows of
    that category, and they are the summary's n and its count (selected, or scored
    above the median); the rows left out are listed with why."""
    source = EXAMPLES_DIR / "ll144-outcomes.csv"
    data = source
    if outcome == "score":  # the same people, scored: selected ones high
        import csv

        with open(source, newline="") as handle:
            rows = list(csv.DictReader(handle))
        data = tmp_path / "scores.csv"
        with open(data, "w", newline="") as handle:
            writer = csv.DictWriter(handle, [*rows[0].keys(), "score"])
            writer.writeheader()
            for i, row in enumerate(rows):
                chosen = row["selected"]
                row["score"] = "" if chosen == "" else str(i % 7 + (10 if chosen == "1" else 0))
                writer.writerow(row)
    args = ["ll144", str(data), "--out", str(tmp_path / "out")]
    if outcome == "score":
        args += ["--score", "score"]
    code, out, err = invoke(*args)
    assert code == 0, err
    assert f"evidence: {tmp_path / 'out' / 'evidence.html'}" in out
    summary, rows, links = _summary(tmp_path / "out")
    for category in summary["categories"]:
        key = RULE_COLUMNS[category["dimension"]]
        address = "evidence.html#" + urlencode({"view": "rows", key: category["category"]})
        assert address in links, address
        behind = [r for r in rows if r[key] == category["category"] and not r["flags"]]
        assert len(behind) == category["n"]
        counted = category["selected" if outcome == "selected" else "above_median"]
        assert sum(r["counted"] == "yes" for r in behind) == counted
    reference = (Path(__file__).parent.parent / "docs" / "reference" / "evidence.md").read_text()
    # the last line of that name: the table of the views (the first names a view's key)
    row = [line for line in reference.splitlines() if line.startswith("| `rows` |")][-1]
    assert all(f"`{key}`" in row for key in rows[0])  # the reference names every column
    left_out = [r for r in rows if r["flags"]]
    assert len(left_out) == summary["source"]["left_out"] and all(r["line"] > 1 for r in left_out)


def test_an_ll144_summary_of_a_run_links_each_category_to_its_candidates(tmp_path: Path) -> None:
    code, out, err = invoke("run", "resume-screening", "--model", "sim/biased", "--jobs",
                            "software-engineer", "--names-per-group", "8", "--runs-dir",
                            str(tmp_path / "runs"), "--no-report")  # fmt: skip
    assert code == 0, err
    code, out, err = invoke("ll144", str(run_dir_of(out)), "--out", str(tmp_path / "out"),
                            "--tool", "Screener", "--source", "an audit")  # fmt: skip
    assert code == 0, err
    summary, rows, links = _summary(tmp_path / "out")
    for category in summary["categories"]:
        if not category["n"]:
            continue  # a category the audit's names do not hold
        key = RULE_COLUMNS[category["dimension"]]
        assert (
            "evidence.html#" + urlencode({"view": "candidates", key: category["category"]}) in links
        )
        assert sum(r[key] == category["category"] for r in rows) == category["n"]
