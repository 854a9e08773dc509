"""Runs as pandas DataFrames, where analysts work: ``load_runs`` (every figure, one row
each, in long or "tidy" form), ``load_scores`` (each run's per-unit results),
``load_responses`` (every answer) and ``load_prompts`` (every request as it was sent,
checked against the cache key it was sent under), and ``export_runs``, which writes
any of them as
CSV, Parquet or JSON lines (``biasaudit export``).

Each takes run directories, a folder of them (``runs``) or a glob (``"runs/*"``).
What a glob also matches and is not a run (the cache file, study and compare
folders; fan-out runs, except for ``load_responses`` and ``load_prompts``) is left out
and listed in the
frame's ``attrs["skipped"]``. Every row names its run: ``run`` (the folder's name),
``kind``, ``task``, ``model``, ``simulated`` and ``path``.

>>> import biasaudit
>>> figures = biasaudit.load_runs("runs/*")                                # doctest: +SKIP
>>> figures.query("figure == 'dp_gap' and k == 1").pivot(index="unit", columns="model",
...                                                        values="estimate")  # doctest: +SKIP
"""

from __future__ import annotations

import glob
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from biasaudit.errors import UsageError
from biasaudit.kinds.common import FIGURE_COLUMNS as KIND_FIGURE_COLUMNS
from biasaudit.store.files import replaced_together
from biasaudit.store.tables import read_csv, write_csv
from biasaudit.textfiles import a_run

__all__ = [
    "FIGURE_COLUMNS",
    "RUN_COLUMNS",
    "export_runs",
    "load_experiment",
    "load_prompts",
    "load_responses",
    "load_runs",
    "load_scores",
]

RUN_COLUMNS = ("run", "kind", "task", "model", "simulated", "path")
"""The columns that name each row's run."""
FIGURE_COLUMNS = (*RUN_COLUMNS, *KIND_FIGURE_COLUMNS)
"""``load_runs``' columns: the run's, then a figure's as every kind writes it
(:data:`biasaudit.kinds.common.FIGURE_COLUMNS`, its verdict ``beyond_noise`` last)."""

Paths = str | Path | Iterable[str | Path]
What = Literal["figures", "scores", "responses", "prompts"]
Format = Literal["csv", "parquet", "jsonl"]


@dataclass(frozen=True)
class _Run:
    path: Path
    kind: str
    task: str
    model: str
    simulated: bool
    metrics: Any = None

    def columns(self) -> dict[str, Any]:
        return {
            "run": self.path.name, "kind": self.kind, "task": self.task, "model": self.model,
            "simulated": self.simulated, "path": str(self.path),
        }  # fmt: skip


def _expand(paths: Paths) -> list[Path]:
    """The paths given: globs expanded, a folder of runs opened."""
    given = [paths] if isinstance(paths, str | Path) else list(paths)
    found: list[Path] = []
    for item in given:
        text = str(item)
        if any(ch in text for ch in "*?["):
            matched = sorted(glob.glob(str(Path(text).expanduser())))
            if not matched:
                raise UsageError(f"{text} matches nothing")
            found += map(Path, matched)
            continue
        path = Path(text).expanduser()
        if not path.exists():
            raise UsageError(f"{path} does not exist")
        if path.is_dir() and not (path / "manifest.json").is_file():
            inside = sorted(p for p in path.iterdir() if (p / "manifest.json").is_file())
            if inside:
                found += inside
                continue
        found.append(path)
    return found


def _runs(paths: Paths, *, audits_only: bool) -> tuple[list[_Run], list[str]]:
    from biasaudit.kinds.registry import KINDS, audit_kind
    from biasaudit.store.runs import read_manifest

    runs: list[_Run] = []
    skipped: list[str] = []
    for path in _expand(paths):
        if not (path.is_dir() and (path / "manifest.json").is_file()):
            what = "a file" if path.is_file() else "a folder without manifest.json"
            skipped.append(f"{path}: {what}, not a run")
            continue
        try:
            manifest = read_manifest(path)
        except UsageError as error:  # a damaged manifest: that run is left out, named
            skipped.append(f"{path}: {error}")
            continue
        model = str(manifest.endpoint.get("model", ""))
        if manifest.kind not in KINDS:
            if audits_only:
                skipped.append(f"{path}: {a_run(manifest.kind)}, not an audit run")
            else:
                runs.append(_Run(path, manifest.kind, "", model, manifest.simulated))
            continue
        if not (path / "metrics.json").is_file():
            if audits_only:
                skipped.append(f"{path}: no metrics.json (the run stopped before its metrics)")
                continue
            runs.append(_Run(path, manifest.kind, "", model, manifest.simulated))
            continue
        from biasaudit.kinds.common import read_run_metrics

        try:
            metrics: Any = read_run_metrics(path, audit_kind(manifest.kind).metrics_model())
        except UsageError as error:  # a damaged file: that run is left out, named
            skipped.append(str(error))
            continue
        runs.append(
            _Run(path, manifest.kind, str(getattr(metrics, "task", "")),
                 str(getattr(metrics, "model", model)), bool(metrics.simulated), metrics)
        )  # fmt: skip
    return runs, skipped


