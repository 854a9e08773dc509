"""An in-process fake provider for engine logic (wire-level tests use real servers)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict

from biasaudit.providers import Capabilities, ModelRequest, ModelResponse, Provider


class FakeProvider(Provider):
    """Answers ``"answer to <id>"`` after ``delay`` seconds; scripted outcomes first.

    ``script[id]`` is a list consumed one entry per attempt: an exception to
    raise or a response to return.
    """

    def __init__(
        self, *, delay: float = 0.0, n: bool = True, refuse: set[str] | None = None
    ) -> None:
        self.name, self.model, self.base_url = "fake", "model-1", "http://fake.invalid/v1"
        self.capabilities = Capabilities(n=n)
        self.delay = delay
        self.script: dict[str, list[BaseException | ModelResponse]] = defaultdict(list)
        self.calls: Counter[str] = Counter()
        self.starts: list[float] = []
        self.in_flight = self.max_in_flight = 0
        self.refuse = refuse or set()

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        self.calls[request.id] += 1
        self.starts.append(time.monotonic())
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            if self.script[request.id]:
                outcome = self.script[request.id].pop(0)
                if isinstance(outcome, BaseException):
                    raise outcome
                return outcome
            n = request.params.n or 1
            suffix = f"#{request.sample}" if request.sample is not None else ""
            return ModelResponse(
                texts=tuple(f"answer to {request.id}{suffix}" for _ in range(n)),
                model_version="model-1-2026",
                refusal="I can't help with that" if request.id in self.refuse else None,
            )
        finally:
            self.in_flight -= 1


def chat(request_id: str, text: str = "hello", **params: object) -> ModelRequest:
    return ModelRequest.model_validate(
        {"id": request_id, "messages": [{"role": "user", "content": text}], "params": params}
    )
