"""A full disk half-way through writing a user's files: each writer exits 2 with what to
do, the earlier files stay whole and no partial file is left (issue: `ll144 --out` on a
full disk left `summary.md` cut short beside the earlier run's other three files)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.textfiles import EXAMPLES_DIR

EXAMPLE = EXAMPLES_DIR / "ll144-outcomes.csv"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB filesystem of its own (tmpfs), for filling up."""
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here (root only): {mounted.stderr!r}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _fill(folder: Path) -> None:
    """Take every free block of the filesystem under ``folder`` (none left: nothing to do)."""
    with contextlib.suppress(OSError), open(folder / "filler", "wb") as handle:
        with contextlib.suppress(OSError):
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        os.fsync(handle.fileno())


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "filler"
    }  # fmt: skip


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def _refused_cleanly(folder: Path, before: dict[str, bytes], args: list[str]) -> None:
    _fill(folder)
    code, output = _invoke(*args)
    assert code == 2, output
    assert "Traceback" not in output and "No space left" in output, output
    assert _snapshot(folder) == before  # the earlier files whole, nothing half-written


def test_ll144_keeps_its_earlier_summary_whole(small_disk: Path) -> None:
    out = small_disk / "summary"
    assert _invoke("ll144", str(EXAMPLE), "--out", str(out))[0] == 0
    before = _snapshot(small_disk)
    _refused_cleanly(small_disk, before, ["ll144", str(EXAMPLE), "--out", str(out),
                                          "--tool", "another"])  # fmt: skip


def test_report_export_and_schema_keep_their_earlier_files_whole(
    small_disk: Path, tmp_path: Path
) -> None:
    code, output = _invoke(
        "run", "resume-screening", "--model", "sim/biased", "--jobs", "retail-associate",
        "--names-per-group", "2", "--rounds", "50", "--no-report",
        "--runs-dir", str(tmp_path / "runs"),
    )  # fmt: skip
    assert code == 0, output
    source = Path(output.rstrip().splitlines()[-1].removeprefix("run: "))
    run_dir = small_disk / "run"
    shutil.copytree(source, run_dir)
    export = small_disk / "figures.csv"
    schemas = small_disk / "schemas"
    assert _invoke("report", str(run_dir), "--format", "both")[0] == 0
    assert _invoke("export", str(run_dir), "-o", str(export))[0] == 0
    assert _invoke("schema", "--write", str(schemas))[0] == 0
    before = _snapshot(small_disk)
    _fill(small_disk)
    for args in (
        ["report", str(run_dir), "--format", "both"],
        ["export", str(run_dir), "-o", str(export), "--what", "scores"],
        ["schema", "--write", str(schemas)],
    ):
        code, output = _invoke(*args)
        assert code == 2 and "Traceback" not in output, (args, output)
        assert _snapshot(small_disk) == before, args
