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


def test_a_run_frozen_past_its_lease_checks_again_before_sending(
    server: ServerProcess, tmp_path: Path
) -> None:
    """Ctrl-Z, SIGSTOP or a laptop lid for longer than the lease: the second run takes the
    frozen one's requests over and answers them; when the first resumes, it claims each
    request again before sending it, and pays for none of them a second time (only what
    it had on the wire at the freeze, or had received and not yet written, which the
    other cannot see, can be paid twice: as when a run is killed)."""
    prompts, runs = tmp_path / "prompts.jsonl", tmp_path / "runs"
    write_prompts(prompts, N)
    env = {"BIASAUDIT_LEASE_SECONDS": "2"}
    first = fanout(prompts, server.base_url, runs, "--concurrency", "4", env=env)
    wait_until(lambda: sum(server.received().values()) >= N // 8)
    first.send_signal(signal.SIGSTOP)
    try:
        for _ in range(3):
            second = fanout(prompts, server.base_url, runs, "--concurrency", "16", env=env)
            out, err = second.communicate(timeout=120)
            if second.returncode == 0 or "stayed locked" not in err:
                break
            # The freeze fell inside one of the first run's write transactions (a commit, a
            # lease renewal): its lock stays while it is frozen. The second run says so and
            # names it; let the first finish that transaction and freeze it again.
            assert f"process {first.pid}, which sends for this cache, is stopped" in err
            assert f"kill -CONT {first.pid}" in err
            first.send_signal(signal.SIGCONT)
            time.sleep(0.05)
            first.send_signal(signal.SIGSTOP)
        assert second.returncode == 0, err
        assert f"{N} answered, 0 failed" in out
    finally:
        first.send_signal(signal.SIGCONT)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert f"{N} answered, 0 failed" in out
    received = server.received()
    assert len(received) == N
    twice = sum(1 for n in received.values() if n > 1)
    assert twice <= 8, f"{twice} prompts paid twice (more than the freeze had in hand)"
