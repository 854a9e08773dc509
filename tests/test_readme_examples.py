"""The README's commands that name a file in examples/ run as written, twice.

Every such command is read from the README's bash blocks; those that need a
network, a key or a server of one's own (hosted providers, --base-url, pip) are
only checked for their files. Each runnable one runs twice in a folder holding
a copy of examples/, as a newcomer's clone would, and must succeed both times.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli

ROOT = Path(__file__).resolve().parent.parent
OFFLINE_ONLY = ("openai/", "anthropic/", "vllm/", "--base-url", "local/", "shout/")


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("biasaudit ") and "examples/" in line:
                commands.append(line)
    return commands


COMMANDS = readme_commands()


def test_every_file_a_readme_command_names_ships() -> None:
    assert len(COMMANDS) >= 8
    for command in COMMANDS:
        for word in shlex.split(command):
            if word.startswith("examples/"):
                assert (ROOT / word).exists(), f"{word} (in: {command})"


@pytest.mark.parametrize(
    "command", [c for c in COMMANDS if not any(s in c for s in OFFLINE_ONLY)], ids=str
)
def test_readme_command_runs_as_written_twice(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    args = shlex.split(command)[1:]
    if args[0] in ("run", "reaudit"):
        args.append("--no-report")
    for attempt in (1, 2):
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 0, (attempt, result.stdout[-2000:], result.stderr[-2000:])
