"""Whole-process behaviour: kill -9 and resume, SIGTERM, and keys never written anywhere.

The fan-out runs as a real `python -m biasaudit` process against a loopback
server process that logs every request it receives.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from biasaudit.providers import ModelRequest
from biasaudit.store.cache import ResponseCache
from biasaudit.store.runs import read_manifest

ROOT = Path(__file__).resolve().parent.parent
CANARY = "sk-canary-5f1d7e2b9c4a8e6f0d3b"


class ServerProcess:
    def __init__(self, log: Path, *extra: str) -> None:
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.servers.openai_server", "--port", "0", "--log", str(log), *extra],
            cwd=ROOT, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith("PORT "), line
        self.base_url = f"http://127.0.0.1:{int(line.split()[1])}/v1"

    def received(self) -> Counter[str]:
        if not self.log.exists():
            return Counter()
        lines = self.log.read_text().splitlines()
        return Counter(json.loads(line.split("\t", 1)[1]) for line in lines if "\t" in line)

    def stop(self) -> None:
        self.process.terminate()
        self.process.communicate(timeout=10)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "server.log", "--latency", "0.05")
    yield process
    process.stop()


def write_prompts(path: Path, n: int) -> list[ModelRequest]:
    requests = [
        ModelRequest.model_validate(
            {
                "id": f"p{i}",
                "messages": [{"role": "user", "content": f"prompt {i}"}],
                "params": {"max_tokens": 1},
            }
        )
        for i in range(n)
    ]
    path.write_text("".join(r.model_dump_json(exclude_defaults=True) + "\n" for r in requests))
    return requests


def fanout(
    prompts: Path, base_url: str, runs: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    args = [
        "fanout",
        str(prompts),
        "--model",
        "vllm/m",
        "--base-url",
        base_url,
        "--runs-dir",
        str(runs),
        *extra,
    ]
    return subprocess.Popen(
        [sys.executable, "-m", "biasaudit", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, **(env or {})},
    )  # fmt: skip


def wait_until(condition, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def test_kill_9_then_resume_pays_for_no_response_twice(
    server: ServerProcess, tmp_path: Path
) -> None:
    """After SIGKILL, only requests still in flight at the kill may be asked again.

    Any answer that had reached the client was committed to the cache before the
    kill, so its prompt is never sent a second time; the prompts in flight (at
    most --concurrency of them) never came back and are the only ones re-sent.
    """
    prompts, runs = tmp_path / "prompts.jsonl", tmp_path / "runs"
    requests = write_prompts(prompts, 300)
    first = fanout(prompts, server.base_url, runs, "--concurrency", "8")
    wait_until(lambda: sum(server.received().values()) >= 80)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=10)

    with ResponseCache(runs / "cache.sqlite", readonly=True) as cache:
        keys = {
            r.cache_key(provider="vllm", model="m", base_url=server.base_url): r for r in requests
        }
        stored = cache.get_many(keys)
    answered_before_kill = {keys[k].messages[0]["content"] for k in stored}  # type: ignore[index]
    assert 60 <= len(answered_before_kill) < 300

    second = fanout(prompts, server.base_url, runs, "--concurrency", "8")
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert "300 answered, 0 failed" in out and f"{len(answered_before_kill)} from cache" in out

    received = server.received()
    assert set(received) == {f"prompt {i}" for i in range(300)}, "every prompt reached the server"
    asked_twice = {prompt for prompt, count in received.items() if count > 1}
    assert not asked_twice & answered_before_kill, "a cached answer was paid for again"
    assert len(asked_twice) <= 8 and max(received.values()) == 2

    third = fanout(prompts, server.base_url, runs, "--replay")
    out, _ = third.communicate(timeout=60)
    assert third.returncode == 0 and "300 from cache, 0 requests sent" in out


@pytest.mark.parametrize(
    ("signum", "said"),
    [(signal.SIGTERM, "interrupted (SIGTERM)"), (signal.SIGHUP, "the terminal closed")],
    ids=["SIGTERM", "SIGHUP"],
)
def test_a_signal_marks_the_run_interrupted_with_the_conventional_status(
    server: ServerProcess, tmp_path: Path, signum: signal.Signals, said: str
) -> None:
    """SIGTERM exited 130 (Ctrl-C's) and SIGHUP (a terminal closing) left the run marked
    "running" for ever: each now ends the run as Ctrl-C does, with 128 + its number."""
    prompts, runs = tmp_path / "prompts.jsonl", tmp_path / "runs"
    write_prompts(prompts, 400)
    process = fanout(prompts, server.base_url, runs, "--concurrency", "4")
    wait_until(lambda: sum(server.received().values()) >= 20)
    process.send_signal(signum)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 128 + signum, err
    assert said in err
    run_dir = Path(out.strip().splitlines()[-1].removeprefix("run: "))
    manifest = read_manifest(run_dir)
    assert manifest.status == "interrupted" and manifest.ended_at is not None
    assert 0 < manifest.counts.sent < 400
    assert manifest.error is not None and said.split("(")[-1].rstrip(")") in manifest.error


def test_api_key_never_reaches_cache_run_dir_or_output(tmp_path: Path) -> None:
    prompts, runs = tmp_path / "prompts.jsonl", tmp_path / "runs"
    write_prompts(prompts, 20)
    server = ServerProcess(tmp_path / "server.log", "--require-api-key", CANARY)
    try:
        ok = fanout(
            prompts,
            server.base_url,
            runs,
            "--api-key-env",
            "AUDIT_KEY",
            env={"AUDIT_KEY": CANARY, "BIASAUDIT_LOG": "debug"},
        )
        ok_out, ok_err = ok.communicate(timeout=60)
        assert ok.returncode == 0, ok_err
        bad = fanout(prompts, server.base_url, runs, "--api-key-env", "AUDIT_KEY", "--cache", str(tmp_path / "c2.sqlite"),
                     env={"AUDIT_KEY": CANARY + "-wrong", "BIASAUDIT_LOG": "debug"})  # fmt: skip
        bad_out, bad_err = bad.communicate(timeout=60)
        assert bad.returncode == 1 and "rejected the API key" in bad_err
    finally:
        server.stop()
    assert server.log.read_text().count("\n") >= 21, "the key did reach the server"
    assert "HTTP Request: POST" in ok_err, "debug logging was on, so the SDK's requests were logged"
    for text in (ok_out, ok_err, bad_out, bad_err):
        assert CANARY not in text
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "server.log"]
    assert any(p.name == "cache.sqlite" for p in written) and any(
        p.name == "manifest.json" for p in written
    )
    for path in written:
        assert CANARY.encode() not in path.read_bytes(), path


def test_sigterm_of_several_models_marks_every_run_interrupted(
    server: ServerProcess, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    process = subprocess.Popen(
        [sys.executable, "-m", "biasaudit", "run", "resume-screening", "-m", "vllm/a",
         "-m", "vllm/b", "--base-url", server.base_url, "--runs-dir", str(runs),
         "--concurrency", "4", "--jobs", "software-engineer", "--names-per-group", "20"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_until(lambda: sum(server.received().values()) >= 20)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 143, err
    assert "interrupted" in err
    run_dirs = [Path(line.removeprefix("run: ")) for line in out.splitlines()
                if line.startswith("run: ")]  # fmt: skip
    assert sorted(d.name.split("-allocation-")[1][:-5] for d in run_dirs) == ["vllm-a", "vllm-b"]
    for run_dir in run_dirs:
        manifest = read_manifest(run_dir)
        assert manifest.status == "interrupted" and manifest.ended_at is not None
        assert 0 < manifest.counts.sent < 960
