"""Who holds a lease in the shared cache file, and whether that holder is still alive.

Several processes may share one cache (two runs of one audit, a run and its
``--workers`` children, a ``--batch`` run resumed while the first still polls).
A lease — on a request in flight (:meth:`biasaudit.cache.ResponseCache.claim`)
or on a batch intent (:mod:`biasaudit.batch`) — names its holder
``host:pid:token``: one token per holder, so one process may hold several
(each engine run, each batch runner). A holder is alive while it is
:func:`running`; one on this host whose process is gone is dead at once, and
one on another host counts as alive until its lease runs out.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
from collections.abc import Iterator

__all__ = ["holder_alive", "new_holder", "running"]

# The holders of this process that are running now (one that stopped is gone).
_RUNNING_HERE: set[str] = set()


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
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
