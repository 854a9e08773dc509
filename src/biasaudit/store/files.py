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

from biasaudit.errors import UsageError

__all__ = ["copy_examples", "replaced_together", "write_bytes", "write_text"]


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


def copy_examples(folder: Path) -> tuple[list[str], list[str]]:
    """Copy the shipped examples into ``folder`` (made if missing): the files copied,
    and those left as they were because a file of that name with other contents is
    already there (a user's edits are never overwritten). A file already there with the
    same contents counts as copied, so copying twice is copying once.

    Raises
    ------
    UsageError
        ``folder`` is a file, or cannot be written (named, with the reason).
    """
    import filecmp

    from biasaudit.textfiles import EXAMPLES_DIR

    copied: list[str] = []
    kept: list[str] = []
    try:
        for source in sorted(EXAMPLES_DIR.rglob("*")):
            if not source.is_file() or "__pycache__" in source.parts:
                continue
            name = source.relative_to(EXAMPLES_DIR).as_posix()
            target = folder / name
            if target.exists() and not filecmp.cmp(source, target, shallow=False):
                kept.append(name)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():  # whole or not at all: a rerun never keeps half a file
                write_bytes(target, source.read_bytes())
            copied.append(name)
    except OSError as error:
        raise UsageError(
            f"{folder}: cannot copy the examples there ({error.strerror or error})"
        ) from error
    return copied, kept
