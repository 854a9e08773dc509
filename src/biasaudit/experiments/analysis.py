"""The paired effects of each intervention, and what each costs.

**Effects.** Each intervention's run is tested against the baseline run by the kind's
own tests of change (:meth:`~biasaudit.kinds.declare.Kind.change_tests`, as ``biasaudit
compare`` runs them), which pair the two runs unit by unit where both asked the same
units, as an experiment's arms do: allocation's score figures by a bootstrap drawing the
same names and items in both runs, listwise's ΔDP over the appearances both runs
answered, Grade Score over its items, decisions over its scenarios (the paired t test on
each scenario's own figure), allocation's ΔDP and ΔEO over one resample of the units
and one draw of the pools for both runs; the selection of pairwise runs (pools given by
the comparisons) is read from each run's interval. A figure given at several k is read
at the audit's headline k. The p-values of every intervention's every figure are
Holm-adjusted together (Holm, "A simple sequentially rejective multiple test procedure",
Scand. J. Statist. 6, 1979), so that "beyond noise" holds for the whole table at the
experiment's ``alpha``.

**Costs**, from each run's decisions about its units
(:meth:`~biasaudit.kinds.declare.Kind.unit_decisions`): the shift of the decisions'
level (the paired t test over the clusters, each cluster the mean of its units'
differences); the ratio of their spread between clusters (does the decision still
depend on the case, the scenario or the resume: the bias varies within a cluster, so
removing it leaves this spread as it was); where the task has a ground truth, the change
of their validity (the mean decision of the stronger units minus the weaker ones', its
change from the clusters' paired differences, Welch's standard error); the share of
units without a usable answer; refusals as the runs recorded them; and each run's
tokens and cost estimated alike from its prompts (:func:`~biasaudit.pricing.
estimate_spec_cost`, the cache set aside), since what a run reports leaves out what
its cache answered.

**Verdicts.** An intervention "removes bias" where a bias figure moves toward zero
beyond noise; it "flattens the decisions" where their spread falls below half the
baseline's, or their validity falls beyond noise to under half: such an intervention
removes bias by removing the decision, and is ranked last whatever it removed.
``bias_removed`` is the share of the bias figures' summed distances from their values
without bias removed, 1 - sum |under - fair| / sum |baseline - fair| over every bias
figure of the kind (fair: 0 for a gap, 1 for Grade Score's scores of consistency; its
large gaps weigh most; on a fair model it is noise around 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from biasaudit.store.experiments import Cost, Effect

__all__ = ["FLATTENED_SPREAD", "arm_costs", "paired_effects", "ranked"]

FLATTENED_SPREAD = 0.5
"""Decisions whose spread falls below this share of the baseline's are flattened."""


def paired_effects(
    kind: Any,
    baseline: Path,
    arms: Sequence[tuple[str, Path]],
    *,
    alpha: float,
    bootstrap: int,
    seed: int,
    notes: list[str],
) -> tuple[list[Effect], str]:
    """Every arm's paired effect on every figure, Holm-adjusted over all of them; and
    the family's description."""
    import numpy as np

    from biasaudit.kinds.common import RunPair
    from biasaudit.kinds.registry import read_metrics
    from biasaudit.metrics import holm_adjust

    metrics_a = read_metrics(baseline, kind.name)
    found: list[tuple[str, Any]] = []
    for name, run_dir in arms:
        arm_notes: list[str] = []
        pair = RunPair(baseline, run_dir, metrics_a, read_metrics(run_dir, kind.name),
                       np.random.default_rng(seed), bootstrap, arm_notes)  # fmt: skip
        found += [(name, test) for test in kind.change_tests(pair) if _headline(test, metrics_a)]
        notes += [f"{name}: {note}" for note in dict.fromkeys(arm_notes) if note not in notes]
    adjusted = holm_adjust([test.p_value for _, test in found])
    effects = [
        Effect(
            arm=name,
            figure=test.metric,
            group=test.group,
            baseline=test.before,
            under=test.after,
            change=test.difference,
            ci=test.ci,
            p=test.p_value,
            p_adjusted=1.0 if p is None else p,
            beyond_noise=(p is not None and p < alpha),
            method=test.method,
            bias=test.metric not in kind.level_figures,
            fair=kind.fair_values.get(test.metric, 0.0),
        )
        for (name, test), p in zip(found, adjusted, strict=True)
    ]
    family = (
        f"Holm over the {len(effects)} tests of {len(arms)} intervention"
        f"{'' if len(arms) == 1 else 's'} at alpha {alpha:g}"
    )
    return effects, family


