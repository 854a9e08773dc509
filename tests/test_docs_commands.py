"""Every command of the README and of every docs page runs as written, twice, in one
fresh folder outside the clone, in the order a reader meets them: the README, then
the pages in the site's navigation order, after ``biasaudit examples`` (as after a
plain ``pip install``).

Left out, and listed here so that the list cannot go stale: commands that need a
network, a key or a server of one's own (a hosted provider, ``--base-url``, the
local model, pip), and commands that name a file of the reader's own. A page's
placeholders for the run it has just made (``runs/<id>``, ``runs/<old> runs/<new>``)
are the latest runs of the folder, and ``$(ls -d GLOB | tail -1)`` its latest match.
Each ``run`` prints its run directory last, as the pages say, and what a page quotes a
command printing (a ``text`` block after it) is what it prints.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from biasaudit.cli import cli
from tests.test_readme_examples import quoted_outputs

ROOT = Path(__file__).resolve().parent.parent
NEEDS_MORE = ("openai/", "anthropic/", "vllm/", "azure/", "gemini/", "--base-url", "local/",
              "shout/", "myhost/")  # fmt: skip
OWN_FILES = {"biasaudit score decisions outputs.csv": "a file of the reader's own answers"}
RUN_NAME = re.compile(r"^\d{8}T\d{6}Z-")
RUN_FILES = {
    "spec.json",
    "manifest.json",
    "metrics.json",
    "prompts.jsonl.gz",
    "responses.jsonl",
    "report.html",
    "report.md",
    "evidence.html",
}  # what the pages say a run writes
LL144_FILES = {"summary.md", "summary.html", "summary.csv", "summary.json", "evidence.html"}


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    return []


def pages() -> list[Path]:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    listed = (ROOT / "docs" / page for page in _nav_pages(nav))
    return [ROOT / "README.md", *(page for page in listed if page.is_file())]  # some generated


def commands() -> list[tuple[str, str]]:
    """(page, command) of every ``biasaudit`` line of every bash block, in reading order."""
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"```bash\n(.*?)```", text, re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = " ".join(line.split("  #")[0].split())
                if line.startswith("biasaudit "):
                    found.append((page.name, line))
    return found


def runnable(command: str) -> bool:
    return not any(word in command for word in NEEDS_MORE) and command not in OWN_FILES


def _latest_runs(folder: Path) -> list[Path]:
    runs = [p for p in folder.rglob("*") if p.is_dir() and RUN_NAME.match(p.name)
            and (p / "manifest.json").is_file()]  # fmt: skip
    return sorted(runs, key=lambda p: p.name)


def expand(command: str, folder: Path) -> list[str]:
    """The command's words, with the page's placeholders and globs filled in."""

    def latest(match: re.Match[str]) -> str:
        paths = sorted(folder.glob(match.group(1)))
        assert paths, f"nothing matches {match.group(1)} for: {command}"
        return str(paths[-1].relative_to(folder))

    command = re.sub(r"\$\(ls -d (\S+) \| tail -1\)", latest, command)
    runs = _latest_runs(folder)
    if "runs/<old> runs/<new>" in command:
        assert len(runs) >= 2, command
        old, new = (str(p.relative_to(folder)) for p in runs[-2:])
        command = command.replace("runs/<old> runs/<new>", f"{old} {new}")
    for placeholder in ("runs/<id>", "runs/<run>"):
        if placeholder in command:
            assert runs, command
            command = command.replace(placeholder, str(runs[-1].relative_to(folder)))
    words = shlex.split(command)[1:]
    return [w for word in words for w in (sorted(str(p.relative_to(folder)) for p in
            folder.glob(word)) if "*" in word else [word])]  # fmt: skip


def test_the_left_out_commands_are_still_on_the_pages() -> None:
    on_pages = {command for _, command in commands()}
    assert set(OWN_FILES) <= on_pages
    assert sum(runnable(c) for c in on_pages) >= 40


def test_every_documented_command_runs_as_written_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    setup = CliRunner().invoke(cli, ["examples"], catch_exceptions=False)
    assert setup.exit_code == 0, setup.output
    todo = [(page, c) for page, c in commands() if runnable(c) and c != "biasaudit examples"]
    printed: dict[str, list[str]] = {}
    for attempt in (1, 2):
        for page, command in todo:
            args = expand(command, tmp_path)
            result = CliRunner().invoke(cli, args, catch_exceptions=False)
            where = (attempt, page, command)
            assert result.exit_code == 0, (*where, result.stderr[-2000:])
            if args[0] == "run" and "--dry-run" not in args:
                last = result.stdout.splitlines()[-1]
                assert last.startswith("run: "), where
                written = {p.name for p in Path(last.removeprefix("run: ")).iterdir()}
                assert written >= RUN_FILES, (*where, RUN_FILES - written)
            if args[0] == "ll144":
                out = Path(args[args.index("--out") + 1])
                assert {p.name for p in out.iterdir()} >= LL144_FILES, where
            printed.setdefault(command, [line.rstrip() for line in result.stdout.splitlines()])
    # What a page shows a command printing, it prints (lines may be cut short of their
    # last columns): a quoted table cannot go stale.
    quoted = [(" ".join(command.split()), lines) for command, lines in quoted_outputs()]
    assert sum(len(lines) for command, lines in quoted if command in printed) >= 15
    for command, lines in quoted:
        for line in lines if command in printed else ():
            assert any(out.startswith(line) for out in printed[command]), (command, line)
