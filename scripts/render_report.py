"""Render a biasaudit HTML report in headless Chromium to a PNG, to check it reads well.

    python3 scripts/render_report.py runs/RUN/report.html [-o report.png] [--width 1200]

Needs the Debian package ``chromium`` (``apt-get install -y chromium``), or
any Chromium / Chrome named by ``--browser`` or ``$CHROMIUM``. The browser
gets a fresh profile in a temporary folder and every background network
feature off; the report itself needs no network, so a page that renders here
renders offline. The page's full height is found first (by a layout pass in
the browser, ``--dump-dom`` of a script that writes it into the page), so the
screenshot holds the whole report.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
]
MEASURE = (
    "<script>window.addEventListener('load',()=>{document.title="
    "'HEIGHT='+document.documentElement.scrollHeight;});</script>"
)


def find_browser(named: str | None) -> str:
    for candidate in (
        named,
        os.environ.get("CHROMIUM"),
        "chromium",
        "chromium-browser",
        "google-chrome",
    ):
        if candidate and shutil.which(candidate):
            return str(shutil.which(candidate))
    sys.exit("no Chromium found: apt-get install -y chromium, or pass --browser PATH")


def _run(browser: str, profile: str, extra: list[str], timeout: float) -> str:
    command = [browser, *FLAGS, f"--user-data-dir={profile}", *extra]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        sys.exit(f"chromium failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def page_height(browser: str, profile: str, page: Path, width: int, timeout: float) -> int:
    """The rendered height of ``page`` at ``width``, from a copy that writes it into its title."""
    with tempfile.TemporaryDirectory() as folder:
        probe = Path(folder, "measure.html")
        probe.write_text(
            page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"),
            encoding="utf-8",
        )
        dom = _run(
            browser,
            profile,
            [
                f"--window-size={width},1000",
                "--virtual-time-budget=5000",
                "--dump-dom",
                probe.as_uri(),
            ],
            timeout,
        )
    found = re.search(r"HEIGHT=(\d+)", dom)
    return int(found.group(1)) if found else 4000


def render(page: Path, output: Path, *, width: int, browser: str, timeout: float) -> int:
    """Screenshot the whole of ``page`` into ``output``; returns the height used."""
    with tempfile.TemporaryDirectory(prefix="biasaudit-chromium-") as profile:
        height = min(page_height(browser, profile, page, width, timeout), 30000)
        _run(
            browser,
            profile,
            [
                f"--window-size={width},{height}",
                f"--screenshot={output.resolve()}",
                page.resolve().as_uri(),
            ],
            timeout,
        )
    if not output.exists():
        sys.exit(f"chromium wrote no screenshot to {output}")
    return height


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("report", type=Path, help="report.html")
    parser.add_argument("-o", "--output", type=Path, help="PNG to write [REPORT.png]")
    parser.add_argument("--width", type=int, default=1200)
    parser.add_argument("--browser", help="Chromium executable [chromium]")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    output = args.output or args.report.with_suffix(".png")
    height = render(
        args.report,
        output,
        width=args.width,
        browser=find_browser(args.browser),
        timeout=args.timeout,
    )
    print(f"{output} ({args.width}x{height})")


if __name__ == "__main__":
    main()
