"""What every report shares: number formats, the "what was audited" table, the replay commands."""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from biasaudit.render.document import Code, Paragraph, Section, Table
from biasaudit.store.runs import Manifest, read_run_json

__all__ = [
    "audited_section",
    "interval",
    "p_value",
    "percent",
    "plain",
    "points",
    "read_spec",
    "replay_section",
    "signed",
]


def _missing(value: float | None) -> bool:
    return value is None or math.isnan(value)


def signed(value: float | None, digits: int = 2) -> str:
    return "-" if _missing(value) else f"{value:+.{digits}f}"


def plain(value: float | None, digits: int = 3) -> str:
    return "-" if _missing(value) else f"{value:.{digits}f}"


def p_value(value: float | None) -> str:
    if _missing(value):
        return "-"
    assert value is not None
    return "<0.001" if value < 0.001 else f"{value:.2g}"  # never 0


def percent(value: float | None, digits: int = 1) -> str:
    return "-" if _missing(value) else f"{100 * (value or 0.0):.{digits}f}%"


def points(value: float | None, digits: int = 1) -> str:
    """A difference of two rates, in percentage points."""
    return "-" if _missing(value) else f"{100 * (value or 0.0):+.{digits}f}"


def interval(
    value: float | None, bounds: Sequence[float] | None, digits: int = 2, *, sign: bool = True
) -> str:
    """``value [low, high]``, or the value alone when there is no interval."""
    show = signed if sign else plain
    if bounds is None or _missing(value) or bounds[0] == bounds[1]:  # observed: no interval
        return show(value, digits)
    return f"{show(value, digits)} [{show(bounds[0], digits)}, {show(bounds[1], digits)}]"


def read_spec(run_dir: Path) -> dict[str, Any]:
    """The run's ``spec.json`` ({} where it has none; a damaged one is named)."""
    return read_run_json(run_dir / "spec.json")


def _endpoint(manifest: Manifest) -> str:
    endpoint = manifest.endpoint
    where = endpoint.get("base_url") or f"{endpoint.get('provider', '?')} default endpoint"
    if manifest.simulated:
        where = "built-in offline simulator (no endpoint)"
    note = endpoint.get("note")
    return f"{where}; {note}" if note else str(where)


def _versions(manifest: Manifest) -> str:
    versions = manifest.model_versions
    if not versions:
        return "none reported"
    return "; ".join(f"{name} ({count} answers)" for name, count in sorted(versions.items()))


def _data(spec: Mapping[str, Any], fields: Sequence[str]) -> str:
    found = []
    for name in fields:
        value = spec.get(name)
        if value is None or value == [] or value is False:
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        found.append(f"{name.replace('_', ' ')}: {shown}")
    return "; ".join(found) or "the task's shipped data"


def audited_section(
    manifest: Manifest,
    spec: Mapping[str, Any],
    rows: Sequence[tuple[str, str]],
    data: Sequence[str],
) -> Section:
    """The table of what was audited: model, versions, endpoint, data (the spec's ``data``
    fields, those set), counts, dates, tool."""
    model = f"{manifest.endpoint.get('provider')}/{manifest.endpoint.get('model')}"
    if manifest.simulated:
        model += " (SIMULATED model; not a real model)"
    counts, usage = manifest.counts, manifest.usage
    ended = manifest.ended_at.isoformat(timespec="seconds") if manifest.ended_at else "-"
    duration = f"{manifest.duration_s:.1f} s" if manifest.duration_s is not None else "-"
    table = [
        ("model", model),
        ("model versions reported", _versions(manifest)),
        ("endpoint", _endpoint(manifest)),
        ("task", str(spec.get("task", manifest.kind))),
        ("data", _data(spec, data)),
        *rows,
        (
            "requests",
            f"{counts.requests} ({counts.sent} sent, {counts.cache_hits} from cache, "
            f"{counts.retries} retries, {counts.failures} failed, {counts.refusals} refused, "
            f"{counts.rate_limited} rate-limited)",
        ),
        ("tokens", f"{usage.input_tokens} in, {usage.output_tokens} out (requests sent only)"),
        ("date", f"{manifest.started_at.isoformat(timespec='seconds')} to {ended} ({duration})"),
        ("status", manifest.status + (f": {manifest.error}" if manifest.error else "")),
        *([("replay of", manifest.replay_of)] if manifest.replay_of else []),
        ("tool", f"biasaudit {manifest.tool_version}; run {manifest.run_id}"),
    ]
    return Section(
        "What was audited",
        "audited",
        [Table(["", ""], [list(row) for row in table], left=frozenset({0, 1}))],
    )


def replay_section(manifest: Manifest, run_dir: Path) -> Section:
    """The exact commands that made the run, replay it from the cache, and rebuild this report."""
    command = list(manifest.command)
    lines = ["# the command that made this run", shlex.join(command)]
    if command[1:2] not in (["replay"], ["reaudit"]):  # those have no --replay of their own
        replay = command if "--replay" in command else [*command, "--replay"]
        lines += [
            "# the same audit answered from the cache only (never touches the network)",
            shlex.join(replay),
        ]
    lines += [
        "# this run rebuilt from its spec and the cache, and checked against it",
        shlex.join(["biasaudit", "replay", str(run_dir)]),
        "# this report, rebuilt from the run directory",
        shlex.join(["biasaudit", "report", str(run_dir)]),
    ]
    cache = f"Cache: {manifest.cache_path}. " if manifest.cache_path else ""
    return Section(
        "Replay",
        "replay",
        [
            Paragraph(
                f"{cache}Run the commands from the directory the run was made in; the replay "
                "writes a new run directory and fails clearly if an answer is missing."
            ),
            Code("\n".join(lines)),
        ],
    )


def runs_table(rows: list[tuple[str, str, bool, Path]]) -> Section:
    """The runs a study compares, one row each."""
    table = Table(
        ["run", "what", "model", "path"],
        [
            [label, what, "SIMULATED model (not real)" if simulated else "real model", str(path)]
            for label, what, simulated, path in rows
        ],
        left=frozenset({0, 1, 2, 3}),
    )
    return Section("Runs compared", "runs", [table])
