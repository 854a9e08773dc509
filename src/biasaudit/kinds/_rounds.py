"""``--until``: an audit that grows in rounds until its answer is known, in every kind.

Round 1 runs the audit at its configured size; each later round adds more of the unit
the kind grows by (:class:`Growth`: names per group for resume screening, pools per
subtask for listwise audits, items for Grade Score, replicates for RUTEd), drawn
nested: a round keeps every unit of the rounds before it, so their answers come from
the cache and are paid for once. The rounds end when the rule holds:

- ``precise:H``: every figure the rule reads (:attr:`Growth.read`: ΔDP at the headline
  k per group; each Grade Score score; each RUTEd context's skew) has an interval at
  most ±H;
- ``decided``: every such figure's interval excludes 0 (a gap beyond noise), or its
  interval at 1 - 2 alpha (90% for 95%: two one-sided tests, :func:`equivalence_level`)
  lies within ±D (``--detect D``: no gap that matters).

The rule reads intervals valid at every look, however many rounds there are
(:func:`biasaudit.metrics.sequence_multiplier`: an asymptotic confidence sequence,
Waudby-Smith et al. 2024, over the kind's unit, tightest at half of its ceiling), so
stopping when it holds keeps their coverage. Where a kind can size a design from a
power plan (:attr:`Growth.design`: resume screening and listwise audits with
``--like``), ``decided`` follows a group-sequential design instead
(:func:`planned_design`): five looks, each read on its
O'Brien-Fleming-type boundary (:func:`biasaudit.metrics.spending_boundaries`, Lan &
DeMets 1983) on the t scale of the look's units (:func:`biasaudit.metrics.t_boundary`,
Jennison & Turnbull 2000, 3.8).

Each round is an ordinary run directory; the last one also holds ``rounds.json``
(:class:`RoundsRecord`): every round (its size, requests sent, each figure's estimate,
the run's own interval and the ones the rule reads), why the audit stopped, and the
size and requests of the fixed-size audit of the same precision (``precise``: its
intervals' Student t included) or the
one the power analysis recommends for D at 80% (``decided``), with the spec as asked
and the design's looks. ``replay`` of the last round runs every round again from the
cache, on the recorded design, and checks them (:mod:`biasaudit.replay`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, TextIO

from pydantic import BaseModel, Field, model_validator

from biasaudit.errors import RunAbortedError, RunInterruptedError, UsageError
from biasaudit.metrics import VarianceModel, critical_value, sequence_multiplier, t_boundary
from biasaudit.store.runs import read_run_model

__all__ = [
    "ROUNDS_FILE",
    "Design",
    "Figure",
    "FileUnits",
    "Growth",
    "RoundsRecord",
    "audit_until",
    "equivalence_level",
    "failure_stopped",
    "growth_for",
    "planned_design",
    "pools_growth",
    "read_rounds",
    "rounds_lines",
    "until_lines",
]

ROUNDS_FILE = "rounds.json"


class Figure(NamedTuple):
    """One figure the rule reads in a round: its estimate, the run's own interval (None:
    too few units for one, and the rule cannot hold yet), and the units behind it (the
    confidence sequence's n; a design's degrees of freedom)."""

    estimate: float
    bounds: Sequence[float] | None
    units: int
    limits: tuple[float, float] = (-1.0, 1.0)
    """The values the figure can take (a gap or a skew: -1 to 1; a score: 0 to 1): the
    intervals of the rounds are cut to them, as the runs' own intervals are."""
    interval_units: int | None = None
    """The units whose Student t made the run's own interval (None: normal), to read its
    standard error back (:func:`biasaudit.metrics.critical_value`)."""


class Design(NamedTuple):
    """A group-sequential design: the sizes of its looks, each look's boundary for a
    gap and for 'within ±D', and the fixed size the plan recommends (80% power)."""

    looks: list[int]
    boundaries: list[float]
    equivalence: list[float]
    fixed: int


