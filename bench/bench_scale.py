"""Scale past one request per prompt and one server: batched prompts, replicas.

1. ``biasaudit fanout`` of N legacy-completions prompts against a loopback
   server that waits L seconds per request: ``vllm/`` (prompts batched, up to
   32 per request) against ``llamacpp/`` (one prompt per request), same
   concurrency C.
2. N chat prompts against one replica and against two, each replica a loopback
   server with S request slots (a request waits for a free slot, then L
   seconds), as a GPU server serves a bounded batch at a time.

Run from the repository root:  python bench/bench_scale.py [--prompts 4000]
Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_fanout import ROOT, run_biasaudit, spawn_server, write_prompts


def write_completions(path: Path, n: int) -> None:
    with open(path, "w") as handle:
        for i in range(n):
            line = {"id": f"p{i}", "prompt": f"The candidate {i} is", "params": {"max_tokens": 1}}
            handle.write(json.dumps(line) + "\n")


def start_server(latency: float, slots: int) -> tuple[subprocess.Popen[str], str]:
    code = f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); import bench_scale; bench_scale.serve({latency}, {slots})"
    return spawn_server(["-c", code])


def serve(latency: float, slots: int) -> None:
    """A loopback OpenAI-compatible server that answers at most ``slots`` requests at once."""
    from tests.servers import OpenAIServer

    class SlotServer(OpenAIServer):
        _slots: asyncio.Semaphore | None = None

        async def handle(self, request: Any, build: Any) -> Any:
            if self._slots is None:
                self._slots = asyncio.Semaphore(slots)
            async with self._slots:
                return await super().handle(request, build)

    server = SlotServer(latency=latency, record=False).start()
    print(f"PORT {server.port}", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    server.stop()


def fanout(
    prompts: Path, model: str, urls: list[str], concurrency: int, runs: Path, n: int
) -> float:
    args = [
        "fanout",
        str(prompts),
        "--model",
        model,
        "--concurrency",
        str(concurrency),
        "--runs-dir",
        str(runs),
    ]
    for url in urls:
        args += ["--base-url", url]
    wall, _, out = run_biasaudit(args)
    if f"{n} answered, 0 failed" not in out:
        raise RuntimeError(f"not every prompt was answered: {out}")
    return wall


def bench_batched(n: int, concurrency: int, latency: float, work: Path) -> None:
    prompts = work / "completions.jsonl"
    write_completions(prompts, n)
    server, url = start_server(latency, slots=100_000)
    try:
        for model in ("llamacpp/bench", "vllm/bench"):
            wall = fanout(
                prompts, model, [url], concurrency, work / f"runs-{model[:4]}-{concurrency}", n
            )
            how = "batched (up to 32 a request)" if model.startswith("vllm") else "one per request"
            print(f"completions n={n} C={concurrency} latency={latency * 1000:.0f}ms {how}: "
                  f"wall {wall:.2f}s incl. start-up, {n / wall:.0f} prompts/s")  # fmt: skip
    finally:
        server.terminate()
        server.wait()


def bench_replicas(n: int, concurrency: int, latency: float, slots: int, work: Path) -> None:
    prompts = work / "chat.jsonl"
    write_prompts(prompts, n)
    servers = [start_server(latency, slots) for _ in range(2)]
    try:
        for count in (1, 2):
            urls = [url for _, url in servers[:count]]
            wall = fanout(prompts, "vllm/bench", urls, concurrency, work / f"runs-r{count}", n)
            print(f"chat n={n} C={concurrency} latency={latency * 1000:.0f}ms slots={slots} "
                  f"replicas={count}: wall {wall:.2f}s incl. start-up, {n / wall:.0f} req/s")  # fmt: skip
    finally:
        for server, _ in servers:
            server.terminate()
            server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--slots", type=int, default=8)
    args = parser.parse_args()
    print(f"# {platform.node()} {platform.machine()} Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for concurrency in (args.concurrency, 4 * args.concurrency):
            bench_batched(args.prompts, concurrency, args.latency, work)
        bench_replicas(args.prompts // 4, args.concurrency, args.latency, args.slots, work)


if __name__ == "__main__":
    main()
