"""Anthropic's Message Batches through the official ``anthropic`` async SDK.

A batch is one request listing ``{custom_id, params}`` entries (``params`` is a
Messages API body); its results are a JSONL file of ``{custom_id, result}``
where ``result.type`` is ``succeeded`` (with the ``message``), ``errored``,
``canceled`` or ``expired``. Message Batches keep no labels, so a batch created
just before a crash is recognised by its size among the batches created since
(see :meth:`AnthropicBatchAPI.find`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

from biasaudit.providers._batch_api import BatchAPI, BatchEntry, BatchLimits, BatchState
from biasaudit.providers._types import ModelRequest, ModelResponse

__all__ = ["ANTHROPIC_BATCH_LIMITS", "AnthropicBatchAPI"]

ANTHROPIC_BATCH_LIMITS = BatchLimits(max_requests=100_000, max_bytes=256 * 1000**2)
_LIST_PAGE = 100
_COUNT_NAMES = ("processing", "succeeded", "errored", "expired", "canceled")

BodyBuilder = Callable[[ModelRequest], dict[str, Any]]
BodyParser = Callable[..., ModelResponse]


class AnthropicBatchAPI(BatchAPI):
    """``/v1/messages/batches`` of one Anthropic client.

    Parameters
    ----------
    client:
        Returns the provider's SDK client (built on first use).
    message_body:
        The provider's own Messages API body of a request.
    parse_body:
        The provider's own reader of a message.
    """

    name = "anthropic"
    limits = ANTHROPIC_BATCH_LIMITS

    def __init__(
        self, client: Callable[[], Any], message_body: BodyBuilder, parse_body: BodyParser
    ) -> None:
        self._client, self._message_body, self._parse_body = client, message_body, parse_body

    def endpoint(self, request: ModelRequest) -> str:
        return "/v1/messages"

    def line(self, custom_id: str, request: ModelRequest) -> dict[str, Any]:
        return {"custom_id": custom_id, "params": self._message_body(request)}

    async def submit(
        self, lines: list[dict[str, Any]], *, endpoint: str, tag: str, timeout: float
    ) -> BatchState:
        batch = await self._client().messages.batches.create(requests=lines, timeout=timeout)
        return _state(batch)

    async def find(
        self, tag: str, *, size: int, since: float, known: Collection[str], timeout: float
    ) -> BatchState | None:
        """The one unrecorded batch of ``size`` entries created since ``since``, if exactly one.

        Without labels this is a guess; a wrong one costs no answer: entries
        whose ``custom_id`` matches nothing asked are ignored, and requests
        without an answer in the batch are sent again through the normal path.
        """
        found: list[BatchState] = []
        pages = self._client().messages.batches.list(limit=_LIST_PAGE, timeout=timeout)
        async for batch in pages:  # newest first
            state = _state(batch)
            if state.created_at < since:
                break
            if state.batch_id not in known and state.counts["total"] == size:
                found.append(state)
        return found[0] if len(found) == 1 else None

    async def poll(self, batch_id: str, *, timeout: float) -> BatchState:
        return _state(await self._client().messages.batches.retrieve(batch_id, timeout=timeout))

    async def results(self, state: BatchState, *, timeout: float) -> AsyncIterator[BatchEntry]:
        decoder = await self._client().messages.batches.results(state.batch_id, timeout=timeout)
        async for item in decoder:
            yield _entry(item.to_dict())

    def parse(self, entry: BatchEntry, request: ModelRequest) -> ModelResponse:
        assert entry.body is not None
        response = self._parse_body(entry.body, request_id=entry.request_id)
        assert isinstance(response, ModelResponse)
        return response


def _state(batch: Any) -> BatchState:
    counts = {name: int(getattr(batch.request_counts, name, 0) or 0) for name in _COUNT_NAMES}
    counts["total"] = sum(counts.values())
    return BatchState(
        batch_id=batch.id,
        status=batch.processing_status,
        ended=batch.processing_status == "ended",
        counts=counts,
        created_at=batch.created_at.timestamp(),
    )


def _entry(line: dict[str, Any]) -> BatchEntry:
    custom_id = str(line.get("custom_id"))
    result = line.get("result")
    result = result if isinstance(result, dict) else {}
    kind = result.get("type")
    if kind == "succeeded" and isinstance(result.get("message"), dict):
        return BatchEntry(custom_id, body=result["message"])
    if kind == "expired":
        return BatchEntry(custom_id, failure="expired", error="the batch expired before it ran")
    if kind == "canceled":
        return BatchEntry(custom_id, failure="canceled", error="the batch was canceled")
    outer = result.get("error")
    error = outer.get("error") if isinstance(outer, dict) else None
    error = error if isinstance(error, dict) else {}
    message = f"{error.get('type', 'error')}: {error.get('message', 'errored in the batch')}"
    return BatchEntry(custom_id, failure="errored", error=message)
