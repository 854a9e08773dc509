"""``evidence.html``: the answers behind an allocation run's figures, one self-contained
page linked from the report; untrusted text stays text. (tests/test_evidence_browser.py drives
it in Chromium.)"""

from __future__ import annotations

import csv
from pathlib import Path

from biasaudit.reports.evidence import read_page_data
from tests.test_cli_audit import SPEC, STATEMENTS, invoke, run_dir_of

PAYLOAD = '</script><script>alert("x")</script><img src=x onerror=alert(1)>{{SIMULATED}}'


def test_the_report_links_the_evidence_of_every_candidate_and_each_flagged_group(
    tmp_path: Path,
) -> None:
    code, out, err = invoke(
        "run", "resume-screening", "--model", "sim/biased", "--jobs", "software-engineer",
        "--names-per-group", "10", "--runs-dir", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    run_dir = run_dir_of(out)
    html = (run_dir / "report.html").read_text()
    assert 'href="evidence.html#view=candidates"' in html
    assert 'href="evidence.html#view=pairs&amp;group=B_M"' in html  # flagged beyond noise
    # an impact ratio of a race or a sex links to its candidates, who carry its value
    assert 'href="evidence.html#view=candidates&amp;race=Black">Black</a>' in html
    data = read_page_data(run_dir / "evidence.html")
    views = {view["id"]: view["rows"] for view in data["views"]}
    assert len(views["candidates"]) == 10 * 8 * 6 and data["prompts_verified"]
    pairs = [p for p in views["pairs"] if p["group"] == "B_M"]
    assert len(pairs) == 6 and all(p["gap"] < 0 for p in pairs)  # the planted bias, per resume
    assert {(c["group"], c["race"], c["sex"]) for c in views["candidates"]} >= {
        ("B_M", "Black", "male"), ("W_F", "White", "female")}  # fmt: skip
    first = views["candidates"][0]
    assert f"Name: {first['name']}" in first["prompt"] and first["answer"] in ("Yes", "No")


def test_untrusted_text_stays_text(tmp_path: Path) -> None:
    """A name holding a script, markup and the page's own placeholder: the page's data
    carry it whole and nothing of it reaches the markup."""
    with open(tmp_path / "applicants.csv", "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["id", "group", "name", "statement", "score"])
        for number, group in enumerate(("W_M", "B_M")):
            for index, (statement, score) in enumerate(STATEMENTS):
                name = PAYLOAD if (number, index) == (1, 0) else f"{group} person {index}"
                writer.writerow([f"a{number}{index}", group, name, statement, score])
    (tmp_path / "spec.yaml").write_text(SPEC.format(model="sim/biased"))
    code, out, err = invoke("run", str(tmp_path / "spec.yaml"))
    assert code == 0, err
    page = (run_dir_of(out) / "evidence.html").read_text()
    assert page.count("</script>") == 2 and "<img" not in page and "alert(" not in page
    assert page.count('<p class="sim">') == 1  # the placeholder in the data stayed text
    data = read_page_data(run_dir_of(out) / "evidence.html")
    assert PAYLOAD in {row["name"] for row in data["views"][0]["rows"]}


def test_a_damaged_page_is_named_when_its_data_are_read(tmp_path: Path) -> None:
    import pytest

    from biasaudit.errors import UsageError

    page = tmp_path / "evidence.html"
    page.write_text('<script type="application/octet-stream" id="data">H4sIAAAA</script>')
    with pytest.raises(UsageError, match="not an evidence page that can be read"):
        read_page_data(page)
    page.write_text("<html></html>")
    with pytest.raises(UsageError, match="no data in it"):
        read_page_data(page)


def test_a_linked_cell_stays_its_text_in_html_and_markdown() -> None:
    """A label holding markup, brackets or a pipe, linked to its evidence: the HTML
    escapes it, the Markdown link keeps it whole and the table's columns as they are."""
    from biasaudit.render.document import Document, Section, Table, to_html, to_markdown

    label = "<b>x</b> [a] | b"
    table = Table(["group", "n"], [[label, "3"]], links={(0, 0): "evidence.html#view=x"})
    document = Document("t", "s", False, [Section("S", "s", [table])])
    page = to_html(document)
    assert '<a href="evidence.html#view=x">&lt;b&gt;x&lt;/b&gt; [a] | b</a>' in page
    markdown = to_markdown(document, figure_dir="")
    assert r"| [<b>x</b> \[a\] \| b](<evidence.html#view=x>) | 3 |" in markdown
