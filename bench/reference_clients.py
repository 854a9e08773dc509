"""Reference clients for the fan-out benchmark: the same requests without biasaudit.

``python bench/reference_clients.py KIND PROMPTS BASE_URL CONCURRENCY`` sends
every chat prompt in PROMPTS (the benchmark's file) once, at most CONCURRENCY
at a time, and prints how many answers it parsed. KIND:

- ``aiohttp``: one ``aiohttp.ClientSession``, a POST of the JSON body per
  prompt, the answer read and parsed as JSON. No cache, no run directory, no
  retries: about the least a Python client can do per request.
- ``openai-sdk``: the official SDK as its documentation shows it,
  ``AsyncOpenAI(http_client=DefaultAioHttpClient())`` and
  ``chat.completions.create(...)`` per prompt (typed parameters, typed answer).

``bench_fanout.py --reference`` times each as a program, start-up included,
interleaved with ``biasaudit fanout`` on the same server, so that the machine's
drift between runs moves them all alike.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


async def with_aiohttp(bodies: list[dict[str, Any]], base_url: str, concurrency: int) -> int:
    import aiohttp

    limit = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(body: dict[str, Any]) -> int:
            async with limit, session.post(f"{base_url}/chat/completions", json=body) as response:
                answer = json.loads(await response.read())
            return len(answer["choices"])

        return sum(await asyncio.gather(*(one(body) for body in bodies)))


async def with_openai_sdk(bodies: list[dict[str, Any]], base_url: str, concurrency: int) -> int:
    import openai

    limit = asyncio.Semaphore(concurrency)
    client = openai.AsyncOpenAI(
        api_key="unused",
        base_url=base_url,
        max_retries=0,
        http_client=openai.DefaultAioHttpClient(),
    )
    async with client:

        async def one(body: dict[str, Any]) -> int:
            async with limit:
                answer = await client.chat.completions.create(**body)
            return len(answer.choices)

        return sum(await asyncio.gather(*(one(body) for body in bodies)))


def main() -> None:
    kind, prompts, base_url, concurrency = sys.argv[1:5]
    bodies = []
    with open(prompts) as handle:
        for line in handle:
            prompt = json.loads(line)
            bodies.append({"model": "bench", "messages": prompt["messages"], **prompt["params"]})
    send = {"aiohttp": with_aiohttp, "openai-sdk": with_openai_sdk}[kind]
    print(asyncio.run(send(bodies, base_url.rstrip("/"), int(concurrency))))


if __name__ == "__main__":
    main()
