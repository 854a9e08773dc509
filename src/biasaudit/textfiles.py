"""Reading the text files users give: specs, prompts, items, prompt lists, tables.

Every one is UTF-8 (a byte-order mark is allowed). A file in another encoding
(Latin-1, Windows-1252) is refused with the line and column of the first byte
that is not UTF-8, before anything is sent: guessing an encoding could change
the words a model is shown. YAML files may not repeat a key (the last one
would silently win), and a YAML error names its line. Messages never echo a
value in full (:func:`brief`): an input can be arbitrarily large.
"""

from __future__ import annotations

import functools
import io
import json
import reprlib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biasaudit.errors import InputError, UsageError

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DATA_DIR",
    "EXAMPLES_DIR",
    "PROMPTS_DIR",
    "a_run",
    "brief",
    "env_number",
    "json_object",
    "load_yaml",
    "read_table",
    "read_text",
    "require_columns",
    "require_values",
    "text_lines",
]

_BRIEF = reprlib.Repr()
_BRIEF.maxstring = _BRIEF.maxother = 60
_BRIEF.maxlist = _BRIEF.maxtuple = _BRIEF.maxdict = _BRIEF.maxset = 4
_BRIEF.maxlevel = 2


def a_run(kind: str) -> str:
    """``an allocation run``, ``a grade-score run``: a run of ``kind`` in a sentence."""
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind} run"


def brief(value: object) -> str:
    """``repr(value)``, cut short: bounded in length and depth, whatever the value holds."""
    return _BRIEF.repr(value)


# The largest file of each sort biasaudit reads: a spec or prompt is written by hand, a
# data file may hold a million rows; beyond these, a file is a mistake (or an attack),
# refused before it is read into memory.
MOST_YAML_BYTES = 1 << 20  # 1 MiB
MOST_DATA_BYTES = 1 << 30  # 1 GiB
# The longest cell of a table, and the longest label (a group, a name, a subtask...):
# one is echoed in every table and message that names it.
MOST_CELL_CHARS = 100_000
MOST_LABEL_CHARS = 200
# The longest prompt text a line may hold: about 2 million tokens at 4 characters a
# token, more than any model's context, so that no prompt is planned, priced and
# filled a hundred times over that no model could take.
MOST_PROMPT_CHARS = 8_000_000
_LABEL_COLUMNS = frozenset({
    "group", "name", "subtask", "candidate", "candidate_id", "pool", "order", "item",
    "item_id", "occupation", "context", "majority", "race", "sex", "model", "answer",
})  # fmt: skip


