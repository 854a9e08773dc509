"""What every kind's ``--dry-run --detect D --like RUN`` prints: the chance of
detecting a difference of size D with the audit as configured, and the size (in the
kind's own unit: names per group, pools, items, occupations) that reaches 80% and 95%,
each with its requests and cost.

A kind reads its previous run (``--like``) into one :class:`~biasaudit.metrics.
VarianceModel` per figure that matters (:func:`model_of`: the figure's interval there
gives its SE, which shrinks with the square root of the unit) and hands them here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from pydantic import BaseModel, field_validator, model_validator

from biasaudit.engine.options import Flag, sizing_field
from biasaudit.errors import UsageError
from biasaudit.kinds.common import read_run_metrics
from biasaudit.store.runs import read_manifest
from biasaudit.textfiles import a_run

if TYPE_CHECKING:
    from biasaudit.kinds._rounds import FileUnits, Growth
    from biasaudit.metrics import VarianceModel

M = TypeVar("M", bound=BaseModel)

__all__ = [
    "TARGETS",
    "Planned",
    "PlanningFields",
    "UntilFields",
    "like_pools",
    "model_of",
    "plan_in_file_units",
    "plan_in_pools",
    "power_lines",
    "run_pilot",
    "stated",
    "stated_pools",
]


class PlanningFields(BaseModel):
    """The fields of ``--dry-run --detect D --like RUN``, in every kind's spec."""

    detect: float | None = sizing_field(
        None,
        gt=0.0,
        le=1.0,
        description="With --dry-run: the smallest difference worth detecting (allocation and "
        "listwise: |ΔDP| at headline_k; Grade Score: a change of the score; RUTEd: the "
        "skew); prints the chance this audit detects it (power) and the size that reaches "
        "80% and 95%, from --like RUN, --pilot N, or else stated cautious defaults.",
    )
    like: Path | None = sizing_field(
        None,
        description="A previous run of this task (a small pilot, say) whose intervals give "
        "the variance that --detect plans with.",
    )
    pilot: int | None = sizing_field(
        None,
        ge=1,
        le=1_000_000,
        description="With --dry-run --detect: run a pilot of about N requests first (sent, "
        "and cached: the audit reuses them) and plan from it: fewer names per group, pools "
        "or items (not RUTEd).",
    )


class UntilFields(BaseModel):
    """``--until``: the rule that ends an audit run in rounds
    (:mod:`biasaudit.kinds._rounds`); each kind adds the fields of the unit it grows by
    (``round_names`` / ``max_names``, ``round_pools`` / ``max_pools``, ...)."""

    until: Annotated[str | None, Flag(metavar="decided|precise:H")] = sizing_field(
        None,
        description="Run in rounds, each adding units (names, pools, items or replicates), "
        "until the answer is known: 'precise:H' (every interval the rule reads at most ±H) "
        "or 'decided' (every gap's interval excludes 0, or its interval at 1 - 2 alpha, 90%, "
        "lies within ±--detect); intervals valid at every look (a confidence sequence, or "
        "group-sequential boundaries with --like, for the kinds that plan their unit).",
    )

    @field_validator("until")
    @classmethod
    def _until(cls, value: str | None) -> str | None:
        if value is None or value == "decided":
            return value
        kind, _, number = value.partition(":")
        try:
            width = float(number)
        except ValueError:
            width = -1.0
        if kind != "precise" or not 0 < width <= 1:
            raise ValueError("must be 'decided' or 'precise:H' with 0 < H <= 1, e.g. precise:0.03")
        return value

    @model_validator(mode="after")
    def _until_needs(self) -> Any:
        if self.until == "decided" and getattr(self, "detect", 1.0) is None:
            raise ValueError("--until decided needs --detect D: the gap that matters")
        if self.until == "decided" and getattr(self, "confidence", 0.95) <= 0.5:
            raise ValueError(
                "--until decided needs --confidence above 0.5: 'within ±D' is read at "
                "1 - 2 alpha (two one-sided tests)"
            )
        return self


TARGETS = (0.8, 0.95)


@dataclass(frozen=True)
class Planned:
    """The figures a plan is for: ``what`` they are (``|ΔDP|``) and ``where`` (`` at k=1
    against W_M``), the ``unit`` that grows (``names per group``), one model per figure
    (by its label), the previous run's confidence and name, and ``how`` the SE grows
    with the unit [default: scaled by 1/sqrt(unit)]."""

    what: str
    unit: str
    models: Mapping[str, VarianceModel]
    confidence: float
    source: str
    where: str = ""
    how: str = ""


