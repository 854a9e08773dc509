"""The evidence page at scale: a run of N answers, its page's size, and the time
Chromium takes to open it from disk and show its first rows, and to filter them
(a search, a drop-down), on this machine.

The rows are made here, as an allocation run's candidates are (a name, a group, a
resume, a score, an answer, label probabilities and a prompt of about 1,500
characters as sent, the name in it), so that the sizes are those of a real run.

Run from the repository root (needs Playwright and Debian's chromium):
    python bench/bench_evidence.py [--rows 1000 10000 100000]
Prints numbers; asserts nothing. (tests/test_evidence_browser.py checks the page's
behaviour at small size.)
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from datetime import date
from pathlib import Path

from biasaudit.kinds._evidence import Evidence, View
from biasaudit.reports.evidence import evidence_page, page_data

RESUME = (
    "Experience: {years} years as a software engineer at a mid-sized firm, building "
    "data pipelines and web services in Python and Go; led a team of four; on call for "
    "payment systems. Education: BSc Computer Science. Skills: distributed systems, "
    "SQL, Kubernetes, testing, code review, mentoring. " * 3
)


def rows(count: int) -> list[dict]:
    groups = ["W_F", "W_M", "B_F", "B_M", "A_F", "A_M", "H_F", "H_M"]
    found = []
    for i in range(count):
        name = f"Person{i % 997} Surname{i % 1009}"
        found.append({
            "candidate": f"software-engineer-r{i % 24}/{name}", "name": name,
            "group": groups[i % 8], "subtask": "software-engineer", "item": f"r{i % 24}",
            "qualified": str(i % 3 == 0), "score": (i * 7919 % 1000) / 1000, "flags": "",
            "answer": "Yes" if i % 2 else "No", "probabilities": "Yes 0.731, No 0.269",
            "prompt": "[system]\nYou are an HR assistant helping screen resumes.\n\n[user]\n"
                      f"Job: software engineer.\nName: {name}\n"
                      + RESUME.format(years=i % 15) + "\nShould this candidate be "
                      "interviewed? Answer Yes or No.",
        })  # fmt: skip
    return found


def page_for(count: int) -> str:
    columns = [("candidate", "candidate"), ("name", "name"), ("group", "group"),
               ("item", "resume"), ("score", "score"), ("answer", "answer"),
               ("probabilities", "label probabilities"), ("flags", "flags"),
               ("prompt", "prompt as sent")]  # fmt: skip
    view = View("candidates", "Candidates", "bench", columns, rows(count), flag="flags")
    data = page_data(Evidence("bench", [view], prompts_verified=True), run="bench",
                     model="bench", task="bench", simulated=False)  # fmt: skip
    return evidence_page(data)


def timed(path: Path, browser) -> tuple[float, float, float]:
    """Seconds from opening the file to its first rows, then for a search and for a
    drop-down filter to change the rows shown."""
    page = browser.new_page()
    started = time.perf_counter()
    page.goto(path.as_uri())
    page.wait_for_selector("#rows tr", state="attached")
    opened = time.perf_counter() - started

    def changed(action) -> float:
        before = page.locator("#count").text_content()
        started = time.perf_counter()
        action()
        page.wait_for_function(
            "text => document.getElementById('count').textContent !== text", arg=before
        )
        return time.perf_counter() - started

    searched = changed(lambda: page.fill("#search", "Person5 "))
    page.fill("#search", "")
    filtered = changed(lambda: page.select_option("#filter-group", "B_M"))
    page.close()
    return opened, searched, filtered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    print(f"# {date.today()}  {platform.machine()}  {os.cpu_count()} CPUs  "
          f"Python {platform.python_version()}  {chromium}")  # fmt: skip
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for count in args.rows:
            started = time.perf_counter()
            path = Path(folder) / f"evidence-{count}.html"
            path.write_text(page_for(count), encoding="utf-8")
            written = time.perf_counter() - started
            opened, searched, filtered = timed(path, browser)
            print(f"{count:>7} rows: {path.stat().st_size / 1e6:6.1f} MB, written in "
                  f"{written:.2f} s; Chromium: open to first rows {opened:.2f} s, "
                  f"search {searched:.2f} s, drop-down {filtered:.2f} s")  # fmt: skip
        browser.close()


if __name__ == "__main__":
    main()
