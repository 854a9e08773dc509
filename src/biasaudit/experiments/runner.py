"""Running a mitigation experiment: the baseline and each intervention as ordinary runs,
then their paired effects and costs into the experiment's folder."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from biasaudit.engine.progress import phase
from biasaudit.errors import UsageError
from biasaudit.interventions import BASELINE, BUILT_IN, Intervention, parse_intervention
from biasaudit.store.experiments import EXPERIMENT_FILE, Arm, Experiment

__all__ = [
    "FinishedExperiment",
    "arm_estimates",
    "arm_specs",
    "load_experiment_spec",
    "read_experiment",
    "read_interventions",
    "replay_experiment",
    "run_experiment",
]


@dataclass(frozen=True)
class FinishedExperiment:
    """A finished experiment: its folder and record, and 1 where some arm's requests
    failed (as a run's exit status)."""

    folder: Path
    experiment: Experiment
    exit_code: int = 0


def read_interventions(items: Any, source: str) -> list[Intervention]:
    """The interventions a spec's ``interventions`` lists: each a built-in's name, a
    ``NAME=WHERE:TEXT`` string or a mapping of :class:`Intervention`'s fields.

    Raises
    ------
    UsageError
        ``<source>, field 'interventions[i]': <problem>``.
    """
    from biasaudit.spec import validated

    if items is None:
        return []
    if not isinstance(items, list):
        raise UsageError(f"{source}, field 'interventions': a list of interventions")
    found = []
    for i, item in enumerate(items):
        where = f"{source}, field 'interventions[{i}]'"
        if isinstance(item, str):
            try:
                found.append(parse_intervention(item))
            except ValueError as error:
                raise UsageError(f"{where}: {error}") from None
        elif isinstance(item, dict):
            found.append(validated(Intervention, item, where))
        else:
            raise UsageError(f"{where}: a built-in's name, NAME=WHERE:TEXT or a mapping")
    return found


def load_experiment_spec(
    path: Path, overrides: dict[str, Any] | None = None
) -> tuple[Any, list[Intervention]]:
    """The audit a spec file describes and the interventions it lists."""
    from biasaudit.spec import load_spec

    aside: dict[str, Any] = {"interventions": None}
    spec = load_spec(path, overrides, aside=aside)
    return spec, read_interventions(aside["interventions"], f"spec {path}")


def arm_specs(spec: Any, interventions: Sequence[Intervention]) -> list[tuple[str, Any]]:
    """The baseline and one spec per intervention, checked before anything is sent
    (names hidden where an intervention asks: the audit's own names).

    Raises
    ------
    UsageError
        No intervention, two of one name, a spec that already has one, several models,
        rounds (``until``), or an intervention that hides names where none are shown.
    """
    from biasaudit.kinds.registry import with_names_to_hide

    if not interventions:
        raise UsageError(
            f"an experiment needs at least one intervention: --intervention NAME (built in: "
            f"{', '.join(BUILT_IN)}) or the spec's 'interventions'"
        )
    names = [i.name for i in interventions]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"two interventions are named {twice[0]!r}: give each its own name")
    if spec.intervention is not None:
        raise UsageError(
            "the spec already sets 'intervention': an experiment runs the spec as it is "
            "(the baseline) and under each of its 'interventions'"
        )
    if spec.models:
        raise UsageError("an experiment audits one model: give one 'model'")
    if getattr(spec, "until", None) is not None:
        raise UsageError(
            "an experiment asks every arm at one size, so that its units pair: drop 'until' "
            "(size it with the dry run's --detect)"
        )
    arms = [(BASELINE, spec)]
    for intervention in interventions:
        arm = spec.model_copy(update={"intervention": intervention})
        arms.append((intervention.name, with_names_to_hide(arm)))
    return arms


