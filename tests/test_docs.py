"""The documentation site builds with every warning an error (broken links, missing
references, a page left out of the navigation), as ``mkdocs build --strict``."""

from __future__ import annotations

import html
import importlib.util
import os
import re
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
    _every_help_is_on_the_page(cli)
    api = (tmp_path / "reference/metrics-api/index.html").read_text(encoding="utf-8")
    assert "holm_adjust" in api and "allocation_figures" in api


def _every_help_is_on_the_page(page: str) -> None:
    """Every command and subcommand the CLI has (lazy ones and each task's run command
    included) has a section whose block is its ``--help`` as a user's terminal of 100
    columns prints it: names, options, defaults; no sentinel text, no cut summary."""
    from click.testing import CliRunner

    from biasaudit.cli import cli

    blocks = {
        anchor: html.unescape(re.sub(r"<[^>]+>", "", block))
        for anchor, block in re.findall(
            r'<h2 id="(biasaudit[^"]*)">.*?<pre>(.*?)</pre>', page, re.DOTALL
        )
    }  # fmt: skip
    expected = {"biasaudit-fanout", "biasaudit-run-decisions", "biasaudit-score-listwise",
                "biasaudit-cache-stats", "biasaudit-ll144"}  # fmt: skip
    assert expected <= set(blocks), sorted(blocks)
    listed = set()
    for anchor, block in blocks.items():
        args = anchor.split("-")[1:]
        path = _command_path(cli, args)
        listed.add(tuple(path))
        shown = CliRunner().invoke(cli, [*path, "--help"], prog_name="biasaudit",
                                   terminal_width=100)  # fmt: skip
        assert shown.exit_code == 0, shown.output
        assert block.strip("\n") == shown.output.strip("\n"), anchor
        assert "Sentinel" not in block, anchor
        commands = block.partition("\nCommands:\n")[2]
        assert not any(line.rstrip().endswith("...") for line in commands.splitlines()), anchor
    assert _every_command(cli) == listed


def _command_path(cli: object, parts: list[str]) -> list[str]:
    """The command names of an anchor's words (a name may hold a hyphen: grade-score)."""
    import click

    group, path = cli, []
    while parts:
        assert isinstance(group, click.Group)
        ctx = click.Context(group)
        for size in range(len(parts), 0, -1):
            name = "-".join(parts[:size])
            if name in group.list_commands(ctx):
                path.append(name)
                group, parts = group.get_command(ctx, name), parts[size:]
                break
        else:
            raise AssertionError(f"no command {parts}")
    return path


def _every_command(cli: object) -> set[tuple[str, ...]]:
    import click

    found: set[tuple[str, ...]] = set()

    def walk(command: object, path: tuple[str, ...]) -> None:
        found.add(path)
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, (*path, name))

    walk(cli, ())
    return found
