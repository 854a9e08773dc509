"""The toy kind's metrics.json: the share of yes answers, with its interval."""

from __future__ import annotations

from typing import Any

from biasaudit.kinds.kit import MetricsHeader, RequestCounts, figure_row


class ToyMetrics(MetricsHeader):
    schema_version: int = 1
    task: str = "toy-yesno"
    yes_share: float
    yes_share_ci: list[float]
    n: int
    requests: RequestCounts


Metrics = ToyMetrics


def figure_rows(metrics: ToyMetrics) -> list[dict[str, Any]]:
    return [figure_row("yes_share", metrics.yes_share, metrics.yes_share_ci, n=metrics.n)]