@dataclass(frozen=True)
class Growth:
    """How one kind's audit grows in rounds (a kind's ``growth``)."""

    unit: str
    """What a round adds, e.g. ``names per group``; its first word heads the table."""
    size: str
    """The spec field that sets a round's size, e.g. ``names_per_group``."""
    step: str
    """The spec field of the units each round adds [default: the first round's]."""
    most: Callable[[Any], int]
    """``(spec) -> int``: the ceiling, e.g. ``max_names``, or the items in the file."""
    ceiling: str
    """Where the ceiling comes from, e.g. ``--max-names``."""
    figure: Callable[[Any], str]
    """``(spec) -> str``: what the rule reads, e.g. ``ΔDP at k=1``."""
    read: Callable[[Any, Any], dict[str, Figure]]
    """``(metrics, spec) -> {label: Figure}``: the figures the rule reads in a round (the
    round's spec, at its size); their units in the unit the rounds grow by."""
    nested: Mapping[str, Any] = field(default_factory=dict)
    """Spec fields that make each round's draws keep the rounds' before."""
    design: Callable[[Any, float], Design | None] | None = None
    """``(spec, confidence) -> Design``: a group-sequential design, where a power plan
    can size one (else the confidence sequence)."""
    undecidable: str | None = None
    """Why ``decided`` has no meaning for the kind (None: it has)."""
    tasks: str = ""
    """The kind's tasks that grow, where not all do (their specs have ``size``)."""


def pools_growth(
    read: Callable[[Any, Any], dict[str, Figure]],
    design: Callable[[Any, float], Design | None] | None = None,
) -> Growth:
    """The growth of an audit by pools per subtask (pairwise, listwise: the spec fields of
    :class:`~biasaudit.kinds.candidates.spec.PoolRounds`), reading each group's ΔDP at the
    headline k with ``read``."""
    return Growth(
        unit="pools per subtask",
        size="pools",
        step="round_pools",
        most=lambda spec: spec.max_pools,
        ceiling="--max-pools",
        figure=lambda spec: f"ΔDP at k={spec.headline_k}",
        read=read,
        nested={"pools_drawn": "nested"},
        design=design,
    )


@dataclass(frozen=True)
class FileUnits:
    """The units of an audit that come from a file and that it grows by (Grade Score's
    items, the decisions' scenarios): how many of the file's it asks (``limit``, a spec
    field), the most its rounds may reach (``ceiling``, a spec field; at most the
    file's), and ``count(spec)``, the units the spec's audit asks."""

    unit: str
    """e.g. ``items``; the spec field of the units each round adds is ``round_<unit>``."""
    limit: str
    ceiling: str
    count: Callable[[Any], int]

    def in_file(self, spec: Any) -> int:
        """The rounds' ceiling: ``ceiling``, at most the units in the file."""
        whole = self.count(spec.model_copy(update={self.limit: None}))
        most = getattr(spec, self.ceiling)
        return whole if most is None else min(most, whole)

    def growth(
        self,
        figure: str,
        read: Callable[[Any, Any], dict[str, Figure]],
        undecidable: str | None = None,
    ) -> Growth:
        """The kind's :class:`Growth` by these units, reading ``figure`` with ``read``."""
        return Growth(
            unit=self.unit,
            size=self.limit,
            step=f"round_{self.unit}",
            most=self.in_file,
            ceiling=f"--{self.ceiling.replace('_', '-')}, at most the file's",
            figure=lambda spec: figure,
            read=read,
            undecidable=undecidable,
        )


class Look(BaseModel):
    """One figure in one round."""

    estimate: float
    interval: list[float] = Field(description="Valid at every look (the rule reads it).")
    fixed_interval: list[float] = Field(description="The run's own, for this size alone.")
    units: int = Field(description="Units behind the figure (names, pools, items, replicates).")
    multiplier: float | None = Field(
        None, description="The SEs on each side of the estimate that ``interval`` spans."
    )
    interval_units: int | None = Field(
        None,
        description="The units whose Student t made fixed_interval (None: normal, or a run "
        "before intervals took t).",
    )
    equivalence_interval: list[float] | None = Field(
        None,
        description="decided: valid at every look at 1 - 2 alpha (90% for 95%): within ±D "
        "it settles the figure as no gap that matters (two one-sided tests).",
    )

    @model_validator(mode="before")
    @classmethod
    def _version_1(cls, data: Any) -> Any:
        if isinstance(data, dict) and "names" in data and "units" not in data:
            data = {**data, "units": data["names"]}
        return data


