"""``--batch`` across processes: kill -9 between submit and results, restart, no second batch.

A resume-screening audit runs as a real ``python -m biasaudit`` process against
a loopback OpenAI server process (Batch API included) that logs every request;
bench/bench_batch.py runs the same checks at 20,160 prompts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from biasaudit.store.runs import BatchesFile

ROOT = Path(__file__).resolve().parent.parent
CANARY = "sk-canary-batch-2d7f4c9e1a6b"


def start_server(log: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.servers.openai_server", "--port", "0", "--log", str(log), *extra],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("PORT "), line
    return process, f"http://127.0.0.1:{int(line.split()[1])}/v1"


def audit(base_url: str, runs: Path, *extra: str) -> subprocess.Popen[str]:
    args = [
        "run", "resume-screening", "--names-per-group", "2", "--model", "openai/test-model",
        "--base-url", base_url, "--api-key-env", "AUDIT_KEY", "--runs-dir", str(runs),
        "--no-report", "--rounds", "200", "--concurrency", "32", *extra,
    ]  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "biasaudit", *args], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "AUDIT_KEY": CANARY},
    )  # fmt: skip


def paths_logged(log: Path) -> list[str]:
    return [line.split("\t", 1)[0] for line in log.read_text().splitlines()]


def recorded_batch_id(runs: Path) -> str | None:
    for path in runs.glob("*/batches.json"):
        batches = BatchesFile.model_validate_json(path.read_text()).batches
        if batches and batches[0].batch_id:
            return batches[0].batch_id
    return None


def test_kill_9_between_submit_and_results_then_rerun_submits_nothing_twice(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    server, base_url = start_server(
        log, "--batch-delay", "2", "--require-api-key", CANARY, "--responder", "hashed"
    )
    try:
        runs = tmp_path / "batch-runs"
        first = audit(base_url, runs, "--batch", "--batch-poll", "0.1")
        deadline = time.monotonic() + 60
        while recorded_batch_id(runs) is None:
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "no batch id recorded"
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=10)
        batch_id = recorded_batch_id(runs)
        assert paths_logged(log).count("/v1/batches") == 1

        second = audit(base_url, runs, "--batch", "--batch-poll", "0.1")
        out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
        logged = paths_logged(log)
        assert logged.count("/v1/batches") == 1, "the batch was submitted twice"
        assert logged.count("/v1/chat/completions") == 0, "no request went the normal path"
        run_dir = Path(out.strip().splitlines()[-1].removeprefix("run: "))
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["counts"]["batched"] == 384 and manifest["counts"]["sent"] == 0
        assert manifest["batches"][0]["batch_id"] == batch_id and manifest["batches"][0]["resumed"]

        direct = audit(base_url, tmp_path / "direct-runs")
        out_direct, err_direct = direct.communicate(timeout=120)
        assert direct.returncode == 0, err_direct
        assert paths_logged(log).count("/v1/chat/completions") == 384
    finally:
        server.terminate()
        server.communicate(timeout=10)
    direct_dir = Path(out_direct.strip().splitlines()[-1].removeprefix("run: "))
    batch_metrics = json.loads((run_dir / "metrics.json").read_text())
    direct_metrics = json.loads((direct_dir / "metrics.json").read_text())
    assert batch_metrics["groups"] == direct_metrics["groups"]
    assert len({group["rabbi"] for group in batch_metrics["groups"].values()}) > 1, "answers vary"
    scores = (run_dir / "scores.csv").read_text()
    assert scores == (direct_dir / "scores.csv").read_text()
    assert batch_metrics["subtasks"] == direct_metrics["subtasks"]
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.name != "server.log":
            assert CANARY.encode() not in path.read_bytes(), path
