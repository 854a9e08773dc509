"""OpenAI's Batch API through the official ``openai`` async SDK.

A batch is a JSONL file uploaded with ``purpose="batch"`` (one line per
request: ``custom_id``, ``method``, ``url``, ``body``), then a batch created on
it for one endpoint with a 24 h window. Its results come as two files: the
output file (answers, each with its HTTP status) and the error file (entries
that failed, expired or were cancelled). Batches carry ``metadata``, so a batch
created just before a crash is found again by the label biasaudit gave it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

from pydantic_core import from_json

from biasaudit.providers._batch_api import (
    BatchAPI,
    BatchEntry,
    BatchLimits,
    BatchState,
    EntryFailure,
)
from biasaudit.providers._types import ModelRequest, ModelResponse

logger = logging.getLogger(__name__)

__all__ = ["METADATA_KEY", "OPENAI_BATCH_LIMITS", "OpenAIBatchAPI"]

OPENAI_BATCH_LIMITS = BatchLimits(max_requests=50_000, max_bytes=200 * 1000**2)
METADATA_KEY = "biasaudit_batch"
_ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
_LIST_PAGE = 100
# Error codes OpenAI writes into the error file for entries that never ran.
_FAILURES: dict[str, EntryFailure] = {"batch_expired": "expired", "batch_cancelled": "canceled"}

BodyBuilder = Callable[[ModelRequest], tuple[str, dict[str, Any]]]
BodyParser = Callable[..., ModelResponse]


class OpenAIBatchAPI(BatchAPI):
    """``/v1/files`` and ``/v1/batches`` of one OpenAI client.

    Parameters
    ----------
    client:
        Returns the provider's SDK client (built on first use).
    request_body:
        The provider's own ``(path, body)`` of a request.
    parse_body:
        The provider's own reader of an answer's JSON body.
    """

    name = "openai"
    limits = OPENAI_BATCH_LIMITS

    def __init__(
        self, client: Callable[[], Any], request_body: BodyBuilder, parse_body: BodyParser
    ) -> None:
        self._client, self._request_body, self._parse_body = client, request_body, parse_body

    def endpoint(self, request: ModelRequest) -> str:
        return "/v1" + self._request_body(request)[0]

    def line(self, custom_id: str, request: ModelRequest) -> dict[str, Any]:
        path, body = self._request_body(request)
        return {"custom_id": custom_id, "method": "POST", "url": "/v1" + path, "body": body}

    async def submit(
        self, lines: list[dict[str, Any]], *, endpoint: str, tag: str, timeout: float
    ) -> BatchState:
        client = self._client()
        data = b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in lines)
        uploaded = await client.files.create(
            file=(f"biasaudit-{tag}.jsonl", data, "application/jsonl"),
            purpose="batch",
            timeout=timeout,
        )
        batch = await client.batches.create(
            input_file_id=uploaded.id,
            endpoint=endpoint,
            completion_window="24h",
            metadata={METADATA_KEY: tag},
            timeout=timeout,
        )
        return _state(batch)

    async def find(
        self, tag: str, *, size: int, since: float, known: Collection[str], timeout: float
    ) -> BatchState | None:
        # Newest first: stop at the first batch older than the one looked for.
        async for batch in self._client().batches.list(limit=_LIST_PAGE, timeout=timeout):
            if (batch.metadata or {}).get(METADATA_KEY) == tag:
                return _state(batch)
            if batch.created_at < since:
                return None
        return None

    async def poll(self, batch_id: str, *, timeout: float) -> BatchState:
        return _state(await self._client().batches.retrieve(batch_id, timeout=timeout))

    async def results(self, state: BatchState, *, timeout: float) -> AsyncIterator[BatchEntry]:
        client = self._client()
        batch = await client.batches.retrieve(state.batch_id, timeout=timeout)
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            content = await client.files.content(file_id, timeout=timeout)
            for raw in content.content.splitlines():
                line = _line(raw)
                if line is not None:
                    yield _entry(line)

    def parse(self, entry: BatchEntry, request: ModelRequest) -> ModelResponse:
        assert entry.body is not None
        response = self._parse_body(entry.body, request, request_id=entry.request_id)
        assert isinstance(response, ModelResponse)
        return response


def _state(batch: Any) -> BatchState:
    counts = batch.request_counts
    total = counts.total if counts else 0
    succeeded = counts.completed if counts else 0
    failed = counts.failed if counts else 0
    return BatchState(
        batch_id=batch.id,
        status=batch.status,
        ended=batch.status in _ENDED,
        counts={
            "total": total,
            "processing": 0 if batch.status in _ENDED else max(0, total - succeeded - failed),
            "succeeded": succeeded,
            "errored": failed,
        },
        created_at=float(batch.created_at),
    )


def _line(raw: bytes) -> dict[str, Any] | None:
    """One line of a results file as JSON, or ``None`` for a blank or unreadable one.

    An unreadable line answers nothing: its request, left without an answer, is
    sent again through the normal path.
    """
    if not raw.strip():
        return None
    try:
        line = from_json(raw)  # bounded nesting, unlike json.loads
    except ValueError:
        logger.warning("skipped an unreadable line of a batch's results: %r", raw[:120])
        return None
    return line if isinstance(line, dict) else None


def _entry(line: dict[str, Any]) -> BatchEntry:
    """One line of the output or error file."""
    custom_id = str(line.get("custom_id"))
    response = line.get("response")
    response = response if isinstance(response, dict) else {}
    error = line.get("error")
    body = response.get("body")
    if not error and response.get("status_code") == 200 and isinstance(body, dict):
        request_id = response.get("request_id")
        return BatchEntry(
            custom_id, body=body, request_id=request_id if isinstance(request_id, str) else None
        )
    if isinstance(error, dict):
        code, message = str(error.get("code") or ""), str(error.get("message") or "")
    else:
        inner = body.get("error") if isinstance(body, dict) else None
        code = str(inner.get("code") or "") if isinstance(inner, dict) else ""
        message = str(inner.get("message") or "") if isinstance(inner, dict) else str(body)
        message = f"HTTP {response.get('status_code')}: {message}"
    return BatchEntry(
        custom_id, failure=_FAILURES.get(code, "errored"), error=message or code or "failed"
    )
