"""``biasaudit replay RUN_DIR``: rebuild a run from the cache, sending nothing.

The run's ``spec.json`` (audits) or ``inputs.jsonl`` (fan-outs) says what was
asked; the cache named in its ``manifest.json`` (or given) holds the answers.
The replay runs the same audit with ``replay=True``, so the engine never
opens a connection and stops, before writing anything, when an answer is
missing. Scores and metrics are recomputed from scratch with the run's seed,
so they come out identical; :func:`replay_run` checks that they do. An audit run in
rounds (``--until``) is replayed round by round from the spec its ``rounds.json``
records, on the design it recorded, and its rounds are checked as well: each size,
each figure, why it stopped.

The replay is a new run directory of the same kind, beside the original
unless told otherwise, whose manifest names the original in ``replay_of``.
A run directory and its cache file copied together to another machine replay
there: when the manifest's cache path does not exist, the cache is looked for
next to the run directory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from biasaudit.errors import ReplayMissError, UsageError
from biasaudit.kinds.registry import AUDIT_KINDS, read_metrics, run_spec
from biasaudit.spec import AuditSpec, parse_spec
from biasaudit.store.runs import Manifest, RunDirectory, read_manifest, read_run_json

__all__ = ["ReplayResult", "find_cache", "metric_differences", "replay_run"]

# Figures that describe how a run went, not what it measured: a replay sends
# nothing, so its request counts differ by design.
# Not figures: what the replay sent (nothing), and where a file was read from, which
# differs from machine to machine (runs before 2026-11-27 recorded the built-in
# occupations by their path in the installed package).
_NOT_COMPARED = frozenset({"requests", "occupations_source"})
_RESPONSE_FIELDS = ("text", "texts", "top_logprobs", "model_version", "refusal", "parsed")


@dataclass(frozen=True)
class ReplayResult:
    """A finished replay.

    Attributes
    ----------
    run_dir:
        The new run directory.
    original:
        The run replayed.
    kind:
        ``allocation``, ``grade-score``, ``ruted`` or ``fanout``.
    manifest:
        The new run's manifest.
    table:
        What ``biasaudit run`` printed for the original (a summary line for fan-outs).
    differences:
        Where the replay's metrics (or responses) differ from the original's;
        empty when the replay reproduced it.
    added:
        Fields of ``metrics.json`` that this biasaudit writes and the original's
        (older) layout had not: not compared, and named here.
    rounded:
        Figures equal to the original's only to within :data:`ROUNDING` (the last bits
        another CPU, BLAS or thread count gives): not differences, and counted here.
    redefined:
        Fields whose meaning a newer layout changed (:data:`REDEFINED`) and that differ
        from the original's (older) values: not differences, and named here.
    """

    run_dir: Path
    original: Path
    kind: str
    manifest: Manifest
    table: list[str]
    differences: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    rounded: list[str] = field(default_factory=list)
    redefined: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 when the replay reproduced the original, 1 when it did not."""
        return 1 if self.differences else 0


_FLOORED = (
    "a qualified candidates' selection figure's interval, whose standard error is at least "
    "its spread over the omnibus test's relabellings since allocation's layout 5 (2026-11-28)"
)
REDEFINED = {
    "beyond_noise": "an impact ratio's verdict, adjusted over its table since the layout of "
    "2026-11-28 (allocation and listwise 4); before, its interval alone",
    "eo_gap_ci": _FLOORED,
    "true_positive_rate_ci": _FLOORED,
}
"""Fields whose meaning changed with a layout, by name, and how: a replay of a run of an
older layout does not count their values as differences."""