def _framed(parts: list[pd.DataFrame], columns: Iterable[str], skipped: list[str]) -> pd.DataFrame:
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(columns))
    frame.attrs["skipped"] = skipped
    return frame


def load_runs(paths: Paths) -> pd.DataFrame:
    """Every figure of the audit runs in ``paths``, one row each
    (:data:`FIGURE_COLUMNS`): run, kind, task, model, simulated, path, then subtask
    (empty: the whole run), unit_type and unit (what the figure is of: a group, a
    category's value, a slot, a context), figure, k, estimate, low, high (NaN where
    there is no interval) and n.

    Raises
    ------
    UsageError
        A path that does not exist, a glob that matches nothing.
    """
    from biasaudit.kinds.registry import audit_kind

    runs, skipped = _runs(paths, audits_only=True)
    parts = []
    for run in runs:
        rows = audit_kind(run.kind).figure_rows(run.metrics)
        part = pd.DataFrame(rows, columns=list(FIGURE_COLUMNS[len(RUN_COLUMNS) :]))
        for name, value in reversed(run.columns().items()):
            part.insert(0, name, value)
        part["k"] = part["k"].astype("Int64")
        part["n"] = part["n"].astype("Int64")
        parts.append(part)
    return _framed(parts, FIGURE_COLUMNS, skipped)


_RENAMED = {"path": "scoring_path"}
"""A per-unit column whose name a run column takes, renamed (allocation's ``path``: how
the candidate was scored)."""


def load_scores(paths: Paths) -> pd.DataFrame:
    """Each audit run's per-unit results, one row per unit, with the run's columns
    first: allocation candidates (``scores.csv``), Grade Score items (``items.csv``),
    RUTEd occupations (``occupations.csv``), listwise candidates shown
    (``shown.csv``), decisions persons (``persons.csv``). Runs of several kinds give the
    union of their columns; a column named like a run column is renamed (allocation's
    ``path`` is ``scoring_path``)."""
    from biasaudit.kinds.registry import audit_kind

    runs, skipped = _runs(paths, audits_only=True)
    parts = []
    for run in runs:
        source = run.path / audit_kind(run.kind).scores_file
        if not source.is_file():
            skipped.append(f"{run.path}: no {source.name}")
            continue
        try:
            part = read_csv(source, keep_default_na=True)
        except (OSError, ValueError) as error:  # pandas' parser errors are ValueErrors
            skipped.append(f"{run.path}: its {source.name} cannot be read ({type(error).__name__})")
            continue
        part = part.rename(columns={c: _RENAMED.get(c, f"{c}_of_unit") for c in part.columns
                                    if c in RUN_COLUMNS})  # fmt: skip
        for name, value in reversed(run.columns().items()):
            part.insert(0, name, value)
        parts.append(part)
    return _framed(parts, RUN_COLUMNS, skipped)