def _headline(test: Any, metrics: Any) -> bool:
    """Whether a test is of a figure the experiment reads: a figure at several k only at
    the run's headline k (its table's), so that the family is what the audit reports."""
    k = getattr(metrics, "headline_k", None)
    _, _, at = test.metric.partition(" k=")
    return k is None or not at or at == str(k)


def arm_costs(
    kind: Any,
    baseline: Path,
    name: str,
    run_dir: Path,
    effects: Sequence[Effect],
    confidence: float,
    estimates: tuple[Any, Any] | None = None,
) -> Cost:
    """What the intervention ``name`` (its run ``run_dir``) cost against the baseline;
    ``estimates``: both runs' :class:`~biasaudit.pricing.CostEstimate` made alike,
    whatever the cache held (the tokens and money)."""
    from biasaudit.store.runs import read_manifest

    manifest_a, manifest_b = read_manifest(baseline), read_manifest(run_dir)
    cost = Cost(
        arm=name,
        refusals_baseline=manifest_a.counts.refusals,
        refusals_under=manifest_b.counts.refusals,
        verdict="",
    )
    if estimates is not None:
        a, b = estimates
        cost = cost.model_copy(update={
            "tokens_baseline": a.input_tokens + a.output_tokens, "cost_baseline": a.cost,
            "tokens_under": b.input_tokens + b.output_tokens, "cost_under": b.cost,
        })  # fmt: skip
    base, under = kind.unit_decisions(baseline), kind.unit_decisions(run_dir)
    if base is not None and under is not None:
        cost = cost.model_copy(update=_decision_costs(base, under, confidence))
    mine = [e for e in effects if e.arm == name and e.bias]
    beyond = sum(e.beyond_noise for e in mine)
    cost = cost.model_copy(update={"bias_removed": _bias_removed(mine),
                               "bias_removed_beyond_noise": beyond})  # fmt: skip
    flattens = _flattens(cost)
    return cost.model_copy(update={"flattens": flattens, "verdict": _verdict(cost, mine, flattens)})


def _decision_costs(base: Any, under: Any, confidence: float) -> dict[str, Any]:
    import pandas as pd

    from biasaudit.metrics import critical_value, paired_test

    a, b = base.frame, under.frame
    both = pd.merge(a, b[["unit", "value"]], on="unit", suffixes=("_a", "_b"))
    usable = both[both["value_a"].notna() & both["value_b"].notna()]
    found: dict[str, Any] = {
        "decision": base.label,
        "level_baseline": _mean(a["value"]),
        "level_under": _mean(b["value"]),
        "irregular_baseline": float(a["value"].isna().mean()) if len(a) else None,
        "irregular_under": float(b["value"].isna().mean()) if len(b) else None,
    }
    clusters = usable.groupby("cluster")[["value_a", "value_b"]].mean()
    # The spread between clusters (scenarios, resumes): whether the decision still
    # depends on the case. The bias varies within a cluster (between its persons or
    # names), so removing it leaves this spread as it was.
    sd_a, sd_b = clusters["value_a"].std(ddof=1), clusters["value_b"].std(ddof=1)
    if len(clusters) >= 2 and sd_a > 1e-12 and math.isfinite(sd_b):
        found["spread_ratio"] = float(sd_b / sd_a)
    test = paired_test("level", None, clusters["value_a"].tolist(), clusters["value_b"].tolist(),
                       confidence)  # fmt: skip
    if not base.level:
        found["level_baseline"] = found["level_under"] = None
    elif test is not None:
        found["level_change"], found["level_ci"] = test.difference, test.ci
    if base.truth and "truth" in usable.columns:
        found["validity"] = base.truth
        truth = usable.groupby("cluster")["truth"].mean() >= 0.5
        for key, column in (("validity_baseline", "value_a"), ("validity_under", "value_b")):
            means = usable.groupby("cluster")[column].mean()
            found[key] = _gap(means, truth)
        differences = clusters["value_b"] - clusters["value_a"]
        strong, weak = differences[truth], differences[~truth]
        if len(strong) >= 2 and len(weak) >= 2:
            change = float(strong.mean() - weak.mean())
            se = math.sqrt(strong.var(ddof=1) / len(strong) + weak.var(ddof=1) / len(weak))
            t = critical_value(confidence, min(len(strong), len(weak)))
            found["validity_change"] = change
            found["validity_ci"] = (change - t * se, change + t * se)
    return found