class Round(BaseModel):
    size: int = Field(description="The round's size in the record's unit.")
    run_dir: str
    requests: int
    sent: int
    figures: dict[str, Look]

    @model_validator(mode="before")
    @classmethod
    def _version_1(cls, data: Any) -> Any:
        if isinstance(data, dict) and "names" in data and "size" not in data:
            data = {**data, "size": data["names"], "figures": data.get("groups", {})}
        return data


class RoundsRecord(BaseModel):
    """``rounds.json`` of an audit run with ``--until``."""

    schema_version: int = 2
    until: str
    unit: str = Field("names per group", description="What each round adds.")
    figure: str = Field(description="What the rule reads, e.g. 'ΔDP at k=1'.")
    detect: float | None = None
    confidence: float
    design: str = Field(
        "confidence sequence",
        description="'confidence sequence' (looks at will), or 'group sequential' (five "
        "planned looks with O'Brien-Fleming-type boundaries, from --like's power plan).",
    )
    equivalence_confidence: float | None = Field(
        None, description="decided: the level of the intervals read for 'within ±D'."
    )
    equivalence_boundaries: list[float] | None = Field(
        None, description="Group sequential: each look's critical value for 'within ±D'."
    )
    boundaries: list[float] | None = Field(
        None, description="Group sequential: each look's critical value (SEs)."
    )
    tightest_at: float = Field(description="The size where the sequence is tightest.")
    rounds: list[Round]
    stopped: str = Field(description="Why the audit stopped.")
    sent: int = Field(description="Requests sent over every round.")
    fixed_size: int | None = Field(
        None,
        description="The fixed-size audit to compare with: of the same precision "
        "(precise), or the one the power analysis recommends at 80% for D (decided).",
    )
    fixed_size_quantile: Literal["normal", "student t"] | None = Field(
        None,
        description="precise: the quantile the fixed size was solved with ('student t': "
        "its interval's t at that size; None in records before 2026-11-27: the normal).",
    )
    fixed_requests: int | None = None
    looks: list[int] | None = Field(
        None, description="Group sequential: the sizes of the planned looks."
    )
    spec: dict[str, Any] | None = Field(
        None,
        description="The spec as asked (with until), which replay runs again, round by "
        "round, from the cache.",
    )

    def planned(self) -> Design | None:
        """The group-sequential design the rounds followed, as recorded (None: the
        confidence sequence, or a record from before looks were recorded)."""
        if self.looks is None or self.boundaries is None or self.fixed_size is None:
            return None
        return Design(self.looks, self.boundaries, self.equivalence_boundaries or [],
                      self.fixed_size)  # fmt: skip

    @model_validator(mode="before")
    @classmethod
    def _version_1(cls, data: Any) -> Any:
        # Version 1 (allocation only) named sizes in names and its figure by its k.
        if isinstance(data, dict) and "k" in data and "figure" not in data:
            data = {**data, "figure": f"ΔDP at k={data.get('k')}",
                    "fixed_size": data.get("fixed_names")}  # fmt: skip
        return data


def planned_design(
    spec: Any, models: Mapping[str, VarianceModel], first: int, most: int, confidence: float
) -> Design | None:
    """A group-sequential design for ``decided`` sized by a power plan's ``models``: five
    looks from ``first`` up to 1.1 times the size that gives 80% power for D (at most
    ``most``), each with its boundary for a gap and for 'within ±D'
    (:func:`equivalence_level`); None where no size reaches 80% (the confidence
    sequence is used)."""
    from biasaudit.metrics import spending_boundaries

    needed = [m.names_for(spec.detect, 0.8, confidence=confidence) for m in models.values()]
    if not needed or any(n is None for n in needed):
        return None
    fixed = max(n for n in needed if n is not None)
    last = min(most, math.ceil(1.1 * fixed))
    looks = sorted({max(first, math.ceil(last * j / 5)) for j in range(1, 6)})
    fractions = [n / looks[-1] for n in looks]
    return Design(
        looks,
        spending_boundaries(fractions, confidence=confidence),
        spending_boundaries(fractions, confidence=equivalence_level(confidence)),
        fixed,
    )


