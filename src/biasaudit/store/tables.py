"""CSV files biasaudit writes, safe to open in a spreadsheet, and read back exactly.

Names, labels and texts come from users and from models, and a spreadsheet
runs a cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return as a formula (``=HYPERLINK(...)``, ``+cmd|' /C calc'!A0``): CSV
injection. Every CSV biasaudit writes (the run's ``scores.csv``,
``items.csv``, ... and ``biasaudit export``) therefore follows OWASP's rule
("CSV Injection", OWASP Foundation): such a text cell is written with a
leading single quote, which spreadsheets show as text. A number (``-0.25``,
``+3``) is left as it is. JSON and Parquet keep the raw value.

:func:`read_csv` undoes it, so that biasaudit reads its own files back as they
were: a cell that began with quotes before a trigger gets one more quote on
the way out and loses one on the way in, so every text round-trips exactly.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["neutralise", "read_csv", "read_run_table", "restore", "write_csv"]

# Any number of quotes, then a character a spreadsheet starts a formula with.
_TRIGGER = re.compile(r"^'*[=+\-@\t\r]")
# A cell neutralise quoted: a quote, then any quotes, then a trigger.
_QUOTED = re.compile(r"^''*[=+\-@\t\r]")
_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")


def neutralise(value: Any) -> Any:
    """``value`` as a CSV cell a spreadsheet will not run: a quote before a text that
    starts like a formula (numbers and non-text values unchanged)."""
    if isinstance(value, str) and _TRIGGER.match(value) and not _NUMBER.match(value):
        return "'" + value
    return value


def restore(value: Any) -> Any:
    """The value :func:`neutralise` was given."""
    if isinstance(value, str) and _QUOTED.match(value):
        return value[1:]
    return value


def write_csv(frame: pd.DataFrame, target: str | Path | IO[str]) -> None:
    """``frame`` as CSV (no index, RFC 4180 line ends), every text cell and header
    neutralised (a column at a time, touching only the cells that need it)."""
    safe = frame.copy(deep=False)
    for column in safe.columns:
        values = safe[column]
        if not _texts(values):
            continue
        quoted = _matches(values, _TRIGGER)
        if quoted.any():
            quoted &= ~_matches(values, _NUMBER)
        if quoted.any():
            texts = values.astype(object)  # a copy: the caller's frame is left as it was
            texts[quoted] = "'" + texts[quoted]
            safe[column] = texts
    safe.columns = [neutralise(str(c)) if isinstance(c, str) else c for c in safe.columns]
    # CRLF ends a record (RFC 4180): a cell holding a carriage return or a newline is
    # then quoted, where with "\n" alone a lone "\r" would be written bare and split it.
    safe.to_csv(target, index=False, lineterminator="\r\n")


def read_csv(source: str | Path | IO[str], **options: Any) -> pd.DataFrame:
    """A CSV :func:`write_csv` wrote, with every text cell and header as it was."""
    import pandas as pd

    frame = pd.read_csv(source, **options)
    for column in frame.columns:
        values = frame[column]
        if not _texts(values):
            continue
        quoted = _matches(values, _QUOTED)
        if quoted.any():
            texts = values.astype(object)
            texts[quoted] = texts[quoted].str.slice(1)
            frame[column] = _as(texts, values.dtype)
    frame.columns = [restore(c) for c in frame.columns]
    return frame


def read_run_table(path: Path, columns: Collection[str] = ()) -> pd.DataFrame:
    """A table a run wrote (``scores.csv``, ``items.csv``, ...), with at least ``columns``.

    Raises
    ------
    UsageError
        The file is missing, cannot be read as CSV (cut short, edited), or lacks one of
        ``columns``: named, with the way to get it back.
    """
    import pandas as pd

    from biasaudit.errors import UsageError
    from biasaudit.store.runs import damaged_file

    try:
        frame = read_csv(path)
    except FileNotFoundError:
        raise UsageError(f"{path} is missing") from None
    except pd.errors.EmptyDataError:
        raise damaged_file(path, "empty") from None
    except UnicodeDecodeError:
        raise damaged_file(path, "not UTF-8 text") from None
    except OSError as error:
        raise damaged_file(path, str(error.strerror)) from None
    except ValueError:  # pandas' ParserError among them
        raise damaged_file(path, "not CSV: cut short, or edited") from None
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise damaged_file(path, f"no column '{missing[0]}'")
    return frame


def _matches(texts: pd.Series, pattern: re.Pattern[str]) -> pd.Series:
    """Whether each cell is a text that ``pattern`` matches at its start."""
    try:
        return texts.str.match(pattern.pattern, na=False).astype(bool)
    except AttributeError:  # no text in the column at all (flags, numbers as objects)
        import pandas as pd

        return pd.Series(False, index=texts.index)


def _as(texts: pd.Series, dtype: Any) -> pd.Series:
    """``texts`` (object) back in a text column's own dtype."""
    import pandas as pd

    if isinstance(dtype, pd.CategoricalDtype):
        return texts.astype("category")
    return texts.astype(dtype)


def _texts(column: pd.Series) -> bool:
    """Whether a column may hold text: object, string or categorical."""
    import pandas as pd

    dtype = column.dtype
    return bool(
        pd.api.types.is_object_dtype(dtype)
        or pd.api.types.is_string_dtype(dtype)
        or isinstance(dtype, pd.CategoricalDtype)
    )
