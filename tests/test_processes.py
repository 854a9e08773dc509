"""Lease holders: alive while their process (or, in this process, their runner) is."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from biasaudit.processes import holder_alive, new_holder, running


def test_a_holder_is_alive_while_its_process_or_runner_is() -> None:
    host = socket.gethostname()
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    assert not holder_alive(f"{host}:{finished.pid}:aa"), "a dead process holds nothing"
    assert holder_alive(f"elsewhere-{host}:{finished.pid}:aa"), "another host: assume alive"
    mine = new_holder()
    assert mine.startswith(f"{host}:{os.getpid()}:")
    assert not holder_alive(mine), "a holder of this process that has stopped"
    with running(mine):
        assert holder_alive(mine)
    assert not holder_alive(mine)


def test_on_windows_a_holders_process_is_asked_about_never_signalled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Windows' os.kill(pid, 0) would end the process it asks about (TerminateProcess):
    there a holder's process is looked up, never signalled."""
    import biasaudit.processes as processes

    asked: list[int] = []

    def looked_up(pid: int) -> bool:
        asked.append(pid)
        return False

    def kill(pid: int, signum: int) -> None:
        raise AssertionError(f"os.kill({pid}, {signum}) on Windows ends that process")

    monkeypatch.setattr(processes.sys, "platform", "win32")
    monkeypatch.setattr(processes, "_windows_process_alive", looked_up)
    monkeypatch.setattr(processes.os, "kill", kill)
    assert not holder_alive(f"{socket.gethostname()}:4242:aa")
    assert asked == [4242]


def test_a_stopped_holder_is_named_a_running_one_is_not() -> None:
    import signal
    import socket
    import subprocess
    import sys

    from biasaudit.processes import stopped_holders

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        holder = f"{socket.gethostname()}:{child.pid}:ab12"
        assert stopped_holders([holder]) == []
        child.send_signal(signal.SIGSTOP)
        for _ in range(500):  # the kernel stops it once it is scheduled: a loaded host waits
            if stopped_holders([holder]):
                break
            time.sleep(0.01)
        assert stopped_holders([holder, "elsewhere:1:x", "junk"]) == [child.pid]
    finally:
        child.kill()
        child.wait()
