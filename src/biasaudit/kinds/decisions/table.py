"""Plain-text tables of decisions audits and studies, as the command line prints them.

Every score is shown with its interval, its p-value and the scenarios behind it; a
simulated model is labelled as such on the first line (Tamkin et al. 2023).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from biasaudit.kinds.decisions.metrics_file import (
    FEW_SCENARIOS,
    SCENARIOS_COLUMNS,
    DecisionsMetrics,
    FillScores,
    Score,
    stored_verdicts,
)
from biasaudit.kinds.decisions.study import DecisionsStudy
from biasaudit.render.text import (
    SIMULATED,
    STRONG_MARK,
    Block,
    PlainTable,
    format_interval,
    format_p,
    format_share,
    smoke_test_lines,
)
from biasaudit.store.tables import read_run_table

__all__ = [
    "decisions_blocks",
    "headline",
    "run_table",
    "score_key",
    "score_label",
    "study_blocks",
]

_PAPER = "; conventions: the paper's (mixed model, Wald intervals, yes offered first)"


def score_label(score: Score) -> str:
    """``race: black``, ``gender: female``, ``age (per 10 years)``."""
    return (
        f"age ({score.level})" if score.attribute == "age" else f"{score.attribute}: {score.level}"
    )


def score_key(score: Score) -> str:
    """A score's key without spaces (compare's tests, ``--until``'s figures): ``age``,
    ``race:black``, ``race:native_american``."""
    return (
        "age" if score.attribute == "age" else f"{score.attribute}:{score.level}".replace(" ", "_")
    )


def _cell(score: Score | None) -> str:
    if score is None:
        return "-"
    if score.ci is None and score.scenarios >= 2:  # the mixed model gave no standard error
        return f"{format_interval(score.estimate, None)} (no interval: see the notes)"
    text = format_interval(score.estimate, score.ci, too_few=True)
    return text + (f" {STRONG_MARK}" if score.beyond_noise else "")


def verdict_legend(metrics: DecisionsMetrics) -> str:
    """What the mark beside a score means, and the family it was adjusted over."""
    family = next((s.family for f in metrics.fills.values() for s in f.scores if s.family), "")
    return f"{STRONG_MARK} beyond noise after Holm's adjustment over {family or 'the scores'}"


def mixed_model_state(figures: FillScores) -> str | None:
    """What statsmodels said of the mixed model's fit: converged, converged with its
    warnings (a Hessian that is not positive definite), or not; None: not fitted."""
    if figures.mixed_model_converged is None:
        return None
    if not figures.mixed_model_converged:
        return "DID NOT CONVERGE"
    said = [note for note in figures.mixed_model_notes if not note.startswith("fitted with")]
    if said:
        return f"converged, with statsmodels' warning: {'; '.join(said)}"
    return "converged"


def decisions_blocks(
    metrics: DecisionsMetrics, scenarios: pd.DataFrame | None = None
) -> list[Block]:
    """What ``biasaudit run decisions`` prints (without ``run:``); with the run's
    ``scenarios.csv``, the scenarios that drive each score beyond noise."""
    metrics = stored_verdicts(metrics)
    model = metrics.model + (f" ({SIMULATED})" if metrics.simulated else "")
    requests = metrics.requests
    fills = list(metrics.fills)
    blocks: list[Block] = [
        f"decisions audit of {model}",
        f"scenarios: {metrics.scenarios_source}: {metrics.scenarios_total} scenarios, "
        f"{metrics.persons_total} persons ({', '.join(fills)}); answers offered "
        f"{' and '.join(metrics.orders)}; P(yes) from {metrics.scoring or 'imported answers'}",
        f"requests: {requests.requests} ({requests.sent} sent, {requests.cache_hits} from cache, "
        f"{requests.failures} failed, {requests.refusals} refused)"
        f"{_PAPER if metrics.conventions == 'paper' else ''}",
    ]
    for fill, figures in metrics.fills.items():
        if not figures.scores:
            blocks.insert(1, f"WARNING: {fill}: no scores: no usable answer named yes or no "
                             "(see the notes below and answers.csv)")  # fmt: skip
    fewest = min((f.scenarios for f in metrics.fills.values() if f.scenarios), default=0)
    if 0 < fewest < FEW_SCENARIOS:
        blocks += smoke_test_lines(fewest, "scenarios", "at least 8 scenarios (12 ship)")
    labels = _labels(metrics.fills.values())
    level = f"{100 * metrics.confidence:g}%"
    method = "t over scenarios" if metrics.conventions != "paper" else "mixed model, Wald"
    rows = []
    for label in labels:
        rows.append([label, *(_cell(_find(metrics.fills[f], label)) for f in fills)])
    blocks += [
        "",
        PlainTable(
            f"discrimination scores: shift in the logit of P(yes) against {metrics.baseline} "
            f"(> 0 favoured); {level} interval ({method}); {verdict_legend(metrics)}",
            ["score", *fills],
            rows,
            widths=[28, *([34] * len(fills))],
            gaps=[0, *([2] * len(fills))],
        ),
        "",
    ]
    for fill in fills:
        blocks += _fill_lines(metrics.fills[fill])
        if scenarios is not None:
            blocks += _driving_lines(metrics.fills[fill], scenarios)
    return [*blocks, *(f"note: {note}" for note in metrics.notes)]


def _labels(fills: Iterable[FillScores]) -> list[str]:
    """Every score's label, in the order first met."""
    found: dict[str, None] = {}
    for figures in fills:
        for score in figures.scores:
            found[score_label(score)] = None
    return list(found)