def find_cache(run_dir: Path, manifest: Manifest, given: Path | None = None) -> Path:
    """The cache file of ``run_dir``: ``given``, the manifest's, or one beside the run.

    Raises
    ------
    UsageError
        No such file exists, naming every place looked at.
    """
    if given is not None:
        if not given.is_file():
            raise UsageError(f"replay: no cache file at {given}")
        return given
    recorded = Path(manifest.cache_path) if manifest.cache_path else None
    places = [recorded] if recorded is not None else []
    name = recorded.name if recorded is not None else "cache.sqlite"
    places += [run_dir.parent / name, run_dir / name]
    for place in places:
        if place.is_file():
            return place
    looked = ", ".join(str(p) for p in dict.fromkeys(places))
    raise UsageError(
        f"replay: cannot find the cache of {run_dir} (looked at {looked}); "
        "copy the cache file next to the run directory or pass --cache FILE"
    )


def replay_run(
    run_dir: str | Path,
    *,
    cache: Path | None = None,
    runs_dir: Path | None = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
) -> ReplayResult:
    """Replay ``run_dir`` from the cache into a new run directory; see the module docstring.

    Raises
    ------
    UsageError
        Not a run directory, no cache found, or the cache lacks answers the
        run needs (naming how many and which).
    """
    original = Path(run_dir)
    if not (original / "manifest.json").is_file():
        raise UsageError(f"replay: {original} is not a run directory (no manifest.json)")
    manifest = read_manifest(original)
    if manifest.endpoint.get("provider") == "imported":
        raise UsageError(
            f"replay: {original} holds scores imported with biasaudit score; no request was "
            "sent, so there is nothing to replay (run biasaudit score on the file again)"
        )
    cache_path = find_cache(original, manifest, cache)
    out = runs_dir if runs_dir is not None else original.parent
    command = list(command) if command is not None else ["biasaudit", "replay", str(original)]
    try:
        if manifest.kind == "fanout":
            result = _replay_fanout(original, cache_path, out, stderr, command)
        elif manifest.kind in AUDIT_KINDS:
            result = _replay_audit(original, manifest, cache_path, out, stderr, command)
        else:
            raise UsageError(f"replay: cannot replay a run of kind '{manifest.kind}'")
    except ReplayMissError as error:
        raise UsageError(_missing_message(original, manifest, cache_path, error)) from None
    _mark_replay(result.run_dir, original)
    result.manifest.replay_of = str(original)
    return result


def _replay_audit(
    original: Path,
    manifest: Manifest,
    cache_path: Path,
    out: Path,
    stderr: TextIO | None,
    command: list[str],
) -> ReplayResult:
    from biasaudit.kinds._rounds import read_rounds

    rounds = read_rounds(original)
    if rounds is not None and rounds.spec is not None:  # every round again, from the cache
        # The design as recorded: the pilot it was planned from may be gone.
        asked = rounds.spec if rounds.planned() is not None else {**rounds.spec, "like": None}
        spec = _replay_spec(original, cache_path, out, asked)
        # Followed as recorded: rounds a failure stopped stop there again, even where
        # the cache now holds more.
        finished = run_spec(spec, stderr=stderr, command=command, recorded=rounds)
    else:
        spec = _replay_spec(original, cache_path, out)
        finished = run_spec(spec, stderr=stderr, command=command)
    before = original / "metrics.json"
    differences = ["metrics.json (the original run has none)"]
    added: list[str] = []
    rounded: list[str] = []
    redefined: list[str] = []
    recorded: dict[str, Any] | None = None
    if before.is_file():
        try:
            read_metrics(original, manifest.kind)  # whole, and of a layout this one reads
            recorded = read_run_json(before)
        except UsageError:  # what the replay writes stands in its place
            differences = ["metrics.json (the original's cannot be read; the replay's is whole)"]
    if recorded is not None:
        replayed_metrics = read_run_json(finished.run_dir / "metrics.json")
        # A layout newer than the original's adds fields (schema_version up): those
        # are not differences, and are named apart.
        older = _version(recorded) < _version(replayed_metrics)
        if older:  # the layout's own number is expected to differ
            recorded.pop("schema_version", None)
            replayed_metrics.pop("schema_version", None)
        differences = metric_differences(
            recorded, replayed_metrics, added=added if older else None, rounded=rounded
        )
        if older:
            redefined = [d for d in differences if REDEFINED.keys() & set(d.split("."))]
            differences = [d for d in differences if d not in redefined]
    replayed = read_rounds(finished.run_dir) if rounds is not None else None
    if rounds is not None and replayed is not None:
        differences += _rounds_differences(rounds, replayed, rounded)
    return ReplayResult(
        finished.run_dir, original, manifest.kind, finished.manifest, finished.table, differences,
        sorted(set(added)), rounded, _unlisted(redefined),
    )  # fmt: skip


