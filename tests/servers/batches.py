"""What the OpenAI and Anthropic fake servers share for their batch endpoints.

A batch is answered in the background: after `delay` seconds every entry goes
through the same builder as the server's normal endpoint (so a batch answer
equals the direct one), and the results are kept in shuffled order, as the
real APIs promise no order. Tests can make entries error, expire or be
cancelled (`fail_entries`), hold batches (`delay`, read live) and count
creations (`created`).
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from aiohttp import web

from .base import ApiError, json_response
from .responders import JsonDict

if TYPE_CHECKING:
    from .base import FakeProviderServer

EntryFault = Literal["error", "expire", "cancel"]
EntryMatch = Callable[[JsonDict], bool] | str
# Entries answered between two yields to the server's loop, so polls stay quick.
_SLICE = 500


@dataclass
class BatchJob:
    """One batch: its entries, state and (once ended) its result entries.

    `entries` are (custom_id, request body) pairs; `results` hold, per entry,
    the custom_id and either the answer body or a fault / error status.
    """

    id: str
    entries: list[tuple[str, JsonDict]]
    endpoint: str
    created_at: float
    metadata: JsonDict | None = None
    status: str = "in_progress"
    ended_at: float | None = None
    cancel_requested: bool = False
    results: list[JsonDict] = field(default_factory=list)
    extra: JsonDict = field(default_factory=dict)

    def count(self, outcome: str) -> int:
        return sum(result["outcome"] == outcome for result in self.results)


class BatchBook:
    """The batches of one server (thread-safe for the test thread reading counts)."""

    def __init__(self, *, delay: float = 0.0, seed: int = 0, max_requests: int | None = None):
        self.delay = delay  # read live: lowering it releases the batches waiting on it
        self.max_requests = max_requests
        self.created = 0
        self.jobs: dict[str, BatchJob] = {}
        self._faults: list[tuple[EntryMatch, EntryFault]] = []
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    def fail_entries(self, match: EntryMatch, fault: EntryFault) -> None:
        """Make every later batch entry whose request matches error, expire or be cancelled.

        `match`: a substring of the request body's JSON, or callable(body) -> bool.
        """
        with self._lock:
            self._faults.append((match, fault))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()
            self.jobs.clear()
            self.created = 0

    def add(self, job: BatchJob, answer: Callable[[str, JsonDict], JsonDict]) -> None:
        """Keep `job` and answer it in the background on the running loop."""
        with self._lock:
            self.jobs[job.id] = job
            self.created += 1
        task = asyncio.get_running_loop().create_task(self._process(job, answer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def newest_first(self) -> list[BatchJob]:
        with self._lock:
            return sorted(self.jobs.values(), key=lambda job: -job.created_at)

    def _fault_of(self, body: JsonDict) -> EntryFault | None:
        with self._lock:
            faults = list(self._faults)
        text: str | None = None
        for match, fault in faults:
            if callable(match):
                if match(body):
                    return fault
                continue
            text = text if text is not None else json.dumps(body, ensure_ascii=False)
            if match in text:
                return fault
        return None

    async def _process(self, job: BatchJob, answer: Callable[[str, JsonDict], JsonDict]) -> None:
        """Wait `delay`, answer each entry through `answer(custom_id, body)`, shuffle, end.

        `answer` returns {"status": HTTP status, "body": the endpoint's JSON answer}.
        """
        started = time.monotonic()
        while time.monotonic() < started + self.delay and not job.cancel_requested:
            await asyncio.sleep(min(0.02, max(0.0, started + self.delay - time.monotonic())))
        results: list[JsonDict] = []
        expired = False
        for i, (custom_id, body) in enumerate(job.entries):
            fault = "cancel" if job.cancel_requested else self._fault_of(body)
            if fault is None:
                results.append(
                    {"custom_id": custom_id, "outcome": "answered", **answer(custom_id, body)}
                )
            else:
                expired |= fault == "expire"
                outcome = {"error": "errored", "expire": "expired", "cancel": "canceled"}[fault]
                results.append({"custom_id": custom_id, "outcome": outcome})
            if i % _SLICE == _SLICE - 1:
                await asyncio.sleep(0)
        self._rng.shuffle(results)
        job.results = results
        job.ended_at = time.time()
        job.status = "cancelled" if job.cancel_requested else "expired" if expired else "ended"


def guarded(server: FakeProviderServer, handler: Callable[[web.Request], Any]) -> Any:
    """``handler`` behind the server's key check, its errors in the provider's shape."""

    async def guarded_handler(request: web.Request) -> web.StreamResponse:
        try:
            if server.require_api_key is not None and not server.authorized(request.headers):
                raise server.auth_error()
            response: web.StreamResponse = await handler(request)
            return response
        except ApiError as err:
            return json_response(server.error_payload(err), err.status, err.headers)

    return guarded_handler