def read_rounds(run_dir: Path) -> RoundsRecord | None:
    """The run's ``rounds.json``, or None where it ran at one size.

    Raises
    ------
    UsageError
        The file cannot be read, or is not a rounds record (damaged), naming it.
    """
    path = run_dir / ROUNDS_FILE
    if not path.is_file():
        return None
    return read_run_model(path, RoundsRecord)


def equivalence_level(confidence: float) -> float:
    """The level of the intervals that settle a figure as 'within ±D': 1 - 2 alpha (90%
    for 95%). Within ±D at that level is two one-sided tests at alpha each (Schuirmann,
    "A comparison of the two one-sided tests procedure...", J. Pharmacokin. Biopharm.
    15, 1987), read on repeated intervals so that it holds at every look (Jennison &
    Turnbull 2000, ch. 6): the chance of declaring 'no gap that matters' where the gap
    is D or more stays at most alpha, as the chance of declaring a gap where there is
    none does."""
    return 2 * confidence - 1


def growth_for(kind: Any, spec: Any) -> Growth:
    """How ``kind`` (a :class:`~biasaudit.kinds.declare.Kind`) grows an audit of ``spec``
    in rounds (allocation: names pointwise, pools pairwise).

    Raises
    ------
    UsageError
        The kind declares none (an optional step): it does not run in rounds.
    """
    declared: Growth | None = kind.growth(spec)
    if declared is None:
        from biasaudit.errors import UsageError

        raise UsageError("--until: this kind of audit does not run in rounds")
    return declared


def _z(confidence: float) -> float:
    from biasaudit.metrics import critical_value

    return critical_value(confidence)


def _looks(
    figures: Mapping[str, Figure],
    confidence: float,
    multiplier: Callable[[int], float],
    equivalence: Callable[[int], float] | None = None,
) -> dict[str, Look]:
    """Each figure with the intervals the rule reads: ``estimate ± multiplier(units) ·
    SE`` (the SE from the run's own interval), and for ``decided`` the equivalence
    interval, ``estimate ± equivalence(units) · SE``."""
    found = {}
    for label, figure in figures.items():
        if figure.bounds is None or figure.units < 2:
            continue
        se = (figure.bounds[1] - figure.bounds[0]) / (
            2 * critical_value(confidence, figure.interval_units)
        )
        times = multiplier(figure.units)
        half = se * times
        within = None
        if equivalence is not None:
            narrower = se * equivalence(figure.units)
            within = [figure.estimate - narrower, figure.estimate + narrower]
        low, high = figure.limits
        found[label] = Look(
            estimate=figure.estimate, units=figure.units, multiplier=times,
            interval=[max(low, figure.estimate - half), min(high, figure.estimate + half)],
            fixed_interval=list(figure.bounds), equivalence_interval=within,
            interval_units=figure.interval_units,
        )  # fmt: skip
    return found


def _t_scaled(boundary: float, units: int) -> float:
    """A group-sequential boundary read on the t scale of an SE from ``units`` units
    (:func:`biasaudit.metrics.t_boundary`, ``units - 1`` degrees of freedom)."""
    return t_boundary(boundary, max(units - 1, 1))


def _settled(spec: Any, looks: Mapping[str, Look], read: int) -> str | None:
    """Why the rule holds over the ``read`` figures, or None (also where some figure has
    no interval yet)."""
    if not looks or len(looks) < read:
        return None
    if spec.until == "decided":
        d = spec.detect
        for look in looks.values():
            low, high = look.interval
            near, far = look.equivalence_interval or look.interval
            if not (low > 0 or high < 0 or (near > -d and far < d)):
                return None
        return f"decided: every gap is beyond noise or within ±{d:g}"
    width = float(spec.until.partition(":")[2])
    if all((look.interval[1] - look.interval[0]) / 2 <= width for look in looks.values()):
        return f"precise: every interval is within ±{width:g}"
    return None


