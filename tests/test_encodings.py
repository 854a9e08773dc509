"""Output to a stream in a legacy encoding (a file redirected on Windows is cp1252, a
terminal in a Latin-1 locale): every table is written, with the characters
the encoding lacks spelled out (Δ as D, δ as delta), never a UnicodeEncodeError."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252"])
def test_an_audit_printed_to_a_legacy_encoding_is_whole_and_readable(
    tmp_path: Path, encoding: str
) -> None:
    env = {**os.environ, "PYTHONIOENCODING": encoding}
    done = subprocess.run(
        [sys.executable, "-m", "biasaudit", "run", "resume-screening", "--model", "sim/biased",
         "--jobs", "software-engineer", "--names-per-group", "3", "--no-report",
         "--runs-dir", str(tmp_path / "runs-é")],
        capture_output=True, env=env, timeout=120,
    )  # fmt: skip
    out, err = done.stdout.decode(encoding), done.stderr.decode(encoding)
    assert done.returncode == 0, err
    assert "Traceback" not in err
    assert "delta mean" in out and "\nDDP: selection rate minus W_M's" in out
    # the run folder's own name is shown as the encoding can
    assert out.rstrip().splitlines()[-1].startswith("run: ")
    assert (tmp_path / "runs-é").is_dir()
