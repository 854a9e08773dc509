"""Storage that fails: a full disk, a damaged or read-only cache, a read-only runs directory.

The run stops sending at once, says what happened and where, marks itself
``failed`` and keeps what was paid for: every answer its run directory records
is in the cache, and a rerun re-sends at most what was in flight.

A full disk and a read-only folder are real ones where this machine lets a test
make them (a 2 MB tmpfs, a read-only bind mount, inside ``unshare -rm``); a
full cache is also made anywhere with SQLite's own page limit.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.engine.fanout import FanoutOptions, fanout, read_prompts
from biasaudit.errors import StorageFailedError
from biasaudit.store.cache import ResponseCache
from biasaudit.store.runs import read_manifest, read_responses
from tests.servers import OpenAIServer
from tests.servers.responders import long_responder

from .test_kill_resume import ROOT, write_prompts


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        done = subprocess.run(
            ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


needs_namespaces = pytest.mark.skipif(
    not _namespaces_work(),
    reason="needs user and mount namespaces (unshare -rm) to mount a tmpfs or a read-only folder",
)


def in_namespace(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a shell script in a private mount namespace (its mounts vanish with it)."""
    return subprocess.run(
        ["unshare", "-rm", "sh", "-ec", script], cwd=cwd, capture_output=True, text=True,
        timeout=240, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def biasaudit_line(*args: str | Path) -> str:
    return " ".join(f"'{a}'" for a in (sys.executable, "-m", "biasaudit", *map(str, args)))


def recorded_answers(run_dir: Path) -> dict[str, str]:
    """id -> cache key of every answer the run directory records."""
    return {r.id: r.cache_key for r in read_responses(run_dir) if r.error is None}


def the_run(runs: Path) -> Path:
    [run_dir] = [p for p in runs.iterdir() if p.is_dir()]
    return run_dir


@pytest.fixture
def long_server() -> Iterator[OpenAIServer]:
    with OpenAIServer(responder=long_responder, latency=0.005) as server:
        yield server


# --- 8. a full disk ------------------------------------------------------------------------


@needs_namespaces
def test_full_disk_stops_sending_keeps_what_was_paid_and_resumes_without_paying_twice(
    long_server: OpenAIServer, tmp_path: Path
) -> None:
    prompts, out = tmp_path / "prompts.jsonl", tmp_path / "out"
    write_prompts(prompts, 600)
    prompts.write_text(prompts.read_text().replace('"max_tokens":1', '"max_tokens":400'))
    asked = read_prompts(prompts)
    (tmp_path / "disk").mkdir()
    out.mkdir()
    run = biasaudit_line(
        "fanout", prompts, "--model", "vllm/m", "--base-url", long_server.base_url,
        "--runs-dir", tmp_path / "disk" / "runs", "--concurrency", "8",
    )  # fmt: skip
    done = in_namespace(
        f"mount -t tmpfs -o size=2m tmpfs '{tmp_path}/disk'\n"
        f"set +e; {run} > '{out}/stdout' 2> '{out}/stderr'; echo $? > '{out}/exit'; set -e\n"
        f"cp -a '{tmp_path}/disk/runs' '{out}/runs'\n",
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    stderr = (out / "stderr").read_text()
    assert (out / "exit").read_text().strip() == "1", stderr
    assert "Traceback" not in stderr and "error: " in stderr
    assert str(tmp_path / "disk" / "runs") in stderr and "stopped sending" in stderr
    runs = out / "runs"
    run_dir = the_run(runs)
    manifest = read_manifest(run_dir)
    assert manifest.status == "failed" and manifest.error and "stopped sending" in manifest.error

    answered = recorded_answers(run_dir)
    keys = [r.cache_key(provider="vllm", model="m", base_url=long_server.base_url) for r in asked]
    with ResponseCache(runs / "cache.sqlite", readonly=True) as cache:
        cached = cache.keys_present(keys)
    assert set(answered.values()) <= cached, "a recorded answer is missing from the cache"
    paid_first = long_server.request_count
    # Paid for and not kept: at most the 8 requests in flight when it stopped.
    assert 20 < len(cached) < 600 and paid_first - len(cached) <= 8, "sent after the disk filled"

    # The same command again, with room: only what never reached the cache is asked.
    again = subprocess.run(
        [sys.executable, "-m", "biasaudit", "fanout", str(prompts), "--model", "vllm/m",
         "--base-url", long_server.base_url, "--runs-dir", str(runs), "--concurrency", "8"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert f"{len(cached)} from cache, {600 - len(cached)} requests sent" in again.stdout
    asked = long_server.count_by(lambda r: json.dumps(r.body["messages"]) if r.body else "")
    assert sum(asked.values()) == paid_first + 600 - len(cached)
    assert sum(1 for n in asked.values() if n > 1) <= 8, "paid twice beyond what was in flight"


def test_a_cache_that_fills_up_stops_the_run_and_every_recorded_answer_is_in_it(
    long_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite's own limit on the file's pages: "database or disk is full", as on a full disk.
    opened = ResponseCache._open_writable

    def small(self: ResponseCache) -> sqlite3.Connection:
        db = opened(self)
        db.execute("PRAGMA max_page_count = 120")
        return db

    monkeypatch.setattr(ResponseCache, "_open_writable", small)
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts, 400)
    prompts.write_text(prompts.read_text().replace('"max_tokens":1', '"max_tokens":400'))
    options = FanoutOptions(
        model="vllm/m", base_url=long_server.base_url, runs_dir=tmp_path / "runs", concurrency=4
    )
    with pytest.raises(StorageFailedError) as caught:
        fanout(prompts, options)
    assert "database or disk is full" in str(caught.value) and caught.value.run_dir
    run_dir = Path(caught.value.run_dir)
    assert read_manifest(run_dir).status == "failed"
    monkeypatch.setattr(ResponseCache, "_open_writable", opened)
    keys = [
        r.cache_key(provider="vllm", model="m", base_url=long_server.base_url)
        for r in read_prompts(prompts)
    ]
    with ResponseCache(tmp_path / "runs" / "cache.sqlite") as cache:
        cached = cache.keys_present(keys)
    assert set(recorded_answers(run_dir).values()) <= cached
    assert 10 < len(cached) < 400 and long_server.request_count - len(cached) <= 4


def test_no_room_for_the_reserve_fails_before_anything_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from biasaudit.store import runs

    def no_space(path: Path, size: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(runs, "_allocate", no_space)
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts, 3)
    with OpenAIServer() as server:
        result = CliRunner().invoke(
            cli, ["fanout", str(prompts), "--model", "vllm/m", "--base-url", server.base_url,
                  "--runs-dir", str(tmp_path / "runs")],
        )  # fmt: skip
        assert server.request_count == 0
    assert result.exit_code == 1 and "no room to start a run" in result.output
    assert not [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]


# --- 9. a damaged cache ------------------------------------------------------------------------


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:700])


def _random_bytes(path: Path) -> None:
    path.write_bytes(random.Random(1).randbytes(path.stat().st_size))


def _bad_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[:16] = b"Not SQLite at al"
    path.write_bytes(bytes(data))


DAMAGE = {"truncated": _truncate, "random-bytes": _random_bytes, "bad-header": _bad_header}


@pytest.fixture
def filled(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A fan-out of 1,500 prompts to sim/: its prompts, runs folder and run."""
    prompts, runs = tmp_path / "prompts.jsonl", tmp_path / "runs"
    write_prompts(prompts, 1500)
    args = ["fanout", str(prompts), "--model", "sim/biased", "--runs-dir", str(runs)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return prompts, runs, the_run(runs)


def commands(prompts: Path, runs: Path, run_dir: Path) -> dict[str, list[str]]:
    out = str(runs.parent / "elsewhere")
    return {
        "fanout": ["fanout", str(prompts), "--model", "sim/biased", "--runs-dir", out,
                   "--cache", str(runs / "cache.sqlite")],
        "run": ["run", "resume-screening", "--model", "sim/biased", "--names-per-group", "1",
                "--jobs", "software-engineer", "--runs-dir", out, "--cache",
                str(runs / "cache.sqlite"), "--no-report"],
        "replay": ["replay", str(run_dir), "--runs-dir", out, "--no-report"],
        "cache stats": ["cache", "stats", "--cache", str(runs / "cache.sqlite")],
    }  # fmt: skip


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("command", ["fanout", "run", "replay", "cache stats"])
def test_a_damaged_cache_is_named_with_what_to_do(
    filled: tuple[Path, Path, Path], damage: str, command: str
) -> None:
    prompts, runs, run_dir = filled
    DAMAGE[damage](runs / "cache.sqlite")
    result = CliRunner().invoke(cli, commands(prompts, runs, run_dir)[command])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, sqlite3.Error)
    assert f"the response cache {runs / 'cache.sqlite'} is damaged" in result.output
    assert "Move it aside" in result.output


@pytest.mark.parametrize("command", ["fanout", "replay", "cache stats"])
def test_a_cache_damaged_in_the_middle_is_named_when_read(
    filled: tuple[Path, Path, Path], command: str
) -> None:
    prompts, runs, run_dir = filled
    path = runs / "cache.sqlite"
    data = bytearray(path.read_bytes())
    middle = len(data) // 2 // 4096 * 4096
    data[middle : middle + 4 * 4096] = random.Random(2).randbytes(4 * 4096)
    path.write_bytes(bytes(data))
    result = CliRunner().invoke(cli, commands(prompts, runs, run_dir)[command])
    assert result.exit_code == 2, result.output
    assert "is damaged" in result.output and "Move it aside" in result.output


# --- 10. read-only storage -----------------------------------------------------------------


@needs_namespaces
def test_a_read_only_cache_serves_replays_and_stats_and_refuses_a_run_that_must_write(
    filled: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    prompts, runs, run_dir = filled
    cache, rw = runs / "cache.sqlite", tmp_path / "writable"
    rw.mkdir()
    outcomes = tmp_path / "outcomes"
    outcomes.mkdir()
    steps = {
        "replay-flag": ("fanout", prompts, "--model", "sim/biased", "--replay", "--cache", cache,
                        "--runs-dir", rw),
        "replay-command": ("replay", run_dir, "--cache", cache, "--runs-dir", rw, "--no-report"),
        "stats": ("cache", "stats", "--cache", cache),
        "must-write": ("fanout", prompts, "--model", "sim/biased", "--cache", cache,
                       "--runs-dir", rw),
        "runs-dir": ("fanout", prompts, "--model", "sim/biased", "--replay", "--runs-dir", runs),
    }  # fmt: skip
    script = f"mount --bind '{runs}' '{runs}'\nmount -o remount,bind,ro '{runs}'\nset +e\n"
    for name, args in steps.items():
        script += (
            f"{biasaudit_line(*args)} > '{outcomes}/{name}.out' 2>&1; "
            f"echo $? > '{outcomes}/{name}.exit'\n"
        )
    done = in_namespace(script, cwd=ROOT)
    assert done.returncode == 0, done.stderr

    def outcome(name: str) -> tuple[int, str]:
        code = int((outcomes / f"{name}.exit").read_text())
        return code, (outcomes / f"{name}.out").read_text()

    for name in ("replay-flag", "replay-command", "stats"):
        code, text = outcome(name)
        assert code == 0, (name, text)
    code, text = outcome("must-write")
    assert code == 2 and f"the response cache {cache} is read-only" in text and "--replay" in text
    code, text = outcome("runs-dir")
    assert code == 2 and f"cannot create a run directory in {runs}" in text
    assert "Traceback" not in "".join((outcomes / f"{n}.out").read_text() for n in steps)


@pytest.mark.parametrize("command", ["fanout", "replay", "cache stats"])
@pytest.mark.parametrize("version", ["2", "two"])
def test_a_cache_a_newer_biasaudit_wrote_is_refused_by_name(
    filled: tuple[Path, Path, Path], command: str, version: str
) -> None:
    """Neither read nor written: a newer layout may mean something else."""
    prompts, runs, run_dir = filled
    path = runs / "cache.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'", (version,))
        db.execute("CREATE TABLE newer (x)")
    before = path.read_bytes()
    result = CliRunner().invoke(cli, commands(prompts, runs, run_dir)[command])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"the response cache {path} was written by a newer biasaudit" in result.output
    assert "upgrade biasaudit, or give --cache another file" in result.output
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        assert db.execute("SELECT value FROM meta").fetchall() == [(version,)]
    assert len(path.read_bytes()) == len(before)


@pytest.mark.parametrize("under", ["", "sub"])
def test_a_runs_folder_that_is_a_file_is_named_before_anything_is_sent(
    tmp_path: Path, under: str
) -> None:
    blocker = tmp_path / "runs"
    blocker.write_text("not a folder")
    runs = blocker / under if under else blocker
    result = CliRunner().invoke(cli, ["run", "grade-score", "--items", "demo", "--model",
                                      "sim/fair", "--runs-dir", str(runs)])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: cannot create the response cache {runs / 'cache.sqlite'}: {blocker} is a "
        "file, not a folder; give --runs-dir a folder, or --cache a file in a writable folder\n"
    )
    assert blocker.read_text() == "not a folder"
