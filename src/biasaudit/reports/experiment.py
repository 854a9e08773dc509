"""What ``biasaudit experiment`` prints and writes: the interventions ranked by the bias
they removed beside what they cost, each one's paired effects, and the evidence page of
every unit's answer under every arm side by side; and two experiments compared.

``biasaudit compare`` of two experiments (a model before and after an update, say):
did each arm's audit change, and does each intervention still do what it did?

Each arm both experiments ran (the baseline, each intervention of the same name) is
compared run to run as ``compare`` compares two runs (:func:`biasaudit.reports.compare.
compare_runs`, its own Holm adjustment and verdict). Then each intervention's effect on
each figure, as each experiment estimated it (its paired change with its interval), is
tested for a change between the experiments: two independent estimates, so the normal
test from their intervals (:func:`biasaudit.metrics.normal_test`), Holm-adjusted over
every intervention and figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from biasaudit.errors import UsageError
from biasaudit.metrics import ChangeTest
from biasaudit.render.text import Block, Cell, PlainTable
from biasaudit.reports.compare import Comparison
from biasaudit.store.comparisons import ChangeRecord, ComparisonRecord
from biasaudit.store.experiments import (
    EXPERIMENT_COMPARE_FILE,
    ArmComparison,
    Cost,
    Effect,
    Experiment,
    ExperimentComparisonRecord,
)

__all__ = [
    "EXPERIMENT_COMPARE_FILE",
    "ExperimentComparison",
    "compare_experiments",
    "comparison_blocks",
    "effect_rows",
    "experiment_blocks",
    "experiment_evidence",
    "ranking_rows",
    "read_experiment_comparison",
    "write_experiment_evidence",
]

RANKING_HEADER = ("intervention", "bias removed", "decisions", "validity", "irregular",
                  "tokens", "verdict")  # fmt: skip
EFFECT_HEADER = ("figure", "group", "baseline", "under it", "change", "interval", "p adj.")


def _number(value: float | None, digits: int = 3, sign: bool = False) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _interval(ci: Sequence[float] | None, digits: int = 3) -> str:
    if ci is None:
        return "-"
    return f"[{ci[0]:+.{digits}f}, {ci[1]:+.{digits}f}]"


def _widths(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[int]:
    return [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]


def _p(value: float) -> str:
    return "<1e-6" if value < 1e-6 else f"{value:.2g}"


def ranking_rows(experiment: Experiment) -> list[list[str]]:
    """One row per intervention, best first (:func:`biasaudit.experiments.analysis.ranked`)."""
    rows = []
    for cost in experiment.costs:
        removed = "-" if cost.bias_removed is None else f"{100 * cost.bias_removed:.0f}%"
        rows.append([
            cost.arm, removed, _shift(cost.level_change, cost.level_ci),
            _shift(cost.validity_change, cost.validity_ci) if cost.validity else "-",
            _irregular(cost), _tokens(cost), cost.verdict,
        ])  # fmt: skip
    return rows


def _shift(change: float | None, ci: Sequence[float] | None) -> str:
    if change is None:
        return "-"
    return f"{change:+.3f} {_interval(ci)}"


def _irregular(cost: Cost) -> str:
    if cost.irregular_baseline is None or cost.irregular_under is None:
        return "-"
    return f"{100 * cost.irregular_baseline:.0f}% -> {100 * cost.irregular_under:.0f}%".replace(
        "-0%", "0%"
    )


def _tokens(cost: Cost) -> str:
    if not cost.tokens_baseline:
        return "-"
    extra = cost.tokens_under / cost.tokens_baseline - 1.0
    money = ""
    if cost.cost_baseline is not None and cost.cost_under is not None:
        money = f", ${cost.cost_under - cost.cost_baseline:+.2f}"
    return f"{100 * extra:+.0f}%{money}"


def effect_rows(effects: Sequence[Effect], *, everything: bool = False) -> list[list[str | Cell]]:
    """One row per figure of one intervention: those beyond noise, and the bias figures
    that moved most, unless ``everything``."""
    shown = effects if everything else [e for e in effects if e.beyond_noise]
    return [
        [e.figure + ("" if e.bias else " (level)"), e.group or "", _number(e.baseline),
         _number(e.under), Cell(_number(e.change, sign=True), strong=e.beyond_noise),
         _interval(e.ci), _p(e.p_adjusted)]
        for e in shown
    ]  # fmt: skip


def experiment_blocks(experiment: Experiment, *, everything: bool = False) -> list[Block]:
    """What ``biasaudit experiment`` prints."""
    simulated = " (SIMULATED model)" if experiment.simulated else ""
    arms = ", ".join(arm.name for arm in experiment.arms[1:])
    ranked = ranking_rows(experiment)
    blocks: list[Block] = [
        f"mitigation experiment: {experiment.task} ({experiment.kind}) on "
        f"{experiment.model}{simulated}; baseline and {len(experiment.arms) - 1} "
        f"intervention{'s' if len(experiment.arms) > 2 else ''} ({arms}), asked of the same "
        "units and paired",
        PlainTable(
            "interventions, best first (bias removed beside what it costs; decisions and "
            "validity: paired change with its interval)",
            RANKING_HEADER, ranked, _widths(RANKING_HEADER, ranked),
            gaps=[0, *([2] * (len(RANKING_HEADER) - 1))],
        ),
    ]  # fmt: skip
    for cost in experiment.costs:
        mine = [e for e in experiment.effects if e.arm == cost.arm]
        rows = effect_rows(mine, everything=everything)
        note = (f"{len(rows)} of {len(mine)} figures changed beyond noise"
                if not everything else f"{len(mine)} figures")  # fmt: skip
        if rows:
            blocks.append(PlainTable(f"{cost.arm}: {note}", EFFECT_HEADER, rows,
                                     _widths(EFFECT_HEADER, rows), labels=2,
                                     gaps=[0, *([2] * (len(EFFECT_HEADER) - 1))]))  # fmt: skip
        else:
            blocks.append(f"{cost.arm}: no figure changed beyond noise ({len(mine)} tested)")
    blocks.append(
        f"* beyond noise: {experiment.family}; each change is paired unit by unit "
        "(methods: experiment.json)"
    )
    blocks += [f"note: {note}" for note in experiment.notes]
    return blocks


def experiment_evidence(folder: Path, experiment: Experiment) -> Any:
    """Every unit's answer under every arm side by side (one row per request), with the
    prompts as sent; and the effects, every figure of every arm."""
    from biasaudit.kinds._evidence import Evidence, View, answer_text, read_answers, read_sent

    names = [arm.name for arm in experiment.arms]
    answers = {name: read_answers(experiment.run_dir(name, folder)) for name in names}
    read = {name: read_sent(experiment.run_dir(name, folder)) for name in names}
    sent = {name: found for name, (found, _) in read.items()}
    requests = list(dict.fromkeys(r for name in names for r in answers[name]))
    rows = []
    for request in requests:
        row: dict[str, Any] = {"request": request}
        changed = False
        base = answers[names[0]].get(request)
        for name in names:
            record = answers[name].get(request)
            row[f"answer:{name}"] = answer_text(record) if record is not None else "(not asked)"
            row[f"read:{name}"] = _reading(record)
            row[f"prompt:{name}"] = sent[name].get(request, "")
            if base is not None and record is not None and answer_text(record) != answer_text(base):
                changed = True
        row["differs"] = "answer differs" if changed else ""
        rows.append(row)
    columns = [("request", "request"), *((f"answer:{n}", n) for n in names), ("differs", "differs")]
    columns += [(f"read:{n}", f"read ({n})") for n in names]
    columns += [(f"prompt:{n}", f"prompt ({n})") for n in names]
    side = View(
        "answers", "Every answer under every arm",
        "One row per request, asked of the same unit in every arm: the answer under each, "
        "how it was read under each (the label or choice, and where the figures rest on "
        "log-probabilities, the label probabilities: an answer's text can stay while its "
        "probabilities move), and the prompt as sent under each (open a cell to read it). "
        "'answer differs' marks a request whose answer under an intervention is not the "
        "baseline's.",
        columns, rows, long=[f"prompt:{n}" for n in names], filters=("differs",),
        flag="differs",
    )  # fmt: skip
    effect_view = View(
        "effects", "Every paired effect",
        f"Each figure's change under each intervention, paired; {experiment.family}.",
        [("arm", "intervention"), ("figure", "figure"), ("group", "group"),
         ("baseline", "baseline"), ("under", "under it"), ("change", "change"),
         ("low", "low"), ("high", "high"), ("p_adjusted", "p adj."),
         ("beyond_noise", "beyond noise"), ("method", "method")],
        [{"arm": e.arm, "figure": e.figure, "group": e.group or "", "baseline": e.baseline,
          "under": e.under, "change": e.change, "low": e.ci[0], "high": e.ci[1],
          "p_adjusted": e.p_adjusted, "beyond_noise": "beyond noise" if e.beyond_noise else "",
          "method": e.method} for e in experiment.effects],
        long=(), filters=("arm", "figure"), flag="beyond_noise",
    )  # fmt: skip
    return Evidence(
        about=f"The answers behind a mitigation experiment of {experiment.model}: "
        f"{len(requests)} requests under {len(names)} arms.",
        views=[side, effect_view],
        prompts_verified=all(verified for _, verified in read.values()),
    )


def _reading(record: Any) -> str:
    """How a response was read: its label or choice (``parsed``), and its label
    probabilities where the figures rest on them."""
    if record is None or record.error:
        return ""
    found = record.parsed or ""
    if record.label_probabilities:
        shares = ", ".join(f"{label}: {p:.3f}" for label, p in record.label_probabilities.items())
        found = f"{found} ({shares})" if found else shares
    return found


def write_experiment_evidence(folder: Path) -> Path:
    """Write the experiment's ``evidence.html`` (:func:`experiment_evidence`).

    Raises
    ------
    UsageError
        The folder cannot be written.
    """
    from biasaudit.errors import UsageError
    from biasaudit.experiments.runner import read_experiment
    from biasaudit.reports.evidence import EVIDENCE_FILE, evidence_page, page_data
    from biasaudit.store.files import write_text

    experiment = read_experiment(folder)
    data = page_data(experiment_evidence(folder, experiment), run=folder.name,
                     model=experiment.model, task=experiment.task,
                     simulated=experiment.simulated)  # fmt: skip
    path = folder / EVIDENCE_FILE
    try:
        write_text(path, evidence_page(data))
    except OSError as error:
        raise UsageError(f"cannot write {path} ({error.strerror or error})") from None
    return path


# --- two experiments compared (biasaudit compare EXP_A EXP_B) --------------------------


@dataclass(frozen=True)
class ExperimentComparison:
    """Two experiments side by side: each shared arm's comparison, each effect's change."""

    folder_a: Path
    folder_b: Path
    a: Experiment
    b: Experiment
    arms: list[tuple[str, Comparison]]
    effects: list[ChangeTest]
    alpha: float
    notes: list[str]

    @property
    def changed_effects(self) -> list[ChangeTest]:
        return [t for t in self.effects if t.changed(self.alpha)]

    @property
    def changed_arms(self) -> list[str]:
        """The arms whose audit changed (as ``compare`` finds of two runs)."""
        return [name for name, comparison in self.arms if comparison.drift]

    @property
    def drift(self) -> bool:
        """An arm's audit changed, or an intervention's effect did."""
        return bool(self.changed_arms or self.changed_effects)

    @property
    def version_changed(self) -> bool:
        """An endpoint reported another model version or fingerprint in some arm."""
        return any(comparison.versions.changed for _, comparison in self.arms)

    @property
    def verdict(self) -> str:
        if self.drift:
            found = [f"the audit of {', '.join(self.changed_arms)}"] if self.changed_arms else []
            if self.changed_effects:
                arms = dict.fromkeys(t.metric.partition(":")[0] for t in self.changed_effects)
                found.append(f"the effect of {', '.join(arms)}")
            return f"changed: {'; '.join(found)}"
        if self.version_changed:
            return "model version changed without measurable change"
        return "no change"

    def to_json(self) -> dict[str, Any]:
        """The record :data:`EXPERIMENT_COMPARE_FILE` holds (and ``compare --json``): each
        arm's comparison whole, every effect's test (:class:`ExperimentComparisonRecord`)."""
        return ExperimentComparisonRecord(
            folder_a=str(self.folder_a), folder_b=str(self.folder_b), alpha=self.alpha,
            notes=self.notes, verdict=self.verdict, drift=self.drift,
            version_changed=self.version_changed,
            arms=[ArmComparison(name=name, verdict=c.verdict,
                                comparison=ComparisonRecord.model_validate(c.to_json()))
                  for name, c in self.arms],
            effects=[ChangeRecord(**asdict(t), changed=t.changed(self.alpha))
                     for t in self.effects],
        ).model_dump(mode="json")  # fmt: skip


def read_experiment_comparison(folder: Path) -> ExperimentComparison:
    """The comparison of two experiments written in ``folder``
    (:func:`biasaudit.reports.html.write_experiment_compare_report`).

    Raises
    ------
    UsageError
        Its record is missing or damaged, or an experiment it names is gone (named).
    """
    from biasaudit.experiments.runner import read_experiment
    from biasaudit.store.runs import damaged_file, read_run_model

    path = folder / EXPERIMENT_COMPARE_FILE
    if not path.is_file():
        raise UsageError(f"{folder}: not a comparison of experiments (no {path.name})")
    record: ExperimentComparisonRecord = read_run_model(path, ExperimentComparisonRecord)
    try:
        arms = [(arm.name, Comparison.from_json(arm.comparison.model_dump(mode="json")))
                for arm in record.arms]  # fmt: skip
    except (ValueError, KeyError, TypeError) as error:
        raise damaged_file(path, f"not a comparison of runs in arms: {error}") from None
    effects = [ChangeTest(**effect.model_dump(exclude={"changed"})) for effect in record.effects]
    folder_a, folder_b = Path(record.folder_a), Path(record.folder_b)
    return ExperimentComparison(folder_a, folder_b, read_experiment(folder_a),
                                read_experiment(folder_b), arms, effects, record.alpha,
                                record.notes)  # fmt: skip


def compare_experiments(
    folder_a: Path, folder_b: Path, *, alpha: float = 0.05, bootstrap: int = 1000, seed: int = 0
) -> ExperimentComparison:
    """Compare the experiments in two folders; see the module docstring.

    Raises
    ------
    UsageError
        A folder is not an experiment's, or they audit different kinds.
    """
    from biasaudit.experiments.runner import read_experiment
    from biasaudit.metrics import holm_adjust, normal_test
    from biasaudit.reports.compare import compare_runs

    a, b = read_experiment(folder_a), read_experiment(folder_b)
    if a.kind != b.kind:
        raise UsageError(f"compare: {folder_a} is a {a.kind} experiment and {folder_b} a "
                         f"{b.kind} one; compare experiments of one audit")  # fmt: skip
    names_b = {arm.name for arm in b.arms}
    shared = [arm.name for arm in a.arms if arm.name in names_b]
    notes = [f"only in {which}: {', '.join(only)}" for which, only in (
        ("A", [arm.name for arm in a.arms if arm.name not in names_b]),
        ("B", [arm.name for arm in b.arms if arm.name not in shared]),
    ) if only]  # fmt: skip
    arms = [(name, compare_runs(a.run_dir(name, folder_a), b.run_dir(name, folder_b),
                                alpha=alpha, bootstrap=bootstrap, seed=seed))
            for name in shared]  # fmt: skip
    before = {(e.arm, e.figure, e.group): e for e in a.effects}
    found: list[ChangeTest] = []
    for effect in b.effects:
        was = before.get((effect.arm, effect.figure, effect.group))
        if was is None:
            continue
        test = normal_test(f"{effect.arm}: {effect.figure}", effect.group, was.change, was.ci,
                           effect.change, effect.ci, a.confidence)  # fmt: skip
        if test is not None:
            found.append(test)
    adjusted = holm_adjust([t.p_value for t in found])
    effects = [replace(t, p_adjusted=1.0 if p is None else p)
               for t, p in zip(found, adjusted, strict=True)]  # fmt: skip
    return ExperimentComparison(Path(folder_a), Path(folder_b), a, b, arms, effects, alpha, notes)


def comparison_blocks(comparison: ExperimentComparison) -> list[Block]:
    """What ``biasaudit compare`` prints of two experiments."""
    a, b = comparison.a, comparison.b
    blocks: list[Block] = [
        f"compare experiments: A {comparison.folder_a.name} ({a.model}), "
        f"B {comparison.folder_b.name} ({b.model}); {a.kind}; verdict: {comparison.verdict}",
        PlainTable(
            "each arm's audit, B - A (as compare compares two runs)",
            ["arm", "verdict", "figures changed"],
            [[name, c.verdict, f"{len(c.changed_tests)} of {len(c.tests)}"]
             for name, c in comparison.arms],
            [0, 0, 0], gaps=[0, 2, 2],
        ),
    ]  # fmt: skip
    changed = [t for t in comparison.effects if t.changed(comparison.alpha)]
    rows: list[list[str | Cell]] = [
        [t.metric, t.group or "", _signed(t.before), _signed(t.after),
         Cell(f"{t.difference:+.3f}", strong=True), f"[{t.ci[0]:+.3f}, {t.ci[1]:+.3f}]"]
        for t in changed
    ]  # fmt: skip
    if rows:
        blocks.append(PlainTable(
            f"interventions whose effect changed beyond noise ({len(rows)} of "
            f"{len(comparison.effects)}; Holm at {comparison.alpha:g})",
            ["intervention: figure", "group", "effect in A", "effect in B", "change", "interval"],
            rows, [0] * 6, labels=2, gaps=[0, 2, 2, 2, 2, 2],
        ))  # fmt: skip
    else:
        tested = len(comparison.effects)
        blocks.append(f"every intervention's effect is as it was, within noise ({tested} "
                      f"tested; Holm at {comparison.alpha:g})")  # fmt: skip
    blocks += [f"note: {note}" for note in comparison.notes]
    return blocks


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"
