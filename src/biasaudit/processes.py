"""Other processes: who holds a lease in the shared cache and whether it is alive, and
children that must not outlive biasaudit.

Several processes may share one cache (two runs of one audit, a run and its
``--workers`` children, a ``--batch`` run resumed while the first still polls).
A lease — on a request in flight (:meth:`biasaudit.store.cache.ResponseCache.claim`)
or on a batch intent (:mod:`biasaudit.engine.batch`) — names its holder
``host:pid:token``: one token per holder, so one process may hold several
(each engine run, each batch runner). A holder is alive while it is
:func:`running`; one on this host whose process is gone is dead at once, and
one on another host counts as alive until its lease runs out.

A child biasaudit starts (a fan-out worker, a local model's server) asks the
kernel to end it when biasaudit dies (:func:`die_with_parent`), ``kill -9``
included: left behind, it would go on sending requests nobody reads.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import signal
import socket
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["die_with_parent", "holder_alive", "new_holder", "running", "stopped_holders"]

# The holders of this process that are running now (one that stopped is gone).
_RUNNING_HERE: set[str] = set()
_PR_SET_PDEATHSIG = 1
_PROCESS_QUERY_LIMITED_INFORMATION, _ERROR_ACCESS_DENIED, _STILL_ACTIVE = 0x1000, 5, 259


def new_holder() -> str:
    """A fresh holder name for this process: ``host:pid:token``."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


@contextlib.contextmanager
def running(holder: str) -> Iterator[str]:
    """Count ``holder`` as alive for the duration of the block."""
    _RUNNING_HERE.add(holder)
    try:
        yield holder
    finally:
        _RUNNING_HERE.discard(holder)


def holder_alive(holder: str) -> bool:
    """Whether ``holder`` may still be running (on another host: assume so)."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return True
    if int(pid) == os.getpid():
        return holder in _RUNNING_HERE
    if sys.platform == "win32":  # there os.kill(pid, 0) ends the process it asks about
        return _windows_process_alive(int(pid))
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _windows_process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs, asked of Windows without touching it (its exit code
    is STILL_ACTIVE while it runs; one that cannot be opened for lack of rights exists)."""
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
    kernel32.OpenProcess.restype = ctypes.c_void_p  # a HANDLE, pointer-wide
    kernel32.GetExitCodeProcess.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_ulong)]
    kernel32.CloseHandle.argtypes = [ctypes.c_void_p]
    handle = kernel32.OpenProcess(_PROCESS_QUERY_LIMITED_INFORMATION, False, pid)
    if not handle:
        return bool(ctypes.get_last_error() == _ERROR_ACCESS_DENIED)  # type: ignore[attr-defined,unused-ignore]
    try:
        code = ctypes.c_ulong()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return True  # cannot tell: alive, so its lease is waited out, never stolen
        return code.value == _STILL_ACTIVE
    finally:
        kernel32.CloseHandle(handle)


def stopped_holders(holders: Iterable[str]) -> list[int]:
    """The processes of this host among ``holders`` that are stopped (Ctrl-Z, SIGSTOP, a
    debugger): read from ``/proc`` on Linux, none elsewhere."""
    found = set()
    for holder in holders:
        host, _, rest = holder.partition(":")
        pid = rest.partition(":")[0]
        if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        if stat.rpartition(")")[2].split()[:1] in (["T"], ["t"]):
            found.add(int(pid))
    return sorted(found)


def die_with_parent() -> None:
    """On Linux, have the kernel send this process SIGTERM when its parent dies, even by kill -9.

    Called in a child (a worker as it starts; a local model's server before it
    runs): a child left behind would go on sending, and paying, for nobody.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
