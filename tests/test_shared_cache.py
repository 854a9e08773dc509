"""Two processes, one cache: nothing in the cache is paid for twice.

Real ``python -m biasaudit`` processes against a loopback server process that
logs every request it receives.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from .test_kill_resume import ServerProcess, fanout, server, wait_until, write_prompts

__all__ = ["server"]  # the fixture, shared with test_kill_resume

N = 400


def test_two_runs_started_together_pay_for_each_prompt_once(
    server: ServerProcess, tmp_path: Path
) -> None:
    prompts, runs = tmp_path / "prompts.jsonl", tmp_path / "runs"
    write_prompts(prompts, N)
    first = fanout(prompts, server.base_url, runs, "--concurrency", "16")
    second = fanout(prompts, server.base_url, runs, "--concurrency", "16")
    for process in (first, second):
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        assert f"{N} answered, 0 failed" in out
    received = server.received()
    assert len(received) == N and max(received.values()) == 1, "a prompt was paid for twice"


def test_a_run_started_later_waits_for_what_the_first_has_in_flight(
    server: ServerProcess, tmp_path: Path
) -> None:
    prompts, runs = tmp_path / "prompts.jsonl", tmp_path / "runs"
    write_prompts(prompts, N)
    first = fanout(prompts, server.base_url, runs, "--concurrency", "16")
    wait_until(lambda: sum(server.received().values()) >= N // 4)
    second = fanout(prompts, server.base_url, runs, "--concurrency", "16")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert f"{N} answered, 0 failed" in out and f"{N} from cache, 0 requests sent" in out
    first.communicate(timeout=60)
    assert first.returncode == 0
    received = server.received()
    assert len(received) == N and max(received.values()) == 1, "a prompt was paid for twice"


def test_a_run_takes_over_the_requests_of_a_run_killed_mid_way(
    server: ServerProcess, tmp_path: Path
) -> None:
    prompts, runs = tmp_path / "prompts.jsonl", tmp_path / "runs"
    write_prompts(prompts, N)
    first = fanout(prompts, server.base_url, runs, "--concurrency", "8")
    wait_until(lambda: sum(server.received().values()) >= N // 4)
    second = fanout(prompts, server.base_url, runs, "--concurrency", "8")
    time.sleep(0.3)  # the second has found the first's leases and waits on them
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=10)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert f"{N} answered, 0 failed" in out
    received = server.received()
    assert len(received) == N
    assert sum(1 for n in received.values() if n > 1) <= 8, "more than the kill's in-flight re-sent"
