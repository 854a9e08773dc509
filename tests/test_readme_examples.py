"""The commands of the README and the documentation that name a file in examples/
run as written, twice.

Every such command is read from the bash blocks of README.md and docs/; those that need a
network, a key or a server of one's own (hosted providers, --base-url, pip) are
only checked for their files. Each runnable one runs twice in a fresh folder outside
the clone, where ``biasaudit examples`` has copied the shipped examples, as after a
plain ``pip install``, and must succeed both times.
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
OFFLINE_ONLY = ("openai/", "anthropic/", "vllm/", "--base-url", "local/", "shout/")


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


@pytest.mark.parametrize(
    "command", [c for c in COMMANDS if not any(s in c for s in OFFLINE_ONLY)], ids=str
)
def test_readme_command_runs_as_written_twice(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _copy_examples()
    args = shlex.split(command)[1:]
    if args[0] in ("run", "reaudit"):
        args.append("--no-report")
    for attempt in (1, 2):
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 0, (attempt, result.stdout[-2000:], result.stderr[-2000:])


def _copy_examples() -> None:
    """What a newcomer types first: the shipped examples into ./examples."""
    result = CliRunner().invoke(cli, ["examples"], catch_exceptions=False)
    assert result.exit_code == 0 and result.stdout.splitlines()[-1] == "examples: examples"
    assert (Path("examples") / "my-task.yaml").is_file()


def tour_commands() -> list[str]:
    """The README's own commands (its tour), in order, as a newcomer types them."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("biasaudit "):
                found.append(line)
    return found


def expand(command: str, folder: Path) -> list[str]:
    """The command's words, each ``$(ls -d GLOB | tail -1)`` replaced by its last match."""

    def latest(match: re.Match[str]) -> str:
        paths = sorted(folder.glob(match.group(1)))
        assert paths, f"nothing matches {match.group(1)} for: {command}"
        return str(paths[-1].relative_to(folder))

    command = re.sub(r"\$\(ls -d (\S+) \| tail -1\)", latest, command)
    words = shlex.split(command)[1:]
    return [w for glob in words for w in (sorted(str(p.relative_to(folder)) for p in
            folder.glob(glob)) if "*" in glob else [glob])]  # fmt: skip


def test_the_readme_tour_runs_as_written_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    commands = [c for c in tour_commands() if "local/" not in c]
    assert len(commands) >= 12
    printed: dict[str, list[str]] = {}
    for attempt in (1, 2):
        for command in commands:
            args = expand(command, tmp_path)
            if args[0] in ("run", "reaudit", "study", "compare") and "--dry-run" not in args:
                args.append("--no-report")
            result = CliRunner().invoke(cli, args, catch_exceptions=False)
            assert result.exit_code == 0, (attempt, command, result.stderr[-2000:])
            printed.setdefault(command, [line.rstrip() for line in result.stdout.splitlines()])

    # What the documentation shows a tour command printing, it prints (lines may be cut
    # short of their last columns): a quoted table cannot go stale.
    quoted = quoted_outputs()
    assert sum(len(lines) for command, lines in quoted if command in printed) >= 15
    for command, lines in quoted:
        for line in lines if command in printed else ():
            assert any(out.startswith(line) for out in printed[command]), (command, line)


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
