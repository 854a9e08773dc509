"""``--until``: a resume-screening audit that grows by names until its answer is known.

Round 1 audits ``--names-per-group`` names; each later round adds ``--round-names``
more (drawn nested: a round keeps every name of the rounds before it, so their answers
come from the cache and are paid for once), until the rule holds:

- ``precise:H``: every group's ΔDP interval at the headline k is at most ±H;
- ``decided``: every group's interval excludes 0 (a gap beyond noise), or its interval
  at 1 - 2 alpha (90% for 95%: two one-sided tests, :func:`equivalence_level`) lies
  within ±D (``--detect D``: no gap that matters).

The rule reads intervals valid at every look, however many rounds there are
(:func:`biasaudit.metrics.sequence_interval`, an asymptotic confidence sequence over
the names per group, tightest at half of ``--max-names``), so stopping when it holds
keeps their coverage. With ``decided`` and a power plan (``--like``), the rounds follow
a group-sequential design instead: five looks up to 1.1 times the names that give 80%
power for D, each read on its O'Brien-Fleming-type boundary
(:func:`biasaudit.metrics.spending_boundaries`, Lan & DeMets 1983), on the t scale of
the look's names (:func:`biasaudit.metrics.t_boundary`, Jennison & Turnbull 2000, 3.8).
Each round is an ordinary run directory; the last one also holds
``rounds.json``: every round (names, requests sent, each group's estimate, the run's
own interval and the ones the rule reads), why the audit stopped, and the size and
requests of the fixed-size audit of the same precision (``precise``) or the one the
power analysis recommends for D at 80% (``decided``). ``replay`` of the last round
reproduces it exactly.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from pydantic import BaseModel, Field

from biasaudit.errors import UsageError
from biasaudit.kinds.allocation.metrics import AllocationMetrics
from biasaudit.kinds.allocation.run import AuditResult, audit
from biasaudit.metrics import (
    VarianceModel,
    sequence_multiplier,
    spending_boundaries,
    t_boundary,
)
from biasaudit.providers import Provider

__all__ = ["ROUNDS_FILE", "RoundsRecord", "audit_spec", "audit_until", "read_rounds"]

ROUNDS_FILE = "rounds.json"


class GroupLook(BaseModel):
    """One group's ΔDP at the headline k in one round."""

    estimate: float
    interval: list[float] = Field(description="Valid at every look (the rule reads it).")
    fixed_interval: list[float] = Field(description="The run's own, for this size alone.")
    names: int
    multiplier: float | None = Field(
        None, description="The SEs on each side of the estimate that ``interval`` spans."
    )
    equivalence_interval: list[float] | None = Field(
        None,
        description="decided: valid at every look at 1 - 2 alpha (90% for 95%): within ±D "
        "it settles the group as no gap that matters (two one-sided tests).",
    )


class Round(BaseModel):
    names: int = Field(description="Names per group.")
    run_dir: str
    requests: int
    sent: int
    groups: dict[str, GroupLook]


class RoundsRecord(BaseModel):
    """``rounds.json`` of an audit run with ``--until``."""

    schema_version: int = 1
    until: str
    detect: float | None = None
    k: int
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
    tightest_at: float = Field(description="Names per group where the sequence is tightest.")
    rounds: list[Round]
    stopped: str = Field(description="Why the audit stopped.")
    sent: int = Field(description="Requests sent over every round.")
    fixed_names: int | None = Field(
        None,
        description="The fixed-size audit to compare with: of the same precision "
        "(precise), or the one the power analysis recommends at 80% for D (decided).",
    )
    fixed_requests: int | None = None


def read_rounds(run_dir: Path) -> RoundsRecord | None:
    """The run's ``rounds.json``, or None where it ran at one size."""
    path = run_dir / ROUNDS_FILE
    if not path.is_file():
        return None
    return RoundsRecord.model_validate_json(path.read_text(encoding="utf-8"))


def _z(confidence: float) -> float:
    from scipy import stats

    return float(stats.norm.ppf(0.5 + confidence / 2))