def _unlisted(paths: list[str]) -> list[str]:
    """Dotted paths with their list positions left out, each once."""
    return list(dict.fromkeys(".".join(p for p in path.split(".") if not p.isdigit())
                              for path in paths))  # fmt: skip


def _replay_spec(
    original: Path, cache_path: Path, out: Path, asked: dict[str, Any] | None = None
) -> AuditSpec:
    """The spec of ``original``'s ``spec.json`` (or ``asked``: an audit in rounds, from its
    ``rounds.json``), set to replay from ``cache_path`` into ``out``."""
    path = original / ("spec.json" if asked is None else "rounds.json")
    if asked is None and not path.is_file():
        raise UsageError(f"replay: {original} has no spec.json, so what it asked is unknown")
    data = dict(asked) if asked is not None else read_run_json(path)
    data.update(replay=True, fresh=False, cache=str(cache_path), runs_dir=str(out))
    return parse_spec(data, source=str(path))


def _replay_fanout(
    original: Path, cache_path: Path, out: Path, stderr: TextIO | None, command: list[str]
) -> ReplayResult:
    from biasaudit.engine.fanout import FanoutOptions, read_prompts, run_fanout
    from biasaudit.engine.loop import run_async
    from biasaudit.store.runs import read_responses

    inputs = original / "inputs.jsonl"
    if not inputs.is_file():
        raise UsageError(f"replay: {original} has no inputs.jsonl, so what it asked is unknown")
    spec = read_run_json(original / "spec.json")
    settings = spec.get("settings", {})
    try:
        options = FanoutOptions(
            model=spec["model"],
            base_url=_base_url(spec.get("base_url")),
            api_key_env=spec.get("api_key_env"),
            headers=spec.get("headers"),
            **({"concurrency": settings["concurrency"]} if "concurrency" in settings else {}),
            runs_dir=out,
            cache=cache_path,
            replay=True,
            command=command,
        )
    except (KeyError, TypeError, ValidationError):
        raise UsageError(
            f"replay: {original / 'spec.json'} is damaged: it does not describe a fan-out"
        ) from None
    result = run_async(run_fanout(read_prompts(inputs), options, stderr=stderr))
    after = {(r.id, r.replicate): r for r in read_responses(result.run_dir)}
    try:
        before = {(r.id, r.replicate): r for r in read_responses(original)}
    except (OSError, UsageError):  # what the replay writes stands in its place
        before, damaged = (
            {},
            ["responses.jsonl (the original's cannot be read; the replay's is whole)"],
        )
    else:
        damaged = []
    differences = damaged + [
        f"response {key[0]} (replicate {key[1]}).{name}"
        for key, record in before.items()
        for name in _RESPONSE_FIELDS
        if key not in after or getattr(after[key], name) != getattr(record, name)
    ]
    counts = result.manifest.counts
    table = [f"fanout replay of {counts.requests} prompts to {spec['model']}: all from the cache"]
    return ReplayResult(result.run_dir, original, "fanout", result.manifest, table, differences)


