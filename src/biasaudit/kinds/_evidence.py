"""What a kind's evidence page holds, and the run files every kind reads for it.

A kind's ``evidence.py`` exports ``evidence(run_dir) -> Evidence | None``: the units
and answers behind its figures as :class:`View` s (tables of rows), and the links the
report gives into them (:class:`Evidence.links`). ``reports/evidence.py`` writes them
as one self-contained page; the page knows nothing of kinds: a view names its columns,
which of them hold long text (folded), which columns its drop-downs filter by, its
first sort, and which column marks a row as flagged (irregular, refused, unread).

A link's address is ``evidence.html#view=ID`` followed by ``&COLUMN=VALUE`` filters:
the page shows exactly the rows whose columns hold those values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlencode

__all__ = [
    "Evidence",
    "RunRecord",
    "View",
    "answer_text",
    "group_categories",
    "group_labels",
    "impact_flagged",
    "link",
    "messages_text",
    "number",
    "read_answers",
    "read_run_record",
    "read_sent",
    "text",
]


@dataclass(frozen=True)
class View:
    """One table of the page: ``columns`` (key, heading) of ``rows`` (dicts by key)."""

    id: str
    title: str
    about: str
    columns: Sequence[tuple[str, str]]
    rows: Sequence[Mapping[str, Any]]
    long: Sequence[str] = ("prompt",)
    """Columns of long text (prompts, answers, essays): folded, opened on a click."""
    filters: Sequence[str] = ("group",)
    """The columns the view's drop-downs filter by, one drop-down each."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """How the ``group`` drop-down names a group (``B_M`` -> ``B_M Black male``)."""
    sort: str | None = None
    descending: bool = False
    flag: str | None = None
    """A column that is non-empty on a row that needs a second look (irregular,
    refused, unread): the page's "flagged rows only" box keeps those."""
    marks: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Words to mark in the long columns, by mark: ``{"m": ["he", ...]}`` shows every
    whole-word "he" (any case) as ``he`` highlighted and tagged ``[m]``."""


@dataclass(frozen=True)
class Evidence:
    """A run's evidence: its views, a sentence on what they hold, and the report's
    links into them (text, address within the page: ``#view=...``)."""

    about: str
    views: Sequence[View]
    links: Sequence[tuple[str, str]] = ()
    prompts_verified: bool = False
    units: Mapping[str, str] = field(default_factory=dict)
    """The report's figures that link to their units, by the label the report's tables
    give them (a group, an item, an occupation; or a row's labels joined by " / ",
    ``explicit / race: black``): the address of the rows behind them. A table cell of
    the report holding one of these labels becomes that link."""


def link(view: str, **filters: str) -> str:
    """The page address of ``view`` filtered to rows whose columns hold ``filters``."""
    return "#" + urlencode({"view": view, **filters})


def group_labels(metrics: Mapping[str, Any]) -> dict[str, str]:
    """How a drop-down names each group of a run's ``metrics.json`` (``B_M Black male``)."""
    return {
        str(group): f"{group} {name}" if name and name != group else str(group)
        for group, name in dict(metrics.get("group_names") or {}).items()
    }


def group_categories(metrics: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Each group's value of every other category of a run's impact ratios (``race``,
    ``sex``), as its display name gives them (``B_M`` named ``Black male``: race
    ``Black``, sex ``male``), where the name's words are exactly those values; {} where
    they are not (a task of your own)."""
    values: dict[str, set[str]] = {}
    for row in metrics.get("impact", []):
        if row.get("category") != "group":
            values.setdefault(str(row["category"]), set()).add(str(row["value"]))
    if not values:
        return {}
    found: dict[str, dict[str, str]] = {}
    for group, name in dict(metrics.get("group_names") or {}).items():
        words = str(name).split(" ")
        own = {}
        for category, known in values.items():
            # a category value is a run of the name's words (``Native American``)
            hits = [v for v in known if f" {v} " in f" {' '.join(words)} "]
            if len(hits) != 1:
                return {}
            own[category] = hits[0]
        found[str(group)] = own
    return found


def impact_flagged(metrics: Mapping[str, Any]) -> list[str]:
    """The groups of a run's ``metrics.json`` whose impact ratio is beyond noise, as its
    stored verdict says (any k), in order."""
    return list(dict.fromkeys(
        str(row["value"]) for row in metrics.get("impact", [])
        if row.get("category") == "group" and row.get("beyond_noise")
    ))  # fmt: skip


def text(value: Any) -> str:
    """A cell as text: empty for None and NaN."""
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


def number(value: Any) -> float | None:
    """A cell as a number, None for what is none (empty, NaN, not a number)."""
    try:
        found = float(value)
    except (TypeError, ValueError):
        return None
    return None if found != found else found


def answer_text(record: Any) -> str:
    """A response record's answer as the model gave it (every replicate, joined), or
    why there is none."""
    if record.error:
        return f"(no answer: {record.error})"
    if record.refusal:
        return f"(refused: {record.refusal})"
    return record.text if record.text is not None else " | ".join(record.texts or [])


def messages_text(request: Mapping[str, Any]) -> str:
    """A request as the model saw it: each message under its role, or the prompt."""
    if request.get("messages"):
        return "\n\n".join(
            f"[{m.get('role', '')}]\n{m.get('content', '')}" for m in request["messages"]
        )
    return str(request.get("prompt", ""))


def read_answers(run_dir: Path) -> dict[str, Any]:
    """The run's response records by request id (the first of each: a retried request
    keeps the answer the figures read)."""
    from biasaudit.store.runs import read_responses

    found: dict[str, Any] = {}
    if (run_dir / "responses.jsonl").is_file():
        for response in read_responses(run_dir):
            found.setdefault(response.id, response)
    return found


def read_sent(run_dir: Path) -> tuple[dict[str, str], bool]:
    """Each request's prompt as sent (:func:`messages_text`) by request id, from
    ``prompts.jsonl.gz``; and whether every one checks against the cache key it was
    sent under (False where the run kept none)."""
    from biasaudit.store.runs import PROMPTS_FILE, prompt_sent, read_prompts

    if not (run_dir / PROMPTS_FILE).is_file():
        return {}, False
    header, records = read_prompts(run_dir)
    found: dict[str, str] = {}
    verified = bool(records)
    for (request_id, _), record in records.items():
        if request_id not in found:
            found[request_id] = messages_text(record.request)
        verified = verified and prompt_sent(header, record)
    return found, verified


class RunRecord(NamedTuple):
    """What a kind's evidence reads of a run: its table of units, its ``metrics.json``
    (as JSON), its answers by request id, its prompts as sent, and whether every one of
    them checks against its cache key."""

    table: Any
    metrics: dict[str, Any]
    answers: dict[str, Any]
    sent: dict[str, str]
    verified: bool


def read_run_record(run_dir: Path, name: str, columns: Sequence[str]) -> RunRecord | None:
    """The run's ``name`` table (its ``columns`` required), metrics, answers and prompts;
    None where the run has no such table (it stopped before writing it)."""
    from biasaudit.store.runs import read_run_json
    from biasaudit.store.tables import read_run_table

    if not (run_dir / name).is_file():
        return None
    metrics = (
        read_run_json(run_dir / "metrics.json") if (run_dir / "metrics.json").is_file() else {}
    )
    sent, verified = read_sent(run_dir)
    return RunRecord(read_run_table(run_dir / name, tuple(columns)), metrics,
                     read_answers(run_dir), sent, verified)  # fmt: skip
