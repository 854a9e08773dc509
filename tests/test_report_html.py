"""`biasaudit report` and the reports `run` and `study` write: well-formed, self-contained, complete.

Small sim/ runs of each kind (allocation pointwise and pairwise, Grade Score,
RUTEd) and a study of each; the HTML is parsed with html.parser and checked
for balanced tags, for no resource outside a ``data:`` URI, and for every
section the report promises. No browser is needed (scripts/render_report.py
renders one in Chromium by hand).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli

VOID = {"meta", "img", "br", "hr", "link", "input", "source", "col", "wbr"}
DATA_URI = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+")


@dataclass
class Page:
    """What the parser saw: tag errors, section ids, h2 texts, image sources, links."""

    errors: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    attributes: list[tuple[str, str]] = field(default_factory=list)
    tags: set[str] = field(default_factory=set)


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self.stack: list[str] = []
        self._in_h2 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.page.tags.add(tag)
        values = {name: value or "" for name, value in attrs}
        self.page.attributes += list(values.items())
        if tag == "section":
            self.page.sections.append(values.get("id", ""))
        if tag == "img":
            self.page.images.append(values.get("src", ""))
        if tag == "h2":
            self._in_h2 = True
            self.page.headings.append("")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self._in_h2 = False
        if not self.stack or self.stack[-1] != tag:
            self.page.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self._in_h2:
            self.page.headings[-1] += data


def parse(html: str) -> Page:
    checker = _Checker()
    checker.feed(html)
    checker.close()
    page = checker.page
    page.errors += [f"<{tag}> never closed" for tag in checker.stack]
    return page


def assert_self_contained(html: str, page: Page) -> None:
    assert html.startswith("<!DOCTYPE html>")
    assert page.errors == []
    assert page.images and all(src.startswith("data:image/png;base64,") for src in page.images)
    outside = DATA_URI.sub("", html)
    for needle in ("http://", "https://", "<script", "<link", "<iframe", "@import", "url("):
        assert needle not in outside, needle
    for name, value in page.attributes:
        if name in ("src", "href", "action", "srcset", "poster"):
            # or the run's evidence page, written beside the report
            assert value.startswith(("data:", "#", "evidence.html#")), (name, value[:60])
            assert "//" not in DATA_URI.sub("", value), (name, value[:60])


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def run_dir_of(out: str) -> Path:
    return Path(out.strip().splitlines()[-1].removeprefix("run: "))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One small run of each kind; the first allocation run writes its report as `run` does."""
    root = tmp_path_factory.mktemp("reports")
    small = ["--runs-dir", str(root), "--names-per-group", "2", "--jobs", "software-engineer"]
    found: dict[str, Path] = {}
    code, out, err = invoke("run", "resume-screening", "--model", "sim/biased", *small)
    assert code == 0, err
    found["allocation"] = run_dir_of(out)
    found["allocation_err"] = Path(err.strip().splitlines()[-1])  # "report: <path>" on stderr
    for name, extra in {
        "allocation_fair": ["--model", "sim/fair", *small],
        "pairwise": ["--model", "sim/biased", "--method", "pairwise", "--pools", "2", *small],
    }.items():
        code, out, err = invoke("run", "resume-screening", *extra, "--no-report")
        assert code == 0, err
        found[name] = run_dir_of(out)
    code, out, err = invoke(
        "run", "grade-score", "--items", "demo", "--model", "sim/biased", "--runs-dir", str(root),
        "--no-report",
    )  # fmt: skip
    assert code == 0, err
    found["grade"] = run_dir_of(out)
    for model in ("sim/biased", "sim/fair"):
        code, out, err = invoke(
            "run", "ruted", "--model", model, "--replicates", "3", "--contexts",
            "standard,bedtime", "--runs-dir", str(root), "--no-report",
        )  # fmt: skip
        assert code == 0, err
        found[f"ruted {model}"] = run_dir_of(out)
    return found


ALLOCATION_SECTIONS = [
    "audited", "headline", "groups", "selection", "impact", "scores", "irregular", "evidence",
    "replay",
]  # fmt: skip


def test_run_writes_its_report_and_keeps_its_output(runs: dict[str, Path]) -> None:
    run_dir = runs["allocation"]
    assert str(runs["allocation_err"]) == f"report: {run_dir / 'report.html'}"
    assert (run_dir / "report.md").is_file()
    assert sorted(p.name for p in (run_dir / "report_figures").iterdir()) == [
        "groups.png", "scores.png", "selection.png",
    ]  # fmt: skip
    assert not (runs["allocation_fair"] / "report.html").exists()  # --no-report


def test_allocation_report_is_self_contained_and_complete(runs: dict[str, Path]) -> None:
    run_dir = runs["allocation"]
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    page = parse(html)
    assert_self_contained(html, page)
    assert page.sections == ALLOCATION_SECTIONS
    assert len(page.images) == 3
    assert all("SIMULATED model" in heading for heading in page.headings)
    assert re.search(
        r"B_M: Black male candidates were selected \d+\.\d points less often than White male "
        r"candidates at k=1 \(95% CI -\d+\.\d to [-+]\d+\.\d points",
        html,
    )
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for expected in (
        "sim-biased-v1 (simulated)", "built-in offline simulator", "first-token logprobs",
        "[path: logprobs]", "names per group: 2", f"biasaudit {manifest['tool_version']}",
        "Selection rate: share of a group", "ΔDP: selection rate minus W_M", "ΔEO",
        "RABBI [CI]", "Impact ratios (four-fifths rule, Local Law 144)", "Smoke test",
        "too few names to say", "irregular", "--replay",
        f"biasaudit report {run_dir}", manifest["started_at"][:19],
    ):  # fmt: skip
        assert expected in html, expected


