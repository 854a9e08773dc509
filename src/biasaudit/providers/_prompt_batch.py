"""Several legacy-completions prompts in one request, for servers that take a list ``prompt``.

vLLM and SGLang answer ``POST /v1/completions`` with ``"prompt": [p0, p1, ...]``
in one pass, returning ``n`` choices per prompt with ``index = i * n + j`` for
choice ``j`` of prompt ``i`` (as OpenAI's legacy API does). Against such a
server, per-request overhead (HTTP, JSON, scheduling) is paid once for up to
``size`` prompts.

The engine still sees one request per prompt (each its own cache entry, retry
and result): :class:`PromptBatcher` gathers the requests that arrive while the
event loop is busy, sends them together once the loop turns (or once ``size``
have gathered), and hands each waiting request its own share of the answer.
Only requests with the same sampling parameters share a batch. A failed batch
fails each of its requests, and the engine retries each on its own.

Token usage of a batch is shared among its prompts (evenly, the remainder to
the first ones), so a run's totals stay exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from biasaudit.errors import FatalProviderError
from biasaudit.providers._types import ModelRequest, ModelResponse
from biasaudit.providers._wire import ChatChoice, OpenAIBody, malformed

__all__ = ["PromptBatcher", "split_choices"]

SendBatch = Callable[[Sequence[ModelRequest], float], Awaitable[list[ModelResponse | Exception]]]
"""Sends the prompts of ``requests`` in one request; one response (or error) per request."""

_Waiting = list[tuple[ModelRequest, "asyncio.Future[ModelResponse]"]]


class PromptBatcher:
    """Gathers concurrent completions requests into batches of at most ``size``."""

    def __init__(self, size: int, send: SendBatch) -> None:
        if size < 2:
            raise ValueError("a prompt batch holds at least two prompts")
        self.size, self._send = size, send
        self._open: dict[str, _Waiting] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.batches_sent = 0

    async def submit(self, request: ModelRequest, timeout: float) -> ModelResponse:
        """Wait for ``request``'s share of the batch it joins."""
        loop = asyncio.get_running_loop()
        group = request.params.model_dump_json()
        waiting = self._open.get(group)
        if waiting is None:
            waiting = self._open[group] = []
            # Flush once the loop turns: every engine worker that is ready joins first.
            loop.call_soon(self._flush, group, waiting, timeout)
        future: asyncio.Future[ModelResponse] = loop.create_future()
        waiting.append((request, future))
        if len(waiting) >= self.size:
            self._flush(group, waiting, timeout)
        return await future

    def _flush(self, group: str, waiting: _Waiting, timeout: float) -> None:
        if self._open.get(group) is not waiting:
            return  # already sent (it filled up before the loop turned)
        del self._open[group]
        live = [(r, f) for r, f in waiting if not f.done()]
        if live:
            task = asyncio.get_running_loop().create_task(self._send_batch(live, timeout))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send_batch(self, waiting: _Waiting, timeout: float) -> None:
        self.batches_sent += 1
        try:
            outcomes = await self._send([r for r, _ in waiting], timeout)
        except Exception as error:  # every request of the batch gets the error to classify
            outcomes = [error] * len(waiting)
        for (_, future), outcome in zip(waiting, outcomes, strict=True):
            if future.done():
                continue  # its engine worker was cancelled
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def split_choices(body: OpenAIBody, prompts: int, n: int) -> list[OpenAIBody]:
    """One answer per prompt from a batched completions answer.

    Choice ``index = i * n + j`` is choice ``j`` of prompt ``i``; usage is
    shared evenly, the remainder going to the first prompts.

    Raises
    ------
    FatalProviderError
        The server returned another number of choices: it does not take a
        list of prompts, whatever it was declared to do.
    MalformedResponseError
        A choice's index is out of range or repeated.
    """
    choices = body["choices"]
    if len(choices) != prompts * n:
        raise FatalProviderError(
            f"the endpoint answered {prompts} batched prompts with {len(choices)} choices, "
            f"not {prompts * n}: it does not take a list of prompts"
        )
    usage = body.get("usage") or {}
    input_shares = _shares(usage.get("prompt_tokens") or 0, prompts)
    output_shares = _shares(usage.get("completion_tokens") or 0, prompts)
    indices: list[int] = []
    for position, choice in enumerate(choices):
        index = choice.get("index")
        indices.append(position if index is None else index)
    if sorted(indices) != list(range(prompts * n)):
        raise malformed(
            f"batched completions choices with indices {sorted(indices)[:12]}, "
            f"not 0..{prompts * n - 1}",
            dict(body),
        )
    parts: list[list[ChatChoice]] = [[] for _ in range(prompts)]
    for index, choice in zip(indices, choices, strict=True):
        parts[index // n].append({**choice, "index": index % n})
    return [
        {
            **body,
            "choices": part,
            "usage": {"prompt_tokens": input_shares[i], "completion_tokens": output_shares[i]},
        }
        for i, part in enumerate(parts)
    ]


def _shares(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (i < extra) for i in range(parts)]
