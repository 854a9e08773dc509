"""The documentation site builds with every warning an error (broken links, missing
references, a page left out of the navigation), as ``mkdocs build --strict``."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="the docs extra is not installed: python3 -m pip install -e '.[docs]'",
)
def test_the_documentation_site_builds_strictly(tmp_path: Path) -> None:
    # mkdocs 1.x's plugins print a notice about mkdocs 2; biasaudit pins mkdocs below 2.
    env = {**os.environ, "DISABLE_MKDOCS_2_WARNING": "true", "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    for page in ("index.html", "tutorial/first-audit/index.html", "reference/cli/index.html",
                 "reference/spec/index.html", "reference/metrics-api/index.html"):  # fmt: skip
        assert (tmp_path / page).is_file(), page
    cli = (tmp_path / "reference/cli/index.html").read_text(encoding="utf-8")
    assert "biasaudit-run-resume-screening" in cli  # the tasks' own commands, generated
    api = (tmp_path / "reference/metrics-api/index.html").read_text(encoding="utf-8")
    assert "holm_adjust" in api and "allocation_figures" in api