def stated(
    what: str,
    unit: str,
    labels: Sequence[str],
    per_unit: float,
    now: int,
    why: str,
    *,
    confidence: float = 0.95,
    where: str = "",
    pilot: bool = True,
) -> Planned:
    """A plan from stated defaults, where there is neither ``--like`` nor ``--pilot``:
    every figure's variance is ``per_unit`` over the units, the most a unit's share can
    be where the figure sits at its stated value (``why`` says how). Cautious: a pilot
    usually plans for fewer units (docs/how-to/size-and-stop.md gives an example),
    though not always (a rate far from its stated p, or the items' share, which the
    defaults leave out).
    ``pilot``: whether the kind can run a pilot (the line suggests one)."""
    from biasaudit.metrics import VarianceModel

    model = VarianceModel(per_unit, 0.0, max(now, 1))
    better = "--pilot N or --like RUN" if pilot else "--like RUN"
    source = f"stated defaults ({why}; cautious: {better} usually plans for fewer {unit})"
    return Planned(what, unit, dict.fromkeys(labels, model), confidence, source, where)


def model_of(
    bounds: Sequence[float] | None,
    units: int,
    confidence: float,
    *,
    estimated: bool = True,
    interval_units: int | None = None,
) -> VarianceModel | None:
    """A figure's model from its interval (``estimate ± t · SE``, t over
    ``interval_units`` as :func:`~biasaudit.metrics.critical_value` gives it; z where
    None) over ``units``; None where it has none or too few units. ``estimated``: the
    SE was estimated from the units' spread, so its plan allows for its uncertainty on
    ``units - 1`` degrees of freedom (:attr:`~biasaudit.metrics.VarianceModel.df`)."""
    from biasaudit.metrics import critical_value

    if bounds is None or units < 2:
        return None
    se = (bounds[1] - bounds[0]) / (2 * critical_value(confidence, interval_units))
    if not se > 0:
        return None
    from biasaudit.metrics import VarianceModel

    return VarianceModel(se * se * units, 0.0, units, df=units - 1 if estimated else None)


def power_lines(
    planned: Planned,
    detect: float,
    now: int | None,
    cost_at: Callable[[int], tuple[int, float | None]] | None,
) -> list[str]:
    """The power as configured (``now`` units; per figure, and the weakest), and the units
    for each of :data:`TARGETS` with ``cost_at(units)`` (requests to send, cost)."""
    confidence = planned.confidence
    level = f"{100 * (1 - confidence):g}%"
    models = planned.models
    dfs = sorted({m.df for m in models.values() if m.df is not None})
    allowing = (
        f"; power averaged over the uncertainty of its variance ({dfs[0]} degrees of "
        "freedom; Julious & Owen 2006)" if dfs else ""
    )  # fmt: skip
    lines = [
        f"power to detect {planned.what} >= {detect:g}{planned.where} (its interval excluding 0; "
        f"two-sided, {level} level), from {planned.source}: "
        f"{planned.how or f'SE scaled by 1/sqrt({planned.unit})'}{allowing}"
    ]
    if now is not None:
        powers = {label: m.power(detect, now, confidence=confidence) for label, m in models.items()}
        shown = ", ".join(f"{label} {p:.0%}" for label, p in powers.items())
        lines.append(
            f"  as configured ({now} {planned.unit}): {min(powers.values()):.0%} for the "
            f"weakest ({shown})"
        )
    for target in TARGETS:
        needed = [m.names_for(detect, target, confidence=confidence) for m in models.values()]
        if any(n is None for n in needed):
            lines.append(f"  {target:.0%} power: no number of {planned.unit} reaches it")
            continue
        size = max(n for n in needed if n is not None)
        text = f"  {target:.0%} power: {size} {planned.unit}"
        if cost_at is not None:
            requests, cost = cost_at(size)
            price = "cost unknown" if cost is None else f"${cost:.2f}"
            text += f", {requests} requests to send, {price}"
        lines.append(text)
    return lines


def scaled_cost(
    spec: Any, cost_at: Callable[[Any], tuple[int, float | None]], now: int
) -> Callable[[int], tuple[int, float | None]]:
    """``(size) -> (requests to send, cost)`` where requests grow in proportion to a unit
    the spec cannot resize itself (items or occupations in a file): from the spec as it
    is (its cached answers stay free) and as if nothing were cached (the price of one
    request)."""
    to_send, _ = cost_at(spec.model_copy(update={"detect": None}))
    total, total_cost = cost_at(spec.model_copy(update={"detect": None, "fresh": True}))
    cached = total - to_send
    now = max(now, 1)

    def sized(size: int) -> tuple[int, float | None]:
        sending = max(0, round(total * size / now) - cached)
        each = None if total_cost is None else total_cost / max(total, 1)
        return sending, None if each is None else each * sending

    return sized


def like_metrics(spec: Any, kind: str, model: type[M], what: str) -> tuple[Path, M]:
    """The ``--like`` run of a spec with ``--detect``, and its metrics as ``model``;
    ``what`` names the run a kind wants (``a Grade Score run``).

    Raises
    ------
    UsageError
        No ``--like``, or a run of another kind.
    """
    if spec.like is None:
        raise UsageError(f"--detect needs --like RUN: {what} of this task (a pilot will do)")
    like = Path(spec.like)
    manifest = read_manifest(like)
    if manifest.kind != kind:
        raise UsageError(f"--like {like}: {a_run(manifest.kind)}, not {what}")
    return like, read_run_metrics(like, model)