def _mean(values: Any) -> float | None:
    usable = values.dropna()
    return float(usable.mean()) if len(usable) else None


def _gap(means: Any, truth: Any) -> float | None:
    strong, weak = means[truth], means[~truth]
    if not len(strong) or not len(weak):
        return None
    return float(strong.mean() - weak.mean())


def _bias_removed(effects: Sequence[Effect]) -> float | None:
    both = [e for e in effects if e.baseline is not None and e.under is not None]
    before = sum(abs(e.baseline - e.fair) for e in both if e.baseline is not None)
    after = sum(abs(e.under - e.fair) for e in both if e.under is not None)
    return 1.0 - after / before if before > 0 else None


def _flattens(cost: Cost) -> bool:
    if cost.spread_ratio is not None and cost.spread_ratio < FLATTENED_SPREAD:
        return True
    if cost.validity_baseline and cost.validity_under is not None and cost.validity_ci:
        fell = cost.validity_ci[1] < 0
        return fell and cost.validity_under < FLATTENED_SPREAD * cost.validity_baseline
    return False


def _verdict(cost: Cost, effects: Sequence[Effect], flattens: bool) -> str:
    toward = [e for e in effects if e.beyond_noise and _toward_fair(e)]
    away = [e for e in effects if e.beyond_noise and not _toward_fair(e)]
    if flattens:
        spread = f" (spread x{cost.spread_ratio:.2f})" if cost.spread_ratio is not None else ""
        head = f"flattens the decisions{spread}: removes bias by removing the decision"
    elif toward and not away:
        head = f"removes bias: {len(toward)} figure{'s' if len(toward) > 1 else ''} beyond noise"
    elif away and not toward:
        head = f"adds bias: {len(away)} figure{'s' if len(away) > 1 else ''} beyond noise"
    elif toward and away:
        head = f"mixed: {len(toward)} figures less biased, {len(away)} more, beyond noise"
    else:
        head = "no effect on bias beyond noise"
    costs = []
    if cost.level_ci is not None and cost.level_change is not None and not _covers(cost.level_ci):
        costs.append(f"{cost.decision} shifts {cost.level_change:+.3f}")
    if (
        cost.validity_ci is not None
        and cost.validity_change is not None
        and cost.validity_ci[1] < 0
    ):
        costs.append(f"validity falls {cost.validity_change:+.3f}")
    if cost.irregular_baseline is not None and cost.irregular_under is not None:
        more = cost.irregular_under - cost.irregular_baseline
        if more >= 0.01:
            costs.append(f"irregular answers {100 * more:+.0f} pp")
    if cost.tokens_baseline and cost.tokens_under:
        extra = cost.tokens_under / cost.tokens_baseline - 1.0
        if abs(extra) >= 0.01:
            costs.append(f"tokens {100 * extra:+.0f}%")
    return head + ("; " + ", ".join(costs) if costs else "")


def _toward_fair(effect: Effect) -> bool:
    """Whether the figure moved toward its value without bias (0 for a gap)."""
    return (
        effect.baseline is not None
        and effect.under is not None
        and abs(effect.under - effect.fair) < abs(effect.baseline - effect.fair)
    )


def _covers(ci: tuple[float, float]) -> bool:
    return ci[0] <= 0.0 <= ci[1]


def ranked(costs: Sequence[Cost]) -> list[Cost]:
    """The interventions best first: those that removed bias beyond noise, by the share
    of the bias removed; then those that did not; those that flatten the decisions
    last, whatever they removed."""

    def key(cost: Cost) -> tuple[bool, bool, float]:
        removed = cost.bias_removed if cost.bias_removed is not None else -math.inf
        return (cost.flattens, not cost.verdict.startswith("removes bias"), -removed)

    return sorted(costs, key=key)
