"""Running the toy kind through biasaudit's run skeleton."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from biasaudit.kinds.kit import (
    Manifest,
    Provider,
    RunSession,
    request_counts,
    run_async,
    run_planned,
)
from biasaudit.metrics import wilson_interval
from toy_kind.metrics_file import ToyMetrics
from toy_kind.plan import ToyPlan


@dataclass(frozen=True)
class ToyResult:
    run_dir: Path
    manifest: Manifest
    metrics: ToyMetrics


def run(spec: Any, *, provider: Provider | None = None, stderr: TextIO | None = None,
        command: Sequence[str] | None = None) -> ToyResult:  # fmt: skip
    provider = provider or spec.resolve_provider()
    plan = ToyPlan(spec.questions)

    async def audit() -> ToyResult:
        ran = await run_planned(
            "toy", spec, provider, plan, label="toy-yesno", stderr=stderr, command=command,
            write_results=lambda session: _write(session, spec, plan),
        )  # fmt: skip
        return ToyResult(ran.session.run.path, ran.session.manifest, ran.results)

    return run_async(audit())


def _write(session: RunSession, spec: Any, plan: ToyPlan) -> ToyMetrics:
    n, yes = len(plan.said_yes), sum(plan.said_yes.values())
    metrics = ToyMetrics(
        model=session.provider.model_id, simulated=session.provider.simulated,
        model_versions=dict(session.engine.stats.model_versions), yes_share=yes / n,
        yes_share_ci=list(wilson_interval(yes, n, spec.confidence)), n=n,
        requests=request_counts(session),
    )  # fmt: skip
    session.run.write_json("metrics.json", metrics)
    return metrics
