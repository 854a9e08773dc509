"""The evidence page in a real browser (Debian's Chromium, driven by Playwright): open it
from disk at a flagged group's link, see exactly that group's units, search, switch
views, and no error in the console. Without Chromium or Playwright these tests skip,
with the reason."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_audit import invoke, run_dir_of

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser(run_dir: Path) -> Iterator[Any]:
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
    page.click("#view-candidates")
    assert page.locator("#count").text_content() == "60 of 480 rows"
    name = page.locator("#rows tr td:nth-child(2)").first.text_content()
    page.fill("#search", name)
    assert page.locator("#rows tr").count() == 6  # one name on each of six resumes
    page.select_option("#group", "")
    page.check("#only")
    assert page.locator("#count").text_content().startswith("0 of 480")  # no irregular answer
    assert errors == []
    page.close()