def run_experiment(
    spec: Any,
    interventions: Sequence[Intervention],
    *,
    provider: Any = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
    alpha: float = 0.05,
    bootstrap: int = 1000,
    progress: Callable[[str], None] | None = None,
) -> FinishedExperiment:
    """Run the baseline and every intervention, then write the experiment's folder
    (``experiment.json``) beside the runs; see :mod:`biasaudit.experiments`."""
    from biasaudit.kinds.registry import kind_of_spec, run_spec

    arms = arm_specs(spec, interventions)
    kind = kind_of_spec(spec)
    with phase("estimating every arm's tokens from its prompts", stderr):
        estimates = arm_estimates(arms, provider)
    runs: list[tuple[str, Intervention | None, Path, Any]] = []
    exit_code = 0
    for name, arm in arms:
        if progress is not None:
            what = arm.intervention.described() if arm.intervention else "the prompts as written"
            progress(f"arm {name}: {what}")
        finished = run_spec(arm, provider=provider, stderr=stderr, command=command)
        runs.append((name, arm.intervention, finished.run_dir, finished.metrics))
        exit_code = max(exit_code, finished.exit_code)
        if progress is not None:
            progress(f"run: {finished.run_dir}")
    arms_run = [(name, intervention, run_dir) for name, intervention, run_dir, _ in runs]
    with phase("testing every intervention's effects, paired, and its costs", stderr):
        experiment = analysed(kind, arms_run, runs[0][3], confidence=spec.confidence,
                              alpha=alpha, bootstrap=bootstrap, seed=spec.seed,
                              estimates=estimates)  # fmt: skip
    folder = _new_folder(Path(spec.runs_dir), experiment.model)
    return FinishedExperiment(folder, _written(folder, experiment), exit_code)


def analysed(
    kind: Any,
    runs: Sequence[tuple[str, Intervention | None, Path]],
    metrics: Any,
    *,
    confidence: float,
    alpha: float,
    bootstrap: int,
    seed: int,
    estimates: Sequence[Any] | None = None,
) -> Experiment:
    """The experiment of finished ``runs`` (the baseline first): paired effects and
    costs (:mod:`biasaudit.experiments.analysis`); its arms' run folders absolute until
    :func:`_written` records them relative to the experiment's folder."""
    from biasaudit.experiments.analysis import arm_costs, paired_effects, ranked

    baseline_dir = runs[0][2]
    notes: list[str] = []
    treated = [(name, run_dir) for name, _, run_dir in runs[1:]]
    effects, family = paired_effects(kind, baseline_dir, treated, alpha=alpha,
                                     bootstrap=bootstrap, seed=seed, notes=notes)  # fmt: skip
    pairs = [None] * len(treated) if estimates is None else [
        (estimates[0], estimate) for estimate in estimates[1:]]  # fmt: skip
    costs = ranked([
        arm_costs(kind, baseline_dir, name, run_dir, effects, confidence, pair)
        for (name, run_dir), pair in zip(treated, pairs, strict=True)
    ])  # fmt: skip
    return Experiment(
        kind=kind.name, task=str(getattr(metrics, "task", "")), model=str(metrics.model),
        simulated=bool(metrics.simulated), confidence=confidence, alpha=alpha,
        bootstrap=bootstrap, seed=seed,
        arms=[Arm(name=name, intervention=intervention, run_dir=str(run_dir))
              for name, intervention, run_dir in runs],
        effects=effects, costs=costs, family=family, notes=notes,
    )  # fmt: skip


def _written(folder: Path, experiment: Experiment) -> Experiment:
    """``experiment`` written into ``folder``, its arms' run folders relative to it."""
    arms = [arm.model_copy(update={"run_dir": os.path.relpath(arm.run_dir, folder)})
            for arm in experiment.arms]  # fmt: skip
    recorded = experiment.model_copy(update={"arms": arms})
    _write(folder / EXPERIMENT_FILE, recorded)
    return recorded