def read_text(path: str | Path, what: str, *, most: int = MOST_DATA_BYTES) -> str:
    """The whole file as text, if it is at most ``most`` bytes.

    Raises
    ------
    UsageError
        The file cannot be read, or is larger than ``most`` bytes.
    InputError
        It is not UTF-8 (naming the line and column of the first bad byte).
    """
    try:
        size = Path(path).stat().st_size
    except OSError as error:
        raise UsageError(f"cannot read {what} {path}: {error.strerror or error}") from None
    if size > most:
        raise UsageError(
            f"{what} {path} is {_size(size)}; a {what} file may be at most {_size(most)}: "
            "is it the file you meant?"
        )
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise UsageError(f"cannot read {what} {path}: {error.strerror or error}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise _not_utf8(path, data, error) from None


def text_lines(path: str | Path, what: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a text file, counting from 1."""
    yield from enumerate(read_text(path, what).splitlines(), start=1)


def load_yaml(path: str | Path, what: str) -> Any:
    """A YAML file's contents, read safely, with no key given twice in one mapping.

    Raises
    ------
    UsageError
        Unreadable, not UTF-8, not YAML, or a key given twice (with its line).
    """
    import yaml  # here: a fan-out reads no YAML and need not pay for importing it

    stream = io.StringIO(read_text(path, what, most=MOST_YAML_BYTES))
    stream.name = str(path)  # what PyYAML's marks call the file
    try:
        return yaml.load(stream, Loader=_unique_key_loader())
    except yaml.YAMLError as error:
        raise UsageError(f"{what} {path} is not valid YAML: {_described(error)}") from None


def _not_utf8(path: str | Path, data: bytes, error: UnicodeDecodeError) -> InputError:
    before = data[: error.start]
    line = before.count(b"\n") + 1
    column = error.start - (before.rfind(b"\n") + 1) + 1
    byte = data[error.start : error.start + 1].hex()
    return InputError(
        str(path), line, None,
        f"not UTF-8 text (byte 0x{byte} at column {column}); save the file as UTF-8",
    )  # fmt: skip


@functools.cache
def _unique_key_loader() -> Any:
    """PyYAML's safe loader, refusing a key given twice in one mapping."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):  # type: ignore[misc]
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the base class reports it
                    break
                line = key_node.start_mark.line + 1
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {brief(key)} given twice (lines {first} and {line})",
                        key_node.start_mark,
                    )  # fmt: skip
                seen[key] = line
            mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
            return mapping

    return UniqueKeyLoader


def _described(error: Exception) -> str:
    """Where and what, on one line: ``line 3, column 1: key 'task' given twice ...``."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None)
    if mark is None or problem is None:
        return " ".join(str(error).split())
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


# Where the shipped data and prompts are, and reading the CSV files tasks take.
_PACKAGE = Path(str(resources.files("biasaudit")))
DATA_DIR = _PACKAGE / "data"
PROMPTS_DIR = _PACKAGE / "prompts"
EXAMPLES_DIR = DATA_DIR / "examples"
"""The files the README and the docs use (``biasaudit examples`` copies them out)."""


def read_table(path: str | Path, what: str) -> pd.DataFrame:
    """A CSV file as text columns with surrounding spaces trimmed.

    Raises
    ------
    UsageError
        The file cannot be read, is not CSV, or has no rows.
    """
    import pandas as pd  # only the audits read tables; fanout starts without pandas

    text = read_text(path, what)
    _unique_header(text, path)
    _same_field_counts(text, path)
    try:
        frame = pd.read_csv(
            io.StringIO(text), dtype=str, keep_default_na=False, skipinitialspace=True
        )
    except pd.errors.EmptyDataError:
        raise UsageError(
            f"{what} {path} is empty: a CSV file with a header row is expected"
        ) from None
    except pd.errors.ParserError as error:
        raise _unreadable_csv(path, what, str(error)) from None
    if frame.empty:
        raise UsageError(f"{what} {path} has no rows")
    frame.columns = [str(column).strip() for column in frame.columns]
    _comma_separated(frame, path)
    frame = frame.apply(lambda column: column.str.strip())
    _bounded_cells(frame, path)
    return frame


def _same_field_counts(text: str, path: str | Path) -> None:
    """Refuse any row whose number of fields differs from the header's, naming its line.

    pandas does so only from the second data row: where the first has one field more
    (an unquoted comma in a name), it takes the first column for an index and reads
    every column of the file shifted; where a row has fewer, it fills them in."""
    import csv

    reader = csv.reader(io.StringIO(text), skipinitialspace=True)
    try:
        _check_field_counts(reader, path)
    except csv.Error:  # a cell beyond csv's own size limit: named by _bounded_cells
        return


def _check_field_counts(reader: Iterator[list[str]], path: str | Path) -> None:
    header = next(reader, None)
    if header is None:
        return
    line = reader.line_num  # type: ignore[attr-defined]
    for row in reader:
        if row and len(row) != len(header):
            more = len(row) > len(header)
            raise InputError(
                str(path), line + 1, None,
                f"{len(row)} fields where the header has {len(header)}: "
                + ("a value holding a comma needs double quotes around it" if more
                   else "a value is missing (an empty one is still separated by a comma)"),
            )  # fmt: skip
        line = reader.line_num  # type: ignore[attr-defined]


def _unreadable_csv(path: str | Path, what: str, said: str) -> UsageError:
    """pandas' parser error as the line of the file it names, in words (its own message
    counts records and rows differently, and names its C tokenizer)."""
    import re

    fields = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", said)
    if fields:
        wanted, line, saw = map(int, fields.groups())
        return InputError(
            str(path), line, None,
            f"{saw} fields where the header has {wanted}: a value holding a comma needs "
            "double quotes around it",
        )  # fmt: skip
    quote = re.search(r"EOF inside string starting at row (\d+)", said)
    if quote:
        return InputError(
            str(path), int(quote.group(1)) + 1, None,
            "a double quote opened here is never closed (a quote inside a quoted value "
            'is written twice: "")',
        )  # fmt: skip
    return UsageError(f"{what} {path} is not a readable CSV file: {' '.join(said.split())}")


def _comma_separated(frame: pd.DataFrame, path: str | Path) -> None:
    """Refuse a table whose header is one column holding semicolons or tabs: a file
    saved with another separator (a spreadsheet set to a European locale does that),
    which would otherwise be refused for a column it does have."""
    if len(frame.columns) != 1:
        return
    header = str(frame.columns[0])
    for separator, called in ((";", "semicolons"), ("\t", "tabs")):
        if separator in header:
            raise InputError(
                str(path), 1, None,
                f"the header is separated by {called}, not commas: save the file as "
                "comma-separated CSV",
            )  # fmt: skip


def env_number(name: str, default: float, *, above: float | None = None) -> float:
    """The number the environment variable ``name`` holds, else ``default``.

    Raises
    ------
    UsageError
        It holds something other than a finite number (above ``above``, where given),
        named with what it holds.
    """
    import math
    import os

    given = os.environ.get(name, "").strip()
    if not given:
        return default
    try:
        value = float(given)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or (above is not None and value <= above):
        wanted = "a number" if above is None else f"a number above {above:g}"
        raise UsageError(f"{name}={brief(given)}: expected {wanted} (or unset: {default:g})")
    return value


def label_problem(label: str) -> str | None:
    """What is wrong with ``label`` as an id or a label a user gave, or None: longer than
    :data:`MOST_LABEL_CHARS`, or holding a NUL byte."""
    if len(label) > MOST_LABEL_CHARS:
        return (
            f"{len(label):,} characters, {brief(label)}; a label may have at most "
            f"{MOST_LABEL_CHARS:,}"
        )
    if "\0" in label:
        return f"{brief(label)} holds a NUL byte (a binary or damaged file?)"
    return None


def _bounded_cells(frame: pd.DataFrame, path: str | Path) -> None:
    """Refuse a cell longer than :data:`MOST_CELL_CHARS`, or a label (a group, a name...)
    longer than :data:`MOST_LABEL_CHARS`, naming its line and column.

    Lines count the header as line 1 (a cell holding a line break shifts them).
    """
    for column in frame.columns:
        lengths = frame[column].str.len().to_numpy()
        if not lengths.size:
            continue
        nul = frame[column].str.contains("\0", regex=False).to_numpy()
        if nul.any():
            row = int(nul.argmax())
            raise InputError(
                str(path), row + 2, column,
                f"{brief(frame[column].iloc[row])} holds a NUL byte (a binary or damaged file?)",
            )  # fmt: skip
        most = MOST_LABEL_CHARS if column in _LABEL_COLUMNS else MOST_CELL_CHARS
        row = int(lengths.argmax())
        if lengths[row] > most:
            raise InputError(
                str(path), row + 2, column,
                f"{lengths[row]:,} characters, {brief(frame[column].iloc[row])}; a "
                f"{'label' if most == MOST_LABEL_CHARS else 'cell'} may have at most "
                f"{most:,}",
            )  # fmt: skip


def _size(size: int) -> str:
    """``1.5 MiB``: a byte count as a person reads it."""
    if size < 1024:
        return f"{size:,} bytes"
    scaled = float(size)
    for unit in ("KiB", "MiB", "GiB"):
        scaled /= 1024
        if scaled < 1024 or unit == "GiB":
            break
    return f"{scaled:.3g} {unit}"


def _unique_header(text: str, path: str | Path) -> None:
    """Refuse a header that names a column twice: one of the two would silently win.

    Raises
    ------
    InputError
        Line 1, naming the column.
    """
    import csv

    try:
        header = next(csv.reader(io.StringIO(text, newline="")), [])
    except csv.Error:
        return  # pandas names what is wrong with the file
    seen: set[str] = set()
    for name in (cell.strip() for cell in header):
        if name in seen and name:
            raise InputError(
                str(path), 1, name, "named twice in the header: say which one is meant"
            )
        seen.add(name)


def require_columns(
    frame: pd.DataFrame, columns: list[str], *, what: str, path: str | Path
) -> None:
    """Raise unless ``frame`` has every one of ``columns``, naming every missing one at
    once (one try finds them all)."""
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        present = ", ".join(str(c) for c in frame.columns)
        present = present if len(present) <= 300 else present[:300] + "..."
        names = ", ".join(f"'{column}'" for column in missing)
        raise UsageError(
            f"{what} {path}: no column {names} (columns: {present})"
            if len(missing) == 1
            else f"{what} {path}: no columns {names} (columns: {present})"
        )


def require_values(frame: pd.DataFrame, columns: list[str], *, what: str, path: str | Path) -> None:
    """Raise unless every row has a value in each of ``columns``, naming the first empty cell.

    Lines count the header as line 1 (a cell holding a line break shifts them).
    """
    for column in columns:
        empty = frame[column] == ""
        if empty.any():
            row = int(empty.to_numpy().argmax())
            raise InputError(str(path), row + 2, column, f"empty: every {what} row needs one")


def json_object(
    name: str, number: int, line: str, *, most: int = MOST_CELL_CHARS
) -> dict[str, Any]:
    """Line ``number`` of the JSONL file ``name`` as a JSON object, none of whose texts
    is longer than ``most`` characters (a scenario's template, an item's option; a
    fan-out's prompt may hold :data:`MOST_PROMPT_CHARS`).

    Raises
    ------
    InputError
        The line is not JSON, is nested too deeply, is not an object, or holds a text
        longer than ``most``.
    """
    try:
        data = json.loads(line)
    except json.JSONDecodeError as error:
        raise InputError(name, number, None, f"not valid JSON ({error.msg})") from None
    except RecursionError:
        raise InputError(name, number, None, "not valid JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise InputError(name, number, None, "each line must be a JSON object")
    for field, text in _texts_of(data):
        if len(text) > most:
            raise InputError(
                name, number, field,
                f"{len(text):,} characters, more than the {most:,} a text here may hold"
                + (" (about 2 million tokens: longer than any model's context)"
                   if most == MOST_PROMPT_CHARS else ""),
            )  # fmt: skip
    return data


def _texts_of(value: Any, field: str | None = None) -> Iterator[tuple[str | None, str]]:
    """Every text in a parsed JSON value, with the top-level field it sits under."""
    if isinstance(value, str):
        yield field, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _texts_of(item, field if field is not None else str(key))
    elif isinstance(value, list):
        for item in value:
            yield from _texts_of(item, field)