def _fixed_size(
    spec: Any, last: Round, confidence: float, quantile: str | None = "student t"
) -> int | None:
    """The fixed-size audit to compare with (see :class:`RoundsRecord`), from the last
    round's own intervals, their SE scaled by 1/sqrt(size) (a design's plan gives its
    own: :class:`Design`). ``precise``: the smallest size whose interval is within
    ±width, with the Student t of the units it would have (``quantile`` 'student t';
    units in proportion to the size) where the figure's interval takes one, else the
    normal quantile (as records before 2026-11-27 did, which a replay repeats)."""
    z = _z(confidence)
    sizes = []
    for look in last.figures.values():
        se = (look.fixed_interval[1] - look.fixed_interval[0]) / (
            2 * critical_value(confidence, look.interval_units)
        )
        if se <= 0:
            continue
        model = VarianceModel(se * se * last.size, 0.0, last.size)
        if spec.until == "decided":
            needed = model.names_for(spec.detect, 0.8, confidence=confidence)
        else:
            width = float(spec.until.partition(":")[2])
            needed = math.ceil(model.names * (z / width) ** 2)
            if quantile == "student t" and look.interval_units is not None:
                per_size = look.interval_units / last.size
                needed = _t_size(model.names, width, confidence, per_size, max(needed, 2))
        if needed is None:
            return None
        sizes.append(max(needed, 2))  # an interval needs two units
    return max(sizes) if sizes else None


def _t_size(
    variance: float, width: float, confidence: float, per_size: float, at_least: int
) -> int:
    """The smallest size from ``at_least`` (the normal quantile's answer, which t only
    raises) whose interval, ``t(units) * sqrt(variance / size)`` with ``per_size`` units
    a unit of size, is within ±``width``."""
    size = at_least
    while (
        critical_value(confidence, round(size * per_size)) * math.sqrt(variance / size) > width
        and size < 100 * at_least
    ):
        size += 1
    return size


def _check(spec: Any, growth: Growth) -> int:
    """The ceiling of ``spec``'s rounds.

    Raises
    ------
    UsageError
        A task that does not grow; ``decided`` where the kind has no gap to decide; a
        first round above the ceiling.
    """
    if growth.size not in type(spec).model_fields:
        raise UsageError(f"--until grows an audit by {growth.unit}: {growth.tasks} only, for now")
    if spec.until == "decided" and growth.undecidable is not None:
        raise UsageError(f"--until decided: {growth.undecidable}; use --until precise:H")
    most = growth.most(spec)
    first = getattr(spec, growth.size)
    if first > most:  # named as the first round: --until sets it where it is not given
        flag = growth.size.replace("_", "-")
        raise UsageError(
            f"--until: the first round, {first} {growth.unit} (--{flag}), is above "
            f"{growth.ceiling} ({most}): start from fewer with --{flag}, or run without --until"
        )
    return most


_FAILED = " stopped: "
"""What follows the round in ``stopped`` of rounds a failure stopped (:func:`audit_until`)."""


def failure_stopped(record: RoundsRecord) -> bool:
    """Whether a failure (the endpoint, storage, the budget, Ctrl-C) stopped the rounds,
    rather than their rule or their ceiling."""
    return record.stopped.startswith("round ") and _FAILED in record.stopped


