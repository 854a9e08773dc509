"""What every audit kind shares: how it describes its tasks, and the request counts
each ``metrics.json`` carries. No kind imports another; they meet here."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from pydantic import BaseModel, Field, ValidationError

from biasaudit.errors import UsageError
from biasaudit.store.runs import check_version, file_problem, read_run_model

if TYPE_CHECKING:
    import numpy as np

    from biasaudit.engine.session import RunSession
    from biasaudit.providers import ModelRequest
    from biasaudit.providers._types import ReasoningEffort

__all__ = [
    "FIGURE_COLUMNS",
    "FigureVerdict",
    "MetricsHeader",
    "RatioVerdict",
    "RequestCounts",
    "RequestPlan",
    "RunPair",
    "StudyRun",
    "TaskInfo",
    "UnitDecisions",
    "export_verdicts",
    "figure_row",
    "interval_verdicts",
    "labelled_study_runs",
    "load_study_metrics",
    "read_run_metrics",
    "request_counts",
    "smoke_test_notes",
    "stored_verdict",
    "table_verdicts",
    "verdicts_by_cell",
    "with_verdicts",
]


@dataclass(frozen=True)
class UnitDecisions:
    """What a run decided about each unit it asked, for the costs side of a mitigation
    experiment (``biasaudit experiment``): one row per unit, keyed alike in every run
    of one audit, so that two runs pair row by row.

    ``frame`` has the columns ``unit`` (the key), ``cluster`` (the unit that varies
    whose resampling gives the intervals: a resume, a scenario, a pool), ``value`` (the
    decision: a score, P(yes), ranked first; NaN where the answer could not be read or
    was refused) and, where the task has a ground truth, ``truth`` (True for the
    stronger units: qualified resumes)."""

    label: str
    """What ``value`` is, e.g. ``mean P(yes)``."""
    frame: Any
    """A ``pandas.DataFrame`` with the columns above."""
    truth: str = ""
    """What ``truth`` says (``qualified``); empty where there is none."""
    level: bool = True
    """Whether the decisions' mean can move (False where the design fixes it: a share
    ranked first within pools, a pairwise win share), so that only their spread,
    validity and irregular answers are costs."""


class RunPair(NamedTuple):
    """Two runs of one audit that ``biasaudit compare`` tests for change (B - A): their
    folders and ``metrics.json`` models, the generator and number of the bootstrap's
    resamples, and the notes the comparison prints (a kind's change tests add to them)."""

    path_a: Path
    path_b: Path
    metrics_a: Any
    metrics_b: Any
    rng: np.random.Generator
    bootstrap: int
    notes: list[str]


@dataclass(frozen=True)
class TaskInfo:
    """What ``biasaudit tasks`` shows about one task."""

    name: str
    summary: str
    groups: str
    pools: str
    data: tuple[tuple[str, str], ...]
    prompts: tuple[str, ...]
    usage: str


class MetricsHeader(BaseModel):
    """What every kind's ``metrics.json`` opens with, declared once: each kind's model
    adds its own figures (and its own ``schema_version`` and ``task`` defaults)."""

    schema_version: int = Field(description="The version of this kind's metrics.json layout.")
    task: str = Field(description="The task audited (a built-in one's name, or the spec's).")
    model: str = Field(description="The model as given (provider/model).")
    simulated: bool = Field(description="Whether the answers came from a simulated model.")
    model_versions: dict[str, int] = Field(
        default_factory=dict,
        description="The versions the endpoint reported, with how many answers each gave.",
    )


class RatioVerdict(BaseModel):
    """An impact ratio of ``metrics.json`` with its interval and its verdict, declared
    once: the verdict every surface shows, and the family it was adjusted over."""

    ratio: float = Field(description="The rate over the most selected value's rate.")
    ci: list[float] | None = Field(None, description="The ratio's interval.")
    beyond_noise: bool = Field(
        description="The verdict every surface shows: below 0.8 beyond noise (the test of 0.8 "
        "read off the interval) after Holm's adjustment over ``family`` (before schema version "
        "4: the whole interval below 0.8, unadjusted)."
    )
    p_adjusted: float | None = Field(
        None,
        description="The p-value against 0.8 read off the interval, Holm-adjusted over "
        "``family``; None where the run has too few units to say.",
    )
    family: str = Field("", description="The figures the verdict was adjusted over, named.")


V = TypeVar("V", bound=RatioVerdict)

# A verdict is "beyond noise" where its p-value, adjusted over its table, is below this.
SIGNIFICANT = 0.05


class FigureVerdict(BaseModel):
    """The verdict on one figure of ``metrics.json`` tested against 0 (a RABBI, a gap, a
    skew), declared once: what every surface marks, the test it reads and the table it
    was adjusted over."""

    figure: str = Field(description="The figure's name, as the exports call it ('dp_gap').")
    unit: str = Field(description="Whose figure: a group, or a context (RUTEd).")
    k: int = Field(0, description="The k of a selection figure; 0 for the others.")
    test: str = Field(
        description="What the verdict reads: 'permutation' (its permutation p-value) or "
        "'interval' (the p-value its interval implies, so the verdict is 'the interval "
        "excludes 0' at the adjusted level) or 'exact binomial' (Grade Score's slots: "
        "each slot's share against 1/slots)."
    )
    p: float | None = Field(None, description="The unadjusted p-value the verdict reads.")
    p_adjusted: float | None = Field(
        None,
        description="``p`` Holm-adjusted over ``family``; None where too few units stand "
        "behind the figure to say (nothing is flagged).",
    )
    beyond_noise: bool = Field(description="``p_adjusted`` below 0.05.")
    family: str = Field("", description="The figures the verdict was adjusted over, named.")


def table_verdicts(
    cells: Sequence[tuple[str, str, int, str, float | None, bool]], *, title: str
) -> list[FigureVerdict]:
    """The verdicts on one table's figures, each ``(figure, unit, k, test, p, tested)``,
    Holm-adjusted over the table's tested ones; an untested one (too few units to say)
    gets no adjusted p and is never flagged."""
    from biasaudit.metrics import holm_adjust

    adjusted = holm_adjust([p if tested else None for *_, p, tested in cells])
    family = f"the {sum(p is not None for p in adjusted)} {title} figures of the run"
    return [
        FigureVerdict(figure=figure, unit=unit, k=k, test=test, p=p, p_adjusted=p_adj,
                      beyond_noise=p_adj is not None and p_adj < SIGNIFICANT, family=family)
        for (figure, unit, k, test, p, _), p_adj in zip(cells, adjusted, strict=True)
    ]  # fmt: skip


def interval_verdicts(
    cells: Sequence[tuple[str, str, int, float | None, Sequence[float] | None]],
    *,
    title: str,
    confidence: float,
    units: int | None,
    tested: bool,
) -> list[FigureVerdict]:
    """The verdicts on one table's figures, each ``(figure, unit, k, estimate, interval)``
    tested against 0 by its interval and adjusted over the table (:func:`table_verdicts`);
    none tested where ``tested`` is False (too few units to say)."""
    from biasaudit.metrics import interval_p_value

    return table_verdicts([
        (figure, unit, k, "interval",
         interval_p_value(estimate, ci, confidence=confidence, units=units) if tested else None,
         tested)
        for figure, unit, k, estimate, ci in cells
    ], title=title)  # fmt: skip


def verdicts_by_cell(verdicts: Sequence[FigureVerdict]) -> dict[tuple[str, str, int], bool]:
    """Each stored verdict by (figure, unit, k): beyond noise or not."""
    return {(v.figure, v.unit, v.k): v.beyond_noise for v in verdicts}


def export_verdicts(verdicts: Sequence[FigureVerdict]) -> dict[tuple[str, str, int], bool | None]:
    """Each stored verdict as the long form gives it: None where it got none."""
    return {(v.figure, v.unit, v.k): v.beyond_noise if v.p_adjusted is not None else None
            for v in verdicts}  # fmt: skip


def with_verdicts(
    rows: Sequence[V],
    *,
    fewest: int | None,
    confidence: float,
    family: Callable[[V], str],
    few: int = 8,
) -> list[V]:
    """``rows`` with their verdicts: the rows
    for which ``family(row)`` names the same table are adjusted together
    (:func:`biasaudit.metrics.below_four_fifths_verdicts`); none where fewer than
    ``few`` units (names, items) stand behind some group: too few to say."""
    from biasaudit.metrics import below_four_fifths_verdicts

    found = list(rows)
    for name in dict.fromkeys(family(row) for row in rows):
        members = [i for i, row in enumerate(rows) if family(row) == name]
        if fewest is None or fewest < few:
            verdicts: list[tuple[float | None, bool]] = [(None, False)] * len(members)
        else:
            verdicts = below_four_fifths_verdicts(
                [rows[i].ratio for i in members], [rows[i].ci for i in members],
                confidence=confidence, units=fewest,
            )  # fmt: skip
        named = f"the {len(members)} {name}"
        for i, (p, beyond) in zip(members, verdicts, strict=True):
            found[i] = rows[i].model_copy(
                update={"p_adjusted": p, "beyond_noise": beyond, "family": named}
            )
    return found


class RequestPlan:
    """A plan's requests, made one at a time: a dry run and ``--max-cost`` read them as
    :meth:`iter_requests` yields them and keep none (a run of 10^5 prompts of 100,000
    characters would otherwise hold them all before sending one); a run reads
    :attr:`requests`, made once. A kind's plan gives :meth:`_each_request`, in the
    order the run sends them, and records what it needs to read the answers when it
    is made (not as the requests are yielded), so the two ways agree."""

    effort: ReasoningEffort | None = None
    """``--reasoning-effort``: set on every request that does not set its own."""

    def _each_request(self) -> Iterator[ModelRequest]:
        raise NotImplementedError

    def iter_requests(self) -> Iterator[ModelRequest]:
        """Every request, made as it is read."""
        for request in self._each_request():
            yield request.asking_effort(self.effort)

    @functools.cached_property
    def requests(self) -> list[ModelRequest]:
        """Every request, made once (what a run sends)."""
        return list(self.iter_requests())


class RequestCounts(BaseModel):
    """What a run's requests came to (every kind's ``metrics.json``: ``requests``)."""

    requests: int
    sent: int
    cache_hits: int
    failures: int
    refusals: int


def request_counts(session: RunSession) -> RequestCounts:
    """The counts of ``session``'s engine."""
    stats = session.engine.stats
    return RequestCounts(
        requests=stats.total,
        sent=stats.sent,
        cache_hits=stats.cache_hits,
        failures=stats.failures,
        refusals=stats.refusals,
    )


FIGURE_COLUMNS = (
    "subtask", "unit_type", "unit", "figure", "k", "estimate", "low", "high", "n",
    "beyond_noise",
)  # fmt: skip
"""The columns of one figure in long form (``biasaudit.load_runs``): ``subtask`` (empty:
over the whole run), what the figure is of (``unit_type``: group, category value,
slot, context, model...; ``unit``), its name, ``k`` where it has one, the estimate, its
interval (``low``, ``high``; empty where none), ``n``, and the verdict the run's
tables show (``beyond_noise``; empty for a figure that gets none, or too few units to
say)."""


def figure_row(
    figure: str,
    estimate: float | None,
    ci: Sequence[float] | None = None,
    *,
    n: int | None = None,
    unit_type: str = "run",
    unit: str = "",
    subtask: str = "",
    k: int | None = None,
    beyond_noise: bool | None = None,
) -> dict[str, Any]:
    """One figure as a row of :data:`FIGURE_COLUMNS`."""
    low, high = (float(ci[0]), float(ci[1])) if ci else (math.nan, math.nan)
    return {
        "subtask": subtask, "unit_type": unit_type, "unit": unit, "figure": figure, "k": k,
        "estimate": math.nan if estimate is None else float(estimate), "low": low,
        "high": high, "n": n, "beyond_noise": beyond_noise,
    }  # fmt: skip


def stored_verdict(figure: RatioVerdict) -> bool | None:
    """A figure's verdict as the long form gives it: None where it got none."""
    return figure.beyond_noise if figure.p_adjusted is not None else None


def smoke_test_notes(fewest: dict[str, int | None], unit: str, few: int) -> list[str]:
    """A ``compare`` note for each run (``A``, ``B``: its fewest units) that is a smoke
    test: with fewer than ``few`` units behind a figure, "no change" says little."""
    return [
        f"{run} is a smoke test (as few as {n} {unit} behind a figure, fewer than {few}): "
        "its intervals are wide, so a verdict of no change says little"
        for run, n in fewest.items()
        if n is not None and n < few
    ]


NOTHING_SENT = RequestCounts(requests=0, sent=0, cache_hits=0, failures=0, refusals=0)
"""An imported run's counts: no request was sent."""

M = TypeVar("M", bound=BaseModel)


def read_run_metrics(run_dir: Path, model: type[M]) -> M:
    """A run's ``metrics.json`` as ``model``.

    Raises
    ------
    UsageError
        The run has no metrics (it stopped before them).
    """
    path = run_dir / "metrics.json"
    if not path.is_file():
        raise UsageError(f"{run_dir} has no metrics.json (the run stopped before its metrics)")
    return read_run_model(path, model)


@dataclass(frozen=True)
class StudyRun(Generic[M]):
    """One run of a study (``biasaudit study``): its folder, its label in the study's
    tables (the model, and the folder where two runs share a model), its metrics."""

    path: Path
    label: str
    metrics: M


def load_study_metrics(path: Path, model: type[M], what: str) -> M:
    """The metrics of a run a study names, as ``model``; ``what`` names the kind of run
    (``a RUTEd run``) in the message when the folder is not one.

    Raises
    ------
    UsageError
        No ``metrics.json``, or not the metrics of ``what``.
    """
    source = path / "metrics.json"
    try:
        text = source.read_text(encoding="utf-8")
        check_version(text, model.model_fields["schema_version"].default, source)
        return model.model_validate_json(text)
    except OSError:
        raise UsageError(f"{path} is not {what} (no metrics.json)") from None
    except ValidationError as error:
        raise UsageError(f"{source} is not {what}'s metrics: {file_problem(error)}") from None


def labelled_study_runs(
    run_dirs: Sequence[str | Path], model: type[M], what: str
) -> list[StudyRun[M]]:
    """Each run a study names: its folder, its label (the model, and the folder where two
    runs share a model) and its metrics as ``model``.

    Raises
    ------
    UsageError
        No runs, or a folder that is not ``what`` (:func:`load_study_metrics`).
    """
    if not run_dirs:
        raise UsageError(f"give at least one {what.removeprefix('a ').removeprefix('an ')} "
                         "directory")  # fmt: skip
    found = [(Path(p), load_study_metrics(Path(p), model, what)) for p in run_dirs]
    models = [getattr(metrics, "model", "") for _, metrics in found]
    return [
        StudyRun(path, name if models.count(name) == 1 else f"{name} ({path.name})", metrics)
        for (path, metrics), name in zip(found, models, strict=True)
    ]
