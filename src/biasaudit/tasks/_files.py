"""Where the shipped data and prompts are, and reading the CSV files tasks take."""

from __future__ import annotations

import io
from importlib import resources
from pathlib import Path

import pandas as pd

from biasaudit.errors import InputError, UsageError
from biasaudit.textfiles import read_text

__all__ = ["DATA_DIR", "PROMPTS_DIR", "read_table", "require_columns", "require_values"]

_PACKAGE = Path(str(resources.files("biasaudit")))
DATA_DIR = _PACKAGE / "data"
PROMPTS_DIR = _PACKAGE / "prompts"


def read_table(path: str | Path, what: str) -> pd.DataFrame:
    """A CSV file as text columns with surrounding spaces trimmed.

    Raises
    ------
    UsageError
        The file cannot be read, is not CSV, or has no rows.
    """
    text = read_text(path, what)
    try:
        frame = pd.read_csv(
            io.StringIO(text), dtype=str, keep_default_na=False, skipinitialspace=True
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise UsageError(f"{what} {path} is not a readable CSV file: {error}") from None
    if frame.empty:
        raise UsageError(f"{what} {path} has no rows")
    frame.columns = [str(column).strip() for column in frame.columns]
    return frame.apply(lambda column: column.str.strip())


def require_columns(
    frame: pd.DataFrame, columns: list[str], *, what: str, path: str | Path
) -> None:
    """Raise unless ``frame`` has every one of ``columns``, naming the first missing one."""
    for column in columns:
        if column not in frame.columns:
            present = ", ".join(frame.columns)
            raise UsageError(f"{what} {path}: no column '{column}' (columns: {present})")


def require_values(frame: pd.DataFrame, columns: list[str], *, what: str, path: str | Path) -> None:
    """Raise unless every row has a value in each of ``columns``, naming the first empty cell.

    Lines count the header as line 1 (a cell holding a line break shifts them).
    """
    for column in columns:
        empty = frame[column] == ""
        if empty.any():
            row = int(empty.to_numpy().argmax())
            raise InputError(str(path), row + 2, column, f"empty: every {what} row needs one")