def load_responses(paths: Paths) -> pd.DataFrame:
    """Every answer of the runs in ``paths`` (fan-out runs included), one row per line
    of ``responses.jsonl`` with the run's columns first; ``top_logprobs`` and
    ``label_probabilities`` stay as Python objects."""
    from biasaudit.store.runs import ResponseRecord

    runs, skipped = _runs(paths, audits_only=False)
    parts = []
    for run in runs:
        source = run.path / "responses.jsonl"
        if not source.is_file():
            skipped.append(f"{run.path}: no responses.jsonl")
            continue
        records = []
        with open(source, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    records.append(ResponseRecord.model_validate_json(line).model_dump(mode="json"))
                except ValueError:  # a line cut short by a crash: named, the rest kept
                    skipped.append(f"{source}: line {number} cannot be read")
        part = pd.DataFrame(records, columns=list(ResponseRecord.model_fields))
        for name, value in reversed(run.columns().items()):
            part.insert(0, name, value)
        parts.append(part)
    return _framed(parts, (*RUN_COLUMNS, *ResponseRecord.model_fields), skipped)


PROMPT_COLUMNS = ("id", "replicate", "cache_key", "messages", "params", "as_sent")
"""``load_prompts``' columns after the run's."""


def load_prompts(paths: Paths) -> pd.DataFrame:
    """Every request of the runs in ``paths`` as it was sent, one row each (from
    ``prompts.jsonl.gz``): its ``id`` and ``replicate`` (as ``responses.jsonl`` names it),
    the ``cache_key`` it was sent and cached under, its ``messages`` (or prompt) and
    ``params`` as JSON text, and ``as_sent``: whether that text still hashes to that key
    (False: the file was edited since). Runs made before biasaudit recorded their
    prompts, and imports, which sent none, are skipped with a note."""
    import json

    from biasaudit.store.runs import PROMPTS_FILE, prompt_sent, read_prompts

    runs, skipped = _runs(paths, audits_only=False)
    parts = []
    for run in runs:
        if not (run.path / PROMPTS_FILE).is_file():
            skipped.append(f"{run.path}: no {PROMPTS_FILE} (made before biasaudit kept "
                           "the prompts it sent, or an import, which sent none)")  # fmt: skip
            continue
        try:
            header, records = read_prompts(run.path)
        except UsageError as error:
            skipped.append(str(error))
            continue
        rows = [
            {"id": r.id, "replicate": r.replicate, "cache_key": r.cache_key,
             "messages": json.dumps(r.request.get("messages", r.request.get("prompt")),
                                    ensure_ascii=False),
             "params": json.dumps(r.request.get("params", {}), ensure_ascii=False),
             "as_sent": prompt_sent(header, r)}
            for r in records.values()
        ]  # fmt: skip
        part = pd.DataFrame(rows, columns=list(PROMPT_COLUMNS))
        for name, value in reversed(run.columns().items()):
            part.insert(0, name, value)
        parts.append(part)
    return _framed(parts, (*RUN_COLUMNS, *PROMPT_COLUMNS), skipped)


def export_runs(paths: Paths, output: str | Path, *, what: What = "figures",
                format: Format = "csv") -> pd.DataFrame:  # fmt: skip
    """Write ``load_runs`` (``what="figures"``), ``load_scores``, ``load_responses`` or
    ``load_prompts``
    of ``paths`` to ``output`` as CSV, Parquet (needs ``pyarrow``: the ``parquet``
    extra) or JSON lines; the frame written.

    Raises
    ------
    UsageError
        Nothing to write; Parquet without pyarrow; the file cannot be written.
    """
    loaders = {"figures": load_runs, "scores": load_scores, "responses": load_responses,
               "prompts": load_prompts}  # fmt: skip
    frame = loaders[what](paths)
    if frame.empty:
        reason = f" ({frame.attrs['skipped'][0]})" if frame.attrs.get("skipped") else ""
        raise UsageError(f"no run among the paths given has {what}{reason}")
    target = Path(output)
    if format == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise UsageError(
                "--format parquet needs pyarrow: pip install 'biasaudit[parquet]'"
            ) from None
    try:
        with replaced_together([target]) as (written,):  # the earlier file whole, or the new
            if format == "csv":
                write_csv(_flat(frame), written)
            elif format == "jsonl":
                frame.to_json(written, orient="records", lines=True, force_ascii=False)
            else:
                _flat(frame).to_parquet(written, index=False)
    except OSError as error:
        raise UsageError(f"{target}: cannot be written ({error.strerror or error})") from None
    return frame


def _flat(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns a typed format can hold: nested cells (lists, dicts) as JSON text, and a
    column whose cells differ in type (runs of several kinds: ``refused`` is a flag of
    allocation candidates and a count of RUTEd occupations) as text."""
    flat = frame.copy()
    for column in flat.columns:
        if flat[column].dtype != object:
            continue
        values = flat[column]
        present = values[values.notna()]
        if present.map(lambda v: isinstance(v, list | dict)).any():
            flat[column] = values.map(
                lambda v: json.dumps(v, ensure_ascii=False) if isinstance(v, list | dict) else v
            )
        elif present.map(type).nunique() > 1:
            flat[column] = values.map(lambda v: v if v is None or v != v else str(v))
    return flat


def load_experiment(folder: str | Path) -> pd.DataFrame:
    """A mitigation experiment's paired effects (``biasaudit experiment``), one row per
    intervention and figure: arm, figure, group, baseline, under, change, low, high, p,
    p_adjusted, beyond_noise, method, bias; then that intervention's costs (``verdict``,
    ``flattens``, ``bias_removed``, the decisions' level change and interval, validity
    change, irregular shares, tokens and cost), each column prefixed ``cost_``.

    Raises
    ------
    UsageError
        ``folder`` holds no ``experiment.json``, or a damaged one.
    """
    from biasaudit.experiments.runner import read_experiment

    experiment = read_experiment(Path(folder))
    costs = {cost.arm: cost.model_dump(exclude={"arm"}) for cost in experiment.costs}
    rows = []
    for effect in experiment.effects:
        row = effect.model_dump(exclude={"ci"})
        row["low"], row["high"] = effect.ci
        row.update({f"cost_{key}": value for key, value in costs.get(effect.arm, {}).items()})
        rows.append(row)
    return pd.DataFrame(rows)
