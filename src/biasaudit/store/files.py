"""Files written for a user (summaries, reports, exports, schemas), replaced whole or not
at all.

Each file is written under a temporary name beside it and renamed onto its own name
only once every file of the set is whole, so that a full disk, a killed process or a
write error half-way leaves the earlier files as they were and no partial file behind
(a rename within one folder is atomic on POSIX: ``os.replace``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = ["replaced_together", "write_bytes", "write_text"]


@contextmanager
def replaced_together(paths: Sequence[Path]) -> Iterator[list[Path]]:
    """Temporary paths to write ``paths``' contents to, renamed onto ``paths`` together
    when the block ends without an error; removed, and ``paths`` untouched, when it
    raises."""
    temporary: list[Path] = []
    try:
        for path in paths:
            handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            os.close(handle)
            temporary.append(Path(name))
            os.chmod(name, 0o666 & ~_umask())  # as open() would make it, not mkstemp's 0600
        yield temporary
        for written, path in zip(temporary, paths, strict=True):
            os.replace(written, path)
    except BaseException:
        for written in temporary:
            written.unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text(path: Path, text: str) -> None:
    """``path`` replaced by ``text`` (UTF-8), whole or not at all."""
    with replaced_together([path]) as (written,):
        written.write_text(text, encoding="utf-8")


def write_bytes(path: Path, data: bytes) -> None:
    """``path`` replaced by ``data``, whole or not at all."""
    with replaced_together([path]) as (written,):
        written.write_bytes(data)
