"""The evidence page in a real browser (Debian's Chromium, driven by Playwright): open it
from disk at a flagged group's link, see exactly that group's units, search, switch
views, and no error in the console. Without Chromium or Playwright these tests skip,
with the reason."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_audit import invoke, run_dir_of

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# The picture in docs/how-to/evidence.md: BIASAUDIT_SCREENSHOTS=1 python3 -m pytest
# tests/test_evidence_browser.py makes it again.
SCREENSHOT = Path(__file__).parent.parent / "docs" / "how-to" / "evidence-pairs.png"


@pytest.fixture(scope="module")
def browser(run_dir: Path, other_runs: dict[str, Path]) -> Iterator[Any]:
    """Chromium, started once the run is written: Playwright's own event loop runs in
    this thread while it is open, where biasaudit's could not start another."""
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run"],
        )  # fmt: skip
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    code, out, err = invoke(
        "run", "resume-screening", "--model", "sim/biased", "--jobs", "software-engineer",
        "--names-per-group", "10", "--runs-dir", str(tmp_path_factory.mktemp("runs")),
    )  # fmt: skip
    assert code == 0, err
    return run_dir_of(out)


@pytest.fixture(scope="module")
def other_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A decisions run and a RUTEd run of long-form texts, written before the browser
    starts."""
    found = {}
    for name, args in (("decisions", ("decisions",)),
                       ("ruted", ("ruted", "--contexts", "bedtime", "--replicates", "2"))):  # fmt: skip
        code, out, err = invoke("run", *args, "--model", "sim/biased", "--runs-dir",
                                str(tmp_path_factory.mktemp(name)))  # fmt: skip
        assert code == 0, err
        found[name] = run_dir_of(out)
    return found


def _opened(browser: Any, report: Path, errors: list[str]) -> Any:
    page = browser.new_page()
    page.on("console", lambda message: errors.append(message.text) if message.type == "error"
            else None)  # fmt: skip
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(report.as_uri())
    return page


def test_a_decisions_score_opens_exactly_its_persons(
    other_runs: dict[str, Path], browser: Any
) -> None:
    errors: list[str] = []
    page = _opened(browser, other_runs["decisions"] / "report.html", errors)
    page.click('a[href="evidence.html#view=persons&fill=explicit&race=black"]')
    page.wait_for_selector("#rows tr")
    headings = page.locator("#head th").all_text_contents()
    race, fill = headings.index("race") + 1, headings.index("fill") + 1
    assert set(page.locator(f"#rows tr td:nth-child({race})").all_text_contents()) == {"black"}
    assert set(page.locator(f"#rows tr td:nth-child({fill})").all_text_contents()) == {"explicit"}
    assert page.locator("#filter-race").input_value() == "black"
    assert page.locator("#filter-fill").input_value() == "explicit"
    page.click("#clear")  # every filter goes: every race is back
    assert len(set(page.locator(f"#rows tr td:nth-child({race})").all_text_contents())) > 1
    page.click("#view-scenarios")
    assert page.locator("#rows tr").count() > 0
    assert errors == []
    page.close()


def test_a_long_form_text_shows_its_gendered_words_marked(
    other_runs: dict[str, Path], browser: Any
) -> None:
    errors: list[str] = []
    page = _opened(browser, other_runs["ruted"] / "report.html", errors)
    page.click('a[href="evidence.html#view=texts"]')
    page.wait_for_selector("#rows tr")
    page.locator("#rows tr details summary").first.click()
    marks = page.locator("#rows tr details pre mark").all_text_contents()
    assert marks and all(m.endswith((" [m]", " [f]")) for m in marks)
    assert errors == []
    page.close()


def test_a_flagged_groups_link_opens_exactly_its_units(run_dir: Path, browser: Any) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error"
            else None)  # fmt: skip
    page.on("pageerror", lambda error: errors.append(str(error)))
    report = (run_dir / "report.html").as_uri()
    page.goto(report)
    page.click('a[href="evidence.html#view=pairs&group=B_M"]')
    page.wait_for_selector("#rows tr")
    assert page.locator("#count").text_content() == "6 of 42 rows"  # B_M on each resume
    groups = page.locator("#rows tr td:nth-child(2)").all_text_contents()
    assert groups == ["B_M"] * 6
    gaps = [float(t) for t in page.locator("#rows tr td:nth-child(5)").all_text_contents()]
    assert gaps == sorted(gaps) and gaps[0] < 0  # the largest gap first
    if os.environ.get("BIASAUDIT_SCREENSHOTS"):  # the docs' picture, made by this test
        page.set_viewport_size({"width": 1280, "height": 640})
        page.screenshot(path=str(SCREENSHOT))
    page.click("#view-candidates")
    assert page.locator("#count").text_content() == "60 of 480 rows"
    name = page.locator("#rows tr td:nth-child(2)").first.text_content()
    page.fill("#search", name)
    assert page.locator("#rows tr").count() == 6  # one name on each of six resumes
    page.select_option("#filter-group", "")
    page.check("#only")
    assert page.locator("#count").text_content().startswith("0 of 480")  # no irregular answer
    assert errors == []
    page.close()
