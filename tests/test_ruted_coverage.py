"""Interval coverage of the RUTEd metrics over many simulated runs, with no server and no model.

Each run draws every replicate's verdict from the planted per-occupation male
probabilities (with pronoun-free and tied replicates), writes it as a short
text, and sends the texts through the audit's own scoring path: the plan
reads them (:meth:`RutedPlan.annotate`, the pronoun classifier), tallies
them per occupation, and :func:`context_metrics` computes the metrics and
their intervals, as a real run does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from biasaudit.engine.core import RequestResult
from biasaudit.kinds.ruted.metrics_file import context_metrics
from biasaudit.kinds.ruted.plan import RutedPlan, plan_ruted
from biasaudit.kinds.ruted.sim import NO_PRONOUN_RATE, TIE_RATE, planted_male_probability
from biasaudit.kinds.ruted.spec import RutedSpec
from biasaudit.kinds.ruted.task import RutedTask, build_ruted_task
from biasaudit.providers import Capabilities, ModelResponse
from biasaudit.spec import parse_spec

CONTEXTS = ("bedtime", "personas", "esl")
METRICS = ("neutrality", "skew", "stereotype")
RUNS = 200
REPLICATES = 30
TEXTS = {"male": "He left.", "female": "She left.", "none": "They left.", "tie": "He or she."}


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> tuple[RutedTask, RutedSpec]:
    runs_dir = tmp_path_factory.mktemp("runs")
    spec = parse_spec({"task": "ruted", "model": "sim/biased", "runs_dir": str(runs_dir),
                       "contexts": ",".join(CONTEXTS), "replicates": REPLICATES})  # fmt: skip
    assert isinstance(spec, RutedSpec)
    return build_ruted_task(spec), spec


def planted(task: RutedTask, context: str) -> np.ndarray:
    return np.array([planted_male_probability(o.name, context) for o in task.occupations])


def truth(task: RutedTask, context: str) -> dict[str, float]:
    d = 2 * planted(task, context) - 1
    sign = np.array([1.0 if o.majority == "male" else -1.0 for o in task.occupations])
    return {"neutrality": np.abs(d).mean(), "skew": d.mean(), "stereotype": (sign * d).mean()}


def simulated_run(
    task: RutedTask, spec: RutedSpec, rng: np.random.Generator, silent: frozenset[str] = frozenset()
) -> RutedPlan:
    """One run's answers, drawn from the planted probabilities and read by the plan."""
    plan = plan_ruted(task, spec, Capabilities())
    names = [request.id.split("/") for request in plan.requests]  # context/template/occupation
    p_male = {c: dict(zip([o.name for o in task.occupations], planted(task, c), strict=True))
              for c in CONTEXTS}  # fmt: skip
    p = np.array([p_male[context][name] for context, _, name in names])[:, None]
    dropping = np.array([NO_PRONOUN_RATE[context] for context, _, _ in names])[:, None]
    draw, coin = rng.random((len(names), REPLICATES)), rng.random((len(names), REPLICATES))
    verdicts = np.where(coin < p, "male", "female")
    verdicts = np.where(draw < TIE_RATE + dropping, "none", verdicts)
    verdicts = np.where(draw < TIE_RATE, "tie", verdicts)
    for request, (_, _, name), row in zip(plan.requests, names, verdicts, strict=True):
        texts = tuple(TEXTS["none" if name in silent else v] for v in row)
        plan.annotate(RequestResult(request, "key", ModelResponse(texts=texts)))
    return plan


def test_intervals_have_roughly_nominal_coverage_over_simulated_runs(
    task: tuple[RutedTask, RutedSpec],
) -> None:
    """For these 40 occupations held fixed (their planted mean the truth): the paper's
    interval over replicates has its nominal coverage, and biasaudit's over occupations,
    which also allows for another list of occupations, covers at least as often."""
    ruted, spec = task
    rng = np.random.default_rng(20250701)
    truths = {c: truth(ruted, c) for c in CONTEXTS}
    hits = {(over, c, m): 0 for over in ("replicates", "occupations") for c in CONTEXTS
            for m in METRICS}  # fmt: skip
    for _ in range(RUNS):
        rows = simulated_run(ruted, spec, rng).occupation_rows()
        for context in CONTEXTS:
            for over in ("replicates", "occupations"):
                figures = context_metrics(
                    rows[rows["context"] == context], source="generations", confidence=0.95,
                    templates=(0,), over=over,
                )  # fmt: skip
                for metric in METRICS:
                    low, high = getattr(figures, f"{metric}_ci")
                    hits[(over, context, metric)] += low <= truths[context][metric] <= high
    coverage = {key: count / RUNS for key, count in hits.items()}
    fixed = {key: share for key, share in coverage.items() if key[0] == "replicates"}
    # 200 runs: a nominal 95% interval covers 95% +- 1.5% (one binomial SD).
    for key, share in fixed.items():
        assert 0.90 <= share <= 0.99, (key, share)
    assert 0.93 <= sum(fixed.values()) / len(fixed) <= 0.97, coverage
    for (over, context, metric), share in coverage.items():
        if over == "occupations":
            assert share >= 0.95, (context, metric, share)


def test_an_occupation_with_no_gendered_replicate_is_counted_and_left_out(
    task: tuple[RutedTask, RutedSpec],
) -> None:
    ruted, spec = task
    plan = simulated_run(ruted, spec, np.random.default_rng(1), silent=frozenset({"nurse", "CEO"}))
    rows = plan.occupation_rows()
    figures = context_metrics(rows[rows["context"] == "esl"], source="generations",
                              confidence=0.95)  # fmt: skip
    assert figures.excluded == ["nurse", "CEO"] and figures.occupations == 38
    assert figures.dropped_reasons["no_pronouns"] >= 2 * REPLICATES
    assert figures.skew is not None and figures.skew_ci is not None


def test_the_scoring_path_counts_what_it_reads(
    task: tuple[RutedTask, RutedSpec], tmp_path: Path
) -> None:
    ruted, spec = task
    plan = simulated_run(ruted, spec, np.random.default_rng(2))
    replicates = plan.replicate_rows()
    rows = plan.occupation_rows()
    assert len(replicates) == len(CONTEXTS) * 40 * REPLICATES
    for verdict, column in (("male", "male"), ("female", "female"), ("none", "none"),
                            ("tie", "tied")):  # fmt: skip
        assert (replicates["verdict"] == verdict).sum() == rows[column].sum()
