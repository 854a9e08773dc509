"""The files the README's and the docs' commands name ship with the package, the output
the pages quote is what the commands print (read by tests/test_docs_commands.py, which
runs every command), and every documented ``--until`` stops by its rule.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.textfiles import EXAMPLES_DIR

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("biasaudit ") and "examples/" in line and line not in commands:
                commands.append(line)
    return commands


COMMANDS = readme_commands()


def test_every_file_a_readme_command_names_ships() -> None:
    assert len(COMMANDS) >= 8
    for command in COMMANDS:
        for word in shlex.split(command):
            if word.startswith("examples/"):
                shipped = EXAMPLES_DIR / word.removeprefix("examples/")
                assert shipped.exists(), f"{word} (in: {command})"


def quoted_outputs() -> list[tuple[str, list[str]]]:
    """Each output block of the documentation (a code block that is not a command, a
    file or code) with the command it follows: the last in a bash block before it, or
    one quoted inline as ``From `biasaudit ...` ``."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        command = None
        text = page.read_text(encoding="utf-8")
        for piece in re.split(r"(^[ \t]*```[a-z]*\n.*?^[ \t]*```$)", text, flags=re.S | re.M):
            fence = re.match(r"[ \t]*```([a-z]*)\n(.*)```$", piece.strip("\n"), re.S)
            if fence is None:
                inline = re.findall(r"From `(biasaudit [^`]+)`", piece)
                command = inline[-1] if inline else command
            elif fence.group(1) == "bash":
                runs = [line.split("  #")[0].strip() for line in fence.group(2).splitlines()]
                command = next((c for c in reversed(runs) if c.startswith("biasaudit ")), None)
            elif fence.group(1) in ("", "text"):
                lines = [line.strip() for line in fence.group(2).splitlines()]
                found.append((command or "", [line for line in lines if line and line != "..."]))
    return found


UNTIL = [c for c in (
    line.split("  #")[0].strip()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    for line in block.splitlines()
) if c.startswith("biasaudit run ") and "--until" in c and "sim/" in c]  # fmt: skip


@pytest.mark.parametrize("command", UNTIL, ids=str)
def test_a_documented_until_stops_when_its_rule_holds(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docs show these audits stopping by their rule: none runs into its ceiling."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, [*shlex.split(command)[1:], "--no-report"],
                                catch_exceptions=False)  # fmt: skip
    assert result.exit_code == 0, result.stderr[-2000:]
    stopped = next(line for line in result.stdout.splitlines() if line.startswith("stopped:"))
    rule = command.split("--until ")[1].split()[0].split(":")[0]
    assert stopped.startswith(f"stopped: {rule}:"), (command, stopped)
