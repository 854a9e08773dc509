"""The toy kind's requests: one plain yes/no question each."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from biasaudit.kinds.kit import ModelRequest, Provider, RequestPlan, RequestResult, SamplingParams


class ToyPlan(RequestPlan):
    def __init__(self, questions: int) -> None:
        self.ids = [f"q{i}" for i in range(questions)]
        self.said_yes: dict[str, bool] = {}

    def _each_request(self) -> Iterator[ModelRequest]:
        for question in self.ids:
            text = f"Question {question}: is water wet? Answer Yes or No."
            yield ModelRequest(id=question, messages=({"role": "user", "content": text},),
                               params=SamplingParams(max_tokens=1, temperature=0.0))  # fmt: skip

    def annotate(self, result: RequestResult) -> dict[str, Any]:
        text = result.response.text if result.response is not None else ""
        self.said_yes[result.request.id] = text.strip().lower().startswith("yes")
        return {"parsed": text}


def plan_requests(spec: Any, provider: Provider) -> Iterator[ModelRequest]:
    return ToyPlan(spec.questions).iter_requests()
