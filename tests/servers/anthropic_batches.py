"""Message Batches of the fake Anthropic server, in the real wire format.

    POST /v1/messages/batches               create ({"requests": [{custom_id, params}]})
    GET  /v1/messages/batches/{id}          the batch (results_url once ended)
    GET  /v1/messages/batches/{id}/results  JSONL of {custom_id, result}
    GET  /v1/messages/batches               list, newest first (limit, after_id, before_id)
    POST /v1/messages/batches/{id}/cancel   cancel

Entries are answered by the server's own Messages builder; `result.type` is
`succeeded`, `errored` (an HTTP error from the builder or an injected `error`),
`expired` or `canceled`.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from aiohttp import web

from .base import ApiError, json_response
from .batches import BatchBook, BatchJob, guarded
from .responders import JsonDict

if TYPE_CHECKING:
    from .anthropic_server import AnthropicServer

BATCHES_PATH = "/v1/messages/batches"
_CUSTOM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_WINDOW_S = 24 * 3600


class AnthropicBatchRoutes:
    """Message Batches of one `AnthropicServer`; see the module docstring."""

    def __init__(self, server: AnthropicServer, book: BatchBook) -> None:
        self.server, self.book = server, book

    def routes(self) -> list[web.AbstractRouteDef]:
        return [
            web.post(BATCHES_PATH, guarded(self.server, self._create)),
            web.get(BATCHES_PATH, guarded(self.server, self._list)),
            web.get(BATCHES_PATH + "/{id}", guarded(self.server, self._retrieve)),
            web.get(BATCHES_PATH + "/{id}/results", guarded(self.server, self._results)),
            web.post(BATCHES_PATH + "/{id}/cancel", guarded(self.server, self._cancel)),
        ]

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.server._note(request, body)
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise ApiError(400, "requests: Field required (a non-empty list)")
        limit = self.book.max_requests or 100_000
        if len(requests) > limit:
            raise ApiError(400, f"requests: at most {limit} requests per batch")
        entries: list[tuple[str, JsonDict]] = []
        seen: set[str] = set()
        for i, entry in enumerate(requests):
            custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
            if not isinstance(custom_id, str) or not _CUSTOM_ID.match(custom_id):
                raise ApiError(400, f"requests.{i}.custom_id: must be 1-64 of [A-Za-z0-9_-]")
            if custom_id in seen:
                raise ApiError(400, f"requests.{i}.custom_id: {custom_id!r} is used twice")
            seen.add(custom_id)
            entries.append((custom_id, entry.get("params") or {}))
        job = BatchJob(
            id=self.server.new_id("msgbatch_"),
            entries=entries,
            endpoint="/v1/messages",
            created_at=datetime.now(UTC).timestamp(),
        )
        self.book.add(job, self._answer)
        return json_response(self._batch(job))

    def _answer(self, custom_id: str, body: JsonDict) -> JsonDict:
        try:
            return {"status": 200, "body": self.server.message(body, None)}
        except ApiError as err:
            return {"status": err.status, "body": self.server.error_payload(err)}

    def _job(self, request: web.Request) -> BatchJob:
        job = self.book.jobs.get(request.match_info["id"])
        if job is None:
            raise ApiError(404, f"No batch found with id '{request.match_info['id']}'.")
        return job

    async def _retrieve(self, request: web.Request) -> web.Response:
        return json_response(self._batch(self._job(request)))

    async def _list(self, request: web.Request) -> web.Response:
        jobs = self.book.newest_first()
        ids = [job.id for job in jobs]
        after, before = request.query.get("after_id"), request.query.get("before_id")
        if after is not None:
            jobs = jobs[ids.index(after) + 1 :] if after in ids else []
        elif before is not None:
            jobs = jobs[: ids.index(before)] if before in ids else []
        limit = int(request.query.get("limit", "20"))
        page = [self._batch(job) for job in jobs[:limit]]
        return json_response({
            "data": page,
            "has_more": len(jobs) > limit,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
        })  # fmt: skip

    async def _cancel(self, request: web.Request) -> web.Response:
        job = self._job(request)
        if job.ended_at is None:
            job.cancel_requested = True
        return json_response(self._batch(job))

    async def _results(self, request: web.Request) -> web.Response:
        job = self._job(request)
        if job.ended_at is None:
            raise ApiError(400, f"Batch {job.id} is still in progress; results are not ready.")
        lines = [
            json.dumps({"custom_id": r["custom_id"], "result": _result(r)}) for r in job.results
        ]
        return web.Response(
            body=("\n".join(lines) + "\n").encode(), content_type="application/binary"
        )

    def _batch(self, job: BatchJob) -> JsonDict:
        ended = job.ended_at is not None
        counts = {"processing": 0 if ended else len(job.entries), "succeeded": 0, "errored": 0,
                  "canceled": 0, "expired": 0}  # fmt: skip
        for result in job.results if ended else ():
            counts[_result(result)["type"]] += 1
        return {
            "id": job.id,
            "type": "message_batch",
            "processing_status": "ended"
            if ended
            else "canceling"
            if job.cancel_requested
            else "in_progress",
            "request_counts": counts,
            "ended_at": _iso(job.ended_at) if ended else None,
            "created_at": _iso(job.created_at),
            "expires_at": _iso(job.created_at + _WINDOW_S),
            "archived_at": None,
            "cancel_initiated_at": _iso(job.created_at) if job.cancel_requested else None,
            "results_url": f"{self.server.root_url}{BATCHES_PATH}/{job.id}/results"
            if ended
            else None,
        }


def _result(result: JsonDict) -> JsonDict:
    outcome = result["outcome"]
    if outcome == "answered" and result["status"] == 200:
        return {"type": "succeeded", "message": result["body"]}
    if outcome in ("expired", "canceled"):
        return {"type": outcome}
    error = (
        result["body"]["error"]
        if outcome == "answered"
        else {"type": "api_error", "message": "Injected batch entry failure."}
    )
    return {"type": "errored", "error": {"type": "error", "error": error}}


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")