def _looks(
    metrics: AllocationMetrics,
    k: int,
    multiplier: Callable[[int], float],
    equivalence: Callable[[int], float] | None = None,
) -> dict[str, GroupLook]:
    """Each group's ΔDP at ``k`` with the intervals the rule reads: ``estimate ±
    multiplier(names) · SE`` (the SE from the run's own interval), and for ``decided``
    the equivalence interval, ``estimate ± equivalence(names) · SE``."""
    z = _z(metrics.confidence)
    found = {}
    for group, figures in metrics.groups.items():
        bounds = figures.dp_gap_ci.get(str(k))
        estimate = figures.dp_gap.get(str(k))
        names = figures.units or 0
        if bounds is None or estimate is None or names < 2:
            continue
        se = (bounds[1] - bounds[0]) / (2 * z)
        times = multiplier(names)
        half = se * times
        within = None
        if equivalence is not None:
            narrower = se * equivalence(names)
            within = [estimate - narrower, estimate + narrower]
        found[group] = GroupLook(estimate=estimate, interval=[estimate - half, estimate + half],
                                 fixed_interval=list(bounds), names=names, multiplier=times,
                                 equivalence_interval=within)  # fmt: skip
    return found


def _t_scaled(boundary: float, names: int) -> float:
    """A group-sequential boundary read on the t scale of an SE from ``names`` names
    (:func:`biasaudit.metrics.t_boundary`, ``names - 1`` degrees of freedom)."""
    return t_boundary(boundary, max(names - 1, 1))


class _Design(NamedTuple):
    looks: list[int]
    boundaries: list[float]
    equivalence: list[float]
    fixed: int
    """The names per group of the fixed-size audit the plan recommends (80% power)."""


def _design(spec: Any, confidence: float) -> _Design | None:
    """A group-sequential design for ``decided`` where the power analysis can size one
    (``--like``): five looks up to 1.1 times the names that give 80% power for D, with
    their boundaries for a gap and for 'within ±D' (:func:`equivalence_level`); None
    otherwise (the confidence sequence is used)."""
    if spec.until != "decided" or spec.like is None:
        return None
    from biasaudit.kinds.allocation.power import planned

    plan = planned(spec, spec.headline_k)
    needed = [m.names_for(spec.detect, 0.8, confidence=confidence) for m in plan.models.values()]
    if any(n is None for n in needed):
        return None
    fixed = max(n for n in needed if n is not None)
    most = min(spec.max_names, math.ceil(1.1 * fixed))
    looks = sorted({max(spec.names_per_group, math.ceil(most * j / 5)) for j in range(1, 6)})
    fractions = [n / looks[-1] for n in looks]
    return _Design(
        looks,
        spending_boundaries(fractions, confidence=confidence),
        spending_boundaries(fractions, confidence=equivalence_level(confidence)),
        fixed,
    )


def equivalence_level(confidence: float) -> float:
    """The level of the intervals that settle a group as 'within ±D': 1 - 2 alpha (90%
    for 95%). Within ±D at that level is two one-sided tests at alpha each (Schuirmann,
    "A comparison of the two one-sided tests procedure...", J. Pharmacokin. Biopharm.
    15, 1987), read on repeated intervals so that it holds at every look (Jennison &
    Turnbull 2000, ch. 6): the chance of declaring 'no gap that matters' where the gap
    is D or more stays at most alpha, as the chance of declaring a gap where there is
    none does."""
    return 2 * confidence - 1


def _settled(spec: Any, looks: dict[str, GroupLook]) -> str | None:
    """Why the rule holds, or None."""
    if not looks:
        return None
    if spec.until == "decided":
        d = spec.detect
        for look in looks.values():
            low, high = look.interval
            near, far = look.equivalence_interval or look.interval
            if not (low > 0 or high < 0 or (near > -d and far < d)):
                return None
        return f"decided: every group's gap is beyond noise or within ±{d:g}"
    width = float(spec.until.partition(":")[2])
    if all((look.interval[1] - look.interval[0]) / 2 <= width for look in looks.values()):
        return f"precise: every group's interval is within ±{width:g}"
    return None


def _fixed_size(spec: Any, last: Round, confidence: float) -> int | None:
    """The fixed-size audit to compare with (see :class:`RoundsRecord`), from the last
    round's own intervals, their SE scaled by 1/sqrt(names) (a design's plan gives its
    own: :class:`_Design`)."""
    z = _z(confidence)
    sizes = []
    for look in last.groups.values():
        se = (look.fixed_interval[1] - look.fixed_interval[0]) / (2 * z)
        if se <= 0:
            continue
        model = VarianceModel(se * se * look.names, 0.0, look.names)
        if spec.until == "decided":
            needed = model.names_for(spec.detect, 0.8, confidence=confidence)
        else:
            width = float(spec.until.partition(":")[2])
            needed = math.ceil(model.names * (z / width) ** 2)
        if needed is None:
            return None
        sizes.append(needed)
    return max(sizes) if sizes else None