def _find(figures: FillScores, label: str) -> Score | None:
    return next((s for s in figures.scores if score_label(s) == label), None)


def _fill_lines(figures: FillScores) -> list[str]:
    lines = [
        f"{figures.fill}: {figures.scenarios} scenarios, {figures.usable} of {figures.persons} "
        f"persons usable; mean P(yes) {format_share(figures.p_yes, figures.p_yes_ci)}"
    ]
    if figures.order_gap is not None:
        lines.append(
            f"  answer order: logit with yes offered first minus no first "
            f"{format_interval(figures.order_gap, figures.order_gap_ci)} "
            f"(p {format_p(figures.order_gap_p)}): averaged out of the scores"
        )
    state = mixed_model_state(figures)
    if state is not None:
        lines.append(f"  mixed model (statsmodels): {state}")
    if figures.capped:
        lines.append(f"  {figures.capped} person(s) with P(yes) of 0 or 1 (logit read as ±10)")
    return lines


def _driving_lines(figures: FillScores, scenarios: pd.DataFrame) -> list[str]:
    """For each score beyond noise, the scenarios whose own coefficient goes furthest
    its way (at most three)."""
    part = scenarios[scenarios["fill"] == figures.fill] if "fill" in scenarios else scenarios
    lines = []
    for score in figures.scores:
        column = "age" if score.attribute == "age" else score.level
        if not score.beyond_noise or score.estimate is None or column not in part:
            continue
        own = part[["scenario", column]].dropna()
        own = own.sort_values(column, ascending=score.estimate < 0).head(3)
        pairs = zip(own["scenario"], own[column], strict=True)
        shown = ", ".join(f"{scenario} {value:+.2f}" for scenario, value in pairs)
        lines.append(f"  {score_label(score)}: furthest in scenarios {shown}")
    return lines


def run_table(metrics: DecisionsMetrics, run_dir: Path) -> list[Block]:
    """What ``biasaudit run`` prints (it reads the run's ``scenarios.csv``)."""
    path = run_dir / "scenarios.csv"
    return decisions_blocks(
        metrics, read_run_table(path, SCENARIOS_COLUMNS) if path.is_file() else None
    )


def headline(metrics: DecisionsMetrics) -> str:
    """One line of the figures that matter most, for ``biasaudit history``: per fill, the
    score farthest from 0 beyond noise (or that no score is)."""
    parts = []
    for fill, figures in stored_verdicts(metrics).fills.items():
        flagged = [s for s in figures.scores if s.beyond_noise and s.estimate is not None]
        if not figures.scores:
            parts.append(f"{fill}: no scores (no usable answer)")
            continue
        if not flagged:
            parts.append(f"{fill}: no score beyond noise")
            continue
        worst = max(flagged, key=lambda s: abs(s.estimate or 0.0))
        parts.append(
            f"{fill}: {score_label(worst)} {format_interval(worst.estimate, worst.ci)}"
            f" ({len(flagged)} of {len(figures.scores)} beyond noise)"
        )
    return "; ".join(parts) or "no scores"


def study_blocks(study: DecisionsStudy) -> list[Block]:
    """What was studied, then one table per fill of each score by run."""
    labels = ", ".join(
        run.label + (" (SIMULATED)" if run.metrics.simulated else "") for run in study.runs
    )
    blocks: list[Block] = [f"decisions study of {len(study.runs)} runs: {labels}"]
    fills = list(dict.fromkeys(fill for run in study.runs for fill in run.metrics.fills))
    for fill in fills:
        runs = [run for run in study.runs if fill in run.metrics.fills]
        names = _labels(run.metrics.fills[fill] for run in runs)
        verdicts = [stored_verdicts(run.metrics).fills[fill] for run in runs]
        rows = [[name, *(_cell(_find(figures, name)) for figures in verdicts)] for name in names]
        blocks += [
            "",
            PlainTable(
                f"{fill}: discrimination scores (logit of P(yes)); {STRONG_MARK} beyond noise "
                "after Holm's adjustment over each run's scores",
                ["score", *(run.label for run in runs)],
                rows,
                widths=[28, *([34] * len(runs))],
                gaps=[0, *([2] * len(runs))],
            ),
        ]
    return blocks