def audit_until(
    spec: Any,
    growth: Growth,
    audit: Callable[..., Any],
    *,
    provider: Any = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
    recorded: RoundsRecord | None = None,
) -> Any:
    """Run ``spec`` in rounds of ``audit`` (the kind's run at one size) until its
    ``until`` rule holds; see the module docstring. Returns the last round's run.

    ``recorded``: the rounds of the audit a replay repeats, which it follows as they
    were recorded: their group-sequential design in place of the one the growth
    plans, the round a failure stopped them at (whatever the cache holds now), and
    the quantile their fixed size was solved with (:func:`_fixed_size`).

    Raises
    ------
    UsageError
        ``decided`` where the kind has no gap to decide, or a first round above the
        ceiling (before anything is sent).
    RunAbortedError, RunInterruptedError
        A round stopped (the endpoint, storage, the budget, Ctrl-C); the rounds before
        it are kept as they are, and the last of them records them all in its
        ``rounds.json``, with the round that stopped.
    """
    most = _check(spec, growth)
    provider = provider or spec.resolve_provider()
    design, stopped, quantile = _as_recorded(recorded)
    first = getattr(spec, growth.size)
    step = getattr(spec, growth.step) or first
    target = max(most / 2, first)
    if design is None and growth.design is not None:
        design = growth.design(spec, spec.confidence)
    size = design.looks[0] if design else first
    rounds: list[Round] = []
    sent, confidence, result = 0, spec.confidence, None
    while True:
        update = {growth.size: size, **growth.nested, "until": None, "like": None}
        sized = spec.model_copy(update=update)
        try:
            result = audit(sized, provider=provider, stderr=stderr, command=command)
        except (RunAbortedError, RunInterruptedError) as error:
            if result is not None:  # the rounds before are kept, and recorded
                why = f"round {len(rounds) + 1} ({size} {growth.unit}){_FAILED}{error}"
                _write(result.run_dir, spec, growth, design, rounds, why, sent, target,
                       confidence, quantile)  # fmt: skip
                if stderr is not None:
                    print(f"the rounds before it: {result.run_dir / ROUNDS_FILE}", file=stderr)
            raise
        counts = result.manifest.counts
        sent += counts.sent
        confidence = result.metrics.confidence
        if design is not None:  # the look's boundaries, on the t scale of its units' SE
            multiplier = functools.partial(_t_scaled, design.boundaries[len(rounds)])
            equivalence = functools.partial(_t_scaled, design.equivalence[len(rounds)])
        else:
            multiplier = functools.partial(
                sequence_multiplier, target_n=target, confidence=confidence)  # fmt: skip
            equivalence = functools.partial(sequence_multiplier, target_n=target,
                                            confidence=equivalence_level(confidence))  # fmt: skip
        figures = growth.read(result.metrics, sized)
        looks = _looks(figures, confidence, multiplier,
                       equivalence if spec.until == "decided" else None)  # fmt: skip
        rounds.append(Round(size=size, run_dir=str(result.run_dir), requests=counts.requests,
                            sent=counts.sent, figures=looks))  # fmt: skip
        reason = _settled(spec, looks, len(figures))
        if reason is None and stopped is not None and len(rounds) >= stopped[0]:
            reason = stopped[1]  # a replay stops where the original was stopped
        last_look = design.looks[-1] if design else most
        if reason is None and size >= last_look:
            reason = (
                f"reached the design's last look ({last_look} {growth.unit}) with some "
                "figure undecided" if design
                else f"reached the ceiling, {most} {growth.unit} ({growth.ceiling}), before "
                "the rule held"
            )  # fmt: skip
        if reason is not None:
            break
        size = design.looks[len(rounds)] if design else min(size + step, most)
    _write(result.run_dir, spec, growth, design, rounds, reason, sent, target, confidence,
           quantile)  # fmt: skip
    return result


def _as_recorded(
    recorded: RoundsRecord | None,
) -> tuple[Design | None, tuple[int, str] | None, str | None]:
    """What a replay of ``recorded`` follows: the design (None: the one the growth
    plans), where a failure stopped the rounds (rounds, why; None: they were not) and
    the fixed size's quantile (None in records from before it was recorded: the
    normal's). None: a new audit's."""
    if recorded is None:
        return None, None, "student t"
    stopped = (len(recorded.rounds), recorded.stopped) if failure_stopped(recorded) else None
    return recorded.planned(), stopped, recorded.fixed_size_quantile