def _rounds_differences(before: Any, after: Any, rounded: list[str]) -> list[str]:
    """Where a replay's ``rounds.json`` differs from the original's: each round's size
    and figures, why it stopped, the design and the fixed size compared with (what was
    sent, and where, differ by design)."""

    def decisions(record: Any) -> dict[str, Any]:
        found: dict[str, Any] = record.model_dump(mode="json", exclude={"sent", "spec"})
        for look in found["rounds"]:
            for key in ("run_dir", "sent", "requests"):
                look.pop(key)
        return found

    found = metric_differences(decisions(before), decisions(after), rounded=rounded)
    return [f"rounds.json: {path}" for path in found]


ROUNDING = 1e-9
"""Two figures within this relative distance (or ``ROUNDING_ABS`` of each other, near
0) are equal: the last bits of a sum depend on the CPU, the BLAS and its thread count
(OpenBLAS at 1 thread and at 2 differ in the last bit for some shapes), so a replay
on another machine may differ there, where no figure printed to three decimals does."""
ROUNDING_ABS = 1e-12


def metric_differences(
    before: Any,
    after: Any,
    where: str = "",
    *,
    added: list[str] | None = None,
    rounded: list[str] | None = None,
) -> list[str]:
    """Dotted paths at which two ``metrics.json`` documents differ (request counts aside).

    ``added``: ``before`` is of an older layout; a field only ``after`` has is no
    difference, and its path (list positions left out) is appended to ``added``.
    ``rounded``: the paths of figures equal only to within :data:`ROUNDING` (not
    differences) are appended to it.
    """
    if isinstance(before, dict) and isinstance(after, dict):
        found: list[str] = []
        for key in sorted(set(before) | set(after)):
            if not where and key in _NOT_COMPARED:
                continue
            path = f"{where}.{key}" if where else str(key)
            if key not in before and added is not None:
                added.append(".".join(p for p in path.split(".") if not p.isdigit()))
            elif key not in before or key not in after:
                found.append(path)
            else:
                found += metric_differences(
                    before[key], after[key], path, added=added, rounded=rounded
                )
        return found
    if isinstance(before, list) and isinstance(after, list):
        if len(before) != len(after):
            return [where or "(document)"]
        found = []
        for i, (old, new) in enumerate(zip(before, after, strict=True)):
            found += metric_differences(old, new, f"{where}.{i}", added=added, rounded=rounded)
        # a list is named whole, as a field is, unless an older layout asks for its parts
        return found if added is not None or not found else [where or "(document)"]
    if before == after:
        return []
    if _figures(before, after) and math.isclose(
        before, after, rel_tol=ROUNDING, abs_tol=ROUNDING_ABS
    ):
        if rounded is not None:
            rounded.append(where)
        return []
    return [where or "(document)"]


def _figures(*values: Any) -> bool:
    """Numbers of which one at least is a float (counts, ints both, compare exactly)."""
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    return numbers and any(isinstance(v, float) for v in values)


def _version(document: Any) -> int:
    version = document.get("schema_version", 1) if isinstance(document, dict) else 1
    return version if isinstance(version, int) else 1


def _missing_message(
    original: Path, manifest: Manifest, cache_path: Path, error: ReplayMissError
) -> str:
    message = (
        f"replay of {original}: {error.missing} of {error.total} answers are missing from "
        f"the cache {cache_path}"
    )
    examples = str(error).partition("(e.g. ")[2].partition(")")[0]
    if examples:
        message += f" (e.g. {examples})"
    if manifest.counts.failures or manifest.status != "completed":
        message += (
            f"; the original run was {manifest.status} with {manifest.counts.failures} "
            "failed requests, which are never cached"
        )
    return message


def _base_url(recorded: Any) -> str | tuple[str, ...] | None:
    """A fan-out's recorded base URL(s): its credentials masked, which a replay does not need."""
    return tuple(recorded) if isinstance(recorded, list) else recorded


def _mark_replay(run_dir: Path, original: Path) -> None:
    manifest = read_manifest(run_dir)
    manifest.replay_of = str(original)
    RunDirectory(run_dir).write_json("manifest.json", manifest)