def replay_experiment(
    folder: Path, *, cache: Path | None = None, stderr: TextIO | None = None
) -> tuple[FinishedExperiment, list[str]]:
    """Replay every arm of the experiment in ``folder`` from the cache (sending nothing)
    and analyse them again into a new experiment folder beside it; with the differences
    from the original (every arm's figures, then the effects).

    Raises
    ------
    UsageError
        Not an experiment, or the cache lacks answers an arm needs (named).
    """
    from biasaudit.kinds.registry import audit_kind, read_metrics
    from biasaudit.replay import replay_run

    original = read_experiment(folder)
    kind = audit_kind(original.kind)
    runs: list[tuple[str, Intervention | None, Path]] = []
    differences: list[str] = []
    for arm in original.arms:
        result = replay_run(original.run_dir(arm.name, folder), cache=cache, stderr=stderr)
        runs.append((arm.name, arm.intervention, result.run_dir))
        differences += [f"{arm.name}: {d}" for d in result.differences]
    metrics = read_metrics(runs[0][2], kind.name)
    # the tokens and cost were estimated from the prompts, which a replay sends alike
    estimated = {c.arm: c for c in original.costs}
    first = original.costs[0] if original.costs else None
    estimates = None if first is None else [
        _Estimate(first.tokens_baseline, first.cost_baseline),
        *(_Estimate(estimated[name].tokens_under, estimated[name].cost_under)
          for name, _, _ in runs[1:]),
    ]  # fmt: skip
    with phase("testing every intervention's effects again", stderr):
        experiment = analysed(kind, runs, metrics, confidence=original.confidence,
                              alpha=original.alpha, bootstrap=original.bootstrap,
                              seed=original.seed, estimates=estimates)  # fmt: skip
    experiment = experiment.model_copy(update={"replay_of": str(folder)})
    before = {(e.arm, e.figure, e.group): e for e in original.effects}
    for effect in experiment.effects:
        was = before.get((effect.arm, effect.figure, effect.group))
        if (
            was is None
            or not _same(was.change, effect.change)
            or was.beyond_noise != effect.beyond_noise
        ):
            differences.append(f"effect {effect.arm} {effect.figure} {effect.group or ''}".strip())
    new = _new_folder(folder.parent, experiment.model)
    return FinishedExperiment(new, _written(new, experiment)), differences


@dataclass(frozen=True)
class _Estimate:
    """A recorded estimate, as :func:`~biasaudit.experiments.analysis.arm_costs` reads one."""

    input_tokens: int
    cost: float | None
    output_tokens: int = 0


def _same(a: float, b: float) -> bool:
    from biasaudit.replay import ROUNDING

    return a == b or abs(a - b) <= ROUNDING * max(1.0, abs(a), abs(b))


def arm_estimates(
    arms: Sequence[tuple[str, Any]], provider: Any = None, prices: Path | None = None
) -> list[Any]:
    """Each arm's :class:`~biasaudit.pricing.CostEstimate` of its whole run, the cache
    set aside: the same measure for every arm, whatever a cache answered."""
    from biasaudit.pricing import estimate_spec_cost, load_prices

    table = load_prices(prices)
    found = []
    for _, arm in arms:
        sender = provider if provider is not None else arm.resolve_provider(need_key=False)
        found.append(estimate_spec_cost(arm.model_copy(update={"fresh": True}), sender, table))
    return found


def _new_folder(runs_dir: Path, model: str) -> Path:
    from biasaudit.store.runs import new_run_id

    folder = runs_dir / new_run_id("experiment", model)
    folder.mkdir(parents=True)
    return folder


def _write(path: Path, experiment: Experiment) -> None:
    from biasaudit.store.files import write_text

    write_text(path, experiment.model_dump_json(indent=2) + "\n")


def read_experiment(folder: Path) -> Experiment:
    """The ``experiment.json`` of an experiment's folder.

    Raises
    ------
    UsageError
        No such file, or not an experiment's record (named).
    """
    from biasaudit.store.runs import read_run_model

    path = folder / EXPERIMENT_FILE
    if not path.is_file():
        raise UsageError(f"{folder}: not an experiment's folder (no {EXPERIMENT_FILE})")
    found: Experiment = read_run_model(path, Experiment)
    return found