def test_pairwise_report_has_the_output_statistics(runs: dict[str, Path]) -> None:
    code, out, err = invoke("report", str(runs["pairwise"]), "--format", "html")
    assert code == 0, err
    assert out == f"report: {runs['pairwise'] / 'report.html'}\n"
    assert not (runs["pairwise"] / "report.md").exists()
    html = (runs["pairwise"] / "report.html").read_text(encoding="utf-8")
    page = parse(html)
    assert_self_contained(html, page)
    assert page.sections == [
        *ALLOCATION_SECTIONS[:5],
        "scores",
        "pairwise",
        *ALLOCATION_SECTIONS[6:],
    ]
    for expected in (
        "flipped with the order",
        "regular answers",
        "pools compared",
        "[path: pairwise]",
    ):
        assert expected in html, expected


def test_grade_score_report(runs: dict[str, Path]) -> None:
    code, out, err = invoke("report", str(runs["grade"]))
    assert code == 0, err
    assert out.splitlines() == [
        f"report: {runs['grade'] / n}" for n in ("report.html", "report.md")
    ]
    html = (runs["grade"] / "report.html").read_text(encoding="utf-8")
    page = parse(html)
    assert_self_contained(html, page)
    assert page.sections == [
        "audited",
        "headline",
        "scores",
        "positions",
        "items",
        "unparsed",
        "evidence",
        "replay",
    ]
    assert all("SIMULATED model" in heading for heading in page.headings)
    for expected in ("Grade Score", "entropy score", "choice score", "Slot 1 was chosen in",
                     "no position bias", "sky-blue", "answers per slot", "95% interval"):  # fmt: skip
        assert expected in html, expected
    markdown = (runs["grade"] / "report.md").read_text(encoding="utf-8")
    assert "![Position histogram" in markdown and "(report_figures/positions.png)" in markdown
    assert (runs["grade"] / "report_figures" / "positions.png").read_bytes()[:4] == b"\x89PNG"


def test_ruted_report(runs: dict[str, Path]) -> None:
    run_dir = runs["ruted sim/biased"]
    code, _, err = invoke("report", str(run_dir), "--format", "html")
    assert code == 0, err
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    page = parse(html)
    assert_self_contained(html, page)
    assert page.sections == [
        "audited", "headline", "metrics", "occupations", "dropped", "evidence", "replay",
    ]  # fmt: skip
    for expected in ("neutrality [CI]", "skew [CI]", "stereotype [CI]", "bedtime stories",
                     "completions logprobs", "why dropped", "nurse", "replicates asked"):  # fmt: skip
        assert expected in html, expected


def test_a_real_model_is_not_labelled_simulated(runs: dict[str, Path], tmp_path: Path) -> None:
    copy = shutil.copytree(runs["allocation"], tmp_path / "run")
    for name in ("manifest.json", "metrics.json"):
        data = json.loads((copy / name).read_text())
        data["simulated"] = False
        (copy / name).write_text(json.dumps(data))
    code, _, err = invoke("report", str(copy), "--format", "html")
    assert code == 0, err
    html = (copy / "report.html").read_text(encoding="utf-8")
    assert "SIMULATED" not in html and "simulated model" not in html.lower()


@pytest.mark.parametrize(
    ("kind", "members", "sections", "expected"),
    [
        ("allocation", ["allocation", "allocation_fair"],
         ["runs", "validity", "ndcg", "rankings", "views"],
         ["Pearson r", "NDCG@2", "Model fairness", "NDCG@N for N = 1"]),
        ("grade-score", ["grade"], ["runs", "tables", "shares", "positions"],
         ["prompt 1", "Grade Score", "Answers naming no option"]),
        ("ruted", ["ruted sim/biased", "ruted sim/fair"], ["runs", "correlations"],
         ["Spearman rho with the standard test", "least biased model"]),
    ],
)  # fmt: skip
def test_study_writes_a_report_beside_the_runs(
    runs: dict[str, Path], kind: str, members: list[str], sections: list[str], expected: list[str]
) -> None:
    code, out, err = invoke("study", *(str(runs[m]) for m in members))
    assert code == 0, err
    assert "report:" not in out  # the tables on stdout are unchanged
    report = Path(err.strip().splitlines()[-1].removeprefix("report: "))
    folder = report.parent
    assert folder.parent == runs[members[0]].parent and f"-study-{kind}-" in folder.name
    assert json.loads((folder / "study.json").read_text())["kind"] == kind
    html = report.read_text(encoding="utf-8")
    page = parse(html)
    assert_self_contained(html, page)
    assert page.sections == sections
    assert all("SIMULATED model" in heading for heading in page.headings)
    for text in expected:
        assert text in html, text
    code, _, err = invoke("report", str(folder), "--format", "md")  # rebuilt from study.json
    assert code == 0, err
    shutil.rmtree(folder)  # leave the runs folder to the other tests as it was


def test_report_of_a_folder_that_is_no_run(tmp_path: Path) -> None:
    code, _, err = invoke("report", str(tmp_path))
    assert code == 2
    assert err == f"error: {tmp_path} is not a run directory (no manifest.json)\n"