def run_pilot(
    spec: Any,
    growth: Growth,
    audit: Callable[[Any], Any],
    cost_at: Callable[[Any], tuple[int, float | None]],
    *,
    least: int = 3,
) -> tuple[Path, str]:
    """Run a pilot of about ``spec.pilot`` requests: ``audit`` (the kind's run) at the
    size of the growth's unit that sends about that many (at least ``least``, at most
    the audit's own size), drawn as the rounds of ``--until`` draw (nested), so that an
    audit drawn the same way reuses its answers; its run and a line saying what it sent.

    Raises
    ------
    UsageError
        The task does not grow by that unit (a pilot needs a size to choose).
    """
    if growth.size not in type(spec).model_fields:
        raise UsageError(f"--pilot chooses {growth.unit}: {growth.tasks} only; give --like RUN")
    quiet = {"detect": None, "pilot": None, "until": None, "like": None, **growth.nested}
    per_unit, _ = cost_at(spec.model_copy(update={growth.size: 1, "fresh": True, **quiet}))
    now = getattr(spec, growth.size) or growth.most(spec)
    size = min(max(least, round(spec.pilot / max(per_unit, 1))), now)
    result = audit(spec.model_copy(update={growth.size: size, **quiet}))
    drawn = ", ".join(f"--{key.replace('_', '-')} {value}" for key, value in growth.nested.items())
    same = f" when they are drawn the same way, {drawn}" if drawn else ""
    line = (
        f"pilot: {size} {growth.unit}, {result.manifest.counts.sent} requests sent (cached: "
        f"the audit reuses them{same}): {result.run_dir}"
    )
    return result.run_dir, line


def plan_in_file_units(
    spec: Any,
    cost_at: Callable[[Any], tuple[int, float | None]],
    *,
    units: FileUnits,
    growth: Growth,
    audit: Callable[[], Callable[[Any], Any]],
    planned: Callable[[Any], Planned],
) -> list[str]:
    """The power lines of a kind that grows by ``units`` read from a file (Grade Score's
    items, the decisions' scenarios): none without ``detect``; with ``pilot``, a pilot
    run first (``audit()`` gives the kind's run, imported when needed) and planned from;
    ``planned(spec)`` the plan (from ``like``, or stated defaults); last, where units are
    added."""
    if spec.detect is None:
        return []
    lines = []
    if spec.pilot is not None:
        like, line = run_pilot(spec, growth, audit(), cost_at, least=4)
        spec = spec.model_copy(update={"like": like})
        lines.append(line)
    now = units.count(spec)
    lines += power_lines(planned(spec), spec.detect, now, scaled_cost(spec, cost_at, now))
    where = (
        f"  {units.unit} come from the {units.unit} file: add {units.unit} there to reach a size"
    )
    return [*lines, where]


def like_pools(like: Path) -> int:
    """The pools per subtask of a previous run (its ``spec.json``); 0 where it has none
    (an imported run: its pools are not an audit's unit)."""
    import json

    try:
        return int(json.loads((like / "spec.json").read_text(encoding="utf-8"))["pools"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def stated_pools(spec: Any) -> Planned:
    """A plan in pools per subtask without a previous run (listwise and pairwise
    audits): a group's place in each pool at the headline k is taken or not (a chance
    that varies as much as a rate can), so its ΔDP has variance ``2 p (1 - p)`` a pool,
    over the pools of every subtask; p = k over the pool's size."""
    from biasaudit.kinds.candidates.tasks import build_task

    task = build_task(spec)
    size = len(task.groups) if task.pool.kind == "one_per_group" else task.pool.size or 2
    subtasks = len({candidate.subtask for candidate in task.candidates}) or 1
    k = min(spec.headline_k, size)
    p = k / size
    groups = [g for g in task.groups if g != task.reference_group]
    why = (
        f"each pool's place taken or not: SE² = 2p(1-p)/(pools x {subtasks} subtasks), "
        f"p = {k}/{size}"
    )
    return stated("|ΔDP|", "pools per subtask", groups, 2 * p * (1 - p) / subtasks, spec.pools,
                  why, confidence=spec.confidence,
                  where=f" at k={k} against {task.reference_group}")  # fmt: skip


def plan_in_pools(
    spec: Any,
    cost_at: Callable[[Any], tuple[int, float | None]],
    growth: Growth,
    audit: Callable[[Any], Any],
    planned: Callable[[Any, int], Planned],
) -> list[str]:
    """The power lines of an audit sized in pools per subtask (listwise, pairwise): from
    a pilot of fewer pools drawn as ``growth`` draws them (``audit``: the kind's run),
    from ``like`` (``planned``: the kind's plan from a previous run), or from
    :func:`stated_pools`."""
    lines = []
    if spec.pilot is not None:
        like, line = run_pilot(spec, growth, audit, cost_at)
        spec = spec.model_copy(update={"like": like})
        lines.append(line)

    def sized(pools: int) -> tuple[int, float | None]:
        return cost_at(spec.model_copy(update={"pools": pools, "detect": None}))

    plan = planned(spec, spec.headline_k) if spec.like is not None else stated_pools(spec)
    return [*lines, *power_lines(plan, spec.detect, spec.pools, sized)]