def audit_until(
    spec: Any,
    *,
    provider: Provider | None = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
) -> AuditResult:
    """Run ``spec`` in rounds until its ``until`` rule holds; see the module docstring.

    Raises
    ------
    UsageError
        The task does not grow by names (only resume screening does).
    RunAbortedError
        A round stopped (the endpoint, storage, the budget, Ctrl-C); the rounds before
        it are kept as they are.
    """
    if "names_per_group" not in type(spec).model_fields:
        raise UsageError(
            "--until grows an audit by names per group: resume screening only, for now"
        )
    if spec.names_per_group > spec.max_names:
        raise UsageError("--names-per-group is above --max-names")
    provider = provider or spec.resolve_provider()
    step = spec.round_names or spec.names_per_group
    target = max(spec.max_names / 2, spec.names_per_group)
    design = _design(spec, spec.confidence)
    names = design.looks[0] if design else spec.names_per_group
    rounds: list[Round] = []
    sent = 0
    while True:
        sized = spec.model_copy(
            update={"names_per_group": names, "names_drawn": "nested", "until": None,
                    "like": None}
        )  # fmt: skip
        result = audit(sized, provider=provider, stderr=stderr, command=command)
        counts = result.manifest.counts
        sent += counts.sent
        confidence = result.metrics.confidence
        level = equivalence_level(confidence)
        if design is not None:  # the look's boundaries, on the t scale of its names' SE
            multiplier = functools.partial(_t_scaled, design.boundaries[len(rounds)])
            equivalence = functools.partial(_t_scaled, design.equivalence[len(rounds)])
        else:
            multiplier = functools.partial(
                sequence_multiplier, target_n=target, confidence=confidence)  # fmt: skip
            equivalence = functools.partial(sequence_multiplier, target_n=target,
                                            confidence=level)  # fmt: skip
        looks = _looks(result.metrics, spec.headline_k, multiplier,
                       equivalence if spec.until == "decided" else None)  # fmt: skip
        rounds.append(Round(names=names, run_dir=str(result.run_dir), requests=counts.requests,
                            sent=counts.sent, groups=looks))  # fmt: skip
        reason = _settled(spec, looks)
        last_look = design.looks[-1] if design else spec.max_names
        if reason is None and names >= last_look:
            reason = (
                f"reached the design's last look ({last_look} names per group) with some "
                "group undecided" if design
                else f"reached --max-names {spec.max_names} before the rule held"
            )  # fmt: skip
        if reason is not None:
            break
        names = design.looks[len(rounds)] if design else min(names + step, spec.max_names)
    last = rounds[-1]
    fixed = design.fixed if design else _fixed_size(spec, last, result.metrics.confidence)
    record = RoundsRecord(
        until=spec.until, detect=spec.detect, k=spec.headline_k,
        design="group sequential" if design else "confidence sequence",
        boundaries=design.boundaries if design else None,
        equivalence_boundaries=design.equivalence if design else None,
        equivalence_confidence=(
            equivalence_level(result.metrics.confidence) if spec.until == "decided" else None
        ),
        confidence=result.metrics.confidence, tightest_at=target, rounds=rounds,
        stopped=reason, sent=sent, fixed_names=fixed,
        fixed_requests=None if fixed is None else math.ceil(last.requests * fixed / last.names),
    )  # fmt: skip
    (result.run_dir / ROUNDS_FILE).write_text(record.model_dump_json(indent=2) + "\n",
                                              encoding="utf-8")  # fmt: skip
    return result


def audit_spec(
    spec: Any,
    *,
    provider: Provider | None = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
) -> AuditResult:
    """The allocation kind's run: in rounds where the spec has ``until``
    (:func:`audit_until`), else at its one size (:func:`biasaudit.kinds.allocation.run.audit`)."""
    if getattr(spec, "until", None) is not None:
        return audit_until(spec, provider=provider, stderr=stderr, command=command)
    return audit(spec, provider=provider, stderr=stderr, command=command)
