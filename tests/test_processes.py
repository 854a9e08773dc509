"""Lease holders: alive while their process (or, in this process, their runner) is."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

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