def _write(
    run_dir: Path,
    spec: Any,
    growth: Growth,
    design: Design | None,
    rounds: list[Round],
    stopped: str,
    sent: int,
    target: float,
    confidence: float,
    quantile: str | None,
) -> None:
    """``rounds.json`` of the rounds run so far, in ``run_dir`` (the last one's)."""
    last = rounds[-1]
    decided = spec.until == "decided"
    precise = not decided and design is None
    fixed = design.fixed if design else _fixed_size(spec, last, confidence, quantile)
    record = RoundsRecord(
        until=spec.until, unit=growth.unit, figure=growth.figure(spec), detect=spec.detect,
        design="group sequential" if design else "confidence sequence",
        boundaries=design.boundaries if design else None,
        equivalence_boundaries=design.equivalence if design else None,
        equivalence_confidence=equivalence_level(confidence) if decided else None,
        confidence=confidence, tightest_at=target, rounds=rounds, stopped=stopped, sent=sent,
        fixed_size=fixed, fixed_size_quantile=quantile if precise else None,
        looks=design.looks if design else None,
        fixed_requests=None if fixed is None else math.ceil(last.requests * fixed / last.size),
        spec=spec.model_dump(mode="json"),
    )  # fmt: skip
    from biasaudit.store.files import write_text

    write_text(run_dir / ROUNDS_FILE, record.model_dump_json(indent=2) + "\n")


def until_lines(
    spec: Any, growth: Growth, cost_at: Callable[[Any], tuple[int, float | None]]
) -> list[str]:
    """The dry run's line for ``until``: the first round is the estimate above; the
    ceiling's requests and cost.

    Raises
    ------
    UsageError
        As :func:`audit_until` would, before anything is sent.
    """
    most = _check(spec, growth)
    update = {growth.size: most, **growth.nested, "until": None, "detect": None}
    requests, cost = cost_at(spec.model_copy(update=update))
    price = "cost unknown" if cost is None else f"${cost:.2f}"
    step = getattr(spec, growth.step) or getattr(spec, growth.size)
    return [
        f"--until {spec.until}: the estimate above is the first round; rounds of {step} more "
        f"{growth.unit} run until the rule holds, at most {most} {growth.unit}: "
        f"{requests} requests, {price}"
    ]


def rounds_lines(record: RoundsRecord) -> list[Any]:
    """What ``biasaudit run`` prints after the table of an audit run with ``--until``:
    each round's figures with the intervals the rule read, and why it stopped."""
    from biasaudit.render.text import PlainTable, format_interval

    labels = list(dict.fromkeys(label for r in record.rounds for label in r.figures))
    rows: list[list[Any]] = []
    for look in record.rounds:
        cells: list[Any] = [str(look.size), str(look.sent)]
        for label in labels:
            found = look.figures.get(label)
            cells.append("-" if found is None else format_interval(found.estimate, found.interval))
        rows.append(cells)
    unit = record.unit.split()[0]
    table = PlainTable(
        f"--until {record.until}: {record.figure} each round, with intervals valid at "
        + _design_words(record.design, record.boundaries),
        [unit, "sent", *labels],
        rows,
        widths=[max(6, len(unit)), 7, *(max(24, len(label)) for label in labels)],
        right=frozenset({0, 1}),
        labels=2,
        gaps=[0, 1, *(3 for _ in labels)],
    )
    same = "precision" if record.until != "decided" else "plan (80% power for the gap)"
    fixed = (
        "" if record.fixed_size is None
        else f"; a fixed-size audit of the same {same}: {record.fixed_size} {record.unit}, "
        f"{record.fixed_requests} requests"
    )  # fmt: skip
    lines: list[Any] = ["", table]
    if record.equivalence_confidence is not None and record.detect is not None:
        lines.append(
            f"within ±{record.detect:g} is read on intervals at "
            f"{record.equivalence_confidence:.0%}, valid at every look (two one-sided tests)"
        )
    lines.append(f"stopped: {record.stopped}; {record.sent} requests sent in all{fixed}")
    if record.stopped.startswith("reached the ceiling"):
        lines.append(
            "what it means: the units available ran out before every interval was as narrow "
            "as asked; the figures above hold, with the wider intervals shown. To reach the "
            "rule, add units (a larger file, a higher ceiling) or ask for less precision"
        )
    return lines


def _design_words(design: str, boundaries: list[float] | None) -> str:
    """How an --until audit's intervals hold, in its table's title."""
    if design == "confidence sequence":
        return "every look (a confidence sequence)"
    shown = ", ".join(f"{c:.2f}" for c in boundaries or [])
    return f"all five planned looks at once (group-sequential boundaries {shown})"
