"""What scoring a label whole costs: one echoed continuation request against one
first-token logprob request, on the local model (llama.cpp), for the pointwise
prompts of resume screening.

    python3 bench/bench_continuation.py [--model local/smollm2] [--candidates 4]

For each candidate it sends the chat request the logprob path sends and the
echoed completions requests the continuation path sends (one per label), each
uncached, one at a time, and prints the median seconds per request of each,
their ratio, and the prompt's length. Needs the 'local' extra and the model.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from biasaudit.kinds.allocation.plan import plan_scoring
from biasaudit.kinds.candidates.tasks import build_task
from biasaudit.providers import resolve_model
from biasaudit.spec import parse_spec


async def main(model: str, candidates: int) -> None:
    provider = resolve_model(model)
    base = {"task": "resume-screening", "model": model, "names_per_group": 1,
            "jobs": "software-engineer"}  # fmt: skip
    try:
        timings: dict[str, list[float]] = {}
        lengths: list[int] = []
        labels = 2
        warmed = False
        for scoring in ("logprobs", "continuation"):
            spec = parse_spec({**base, "scoring": scoring})
            task = build_task(spec)  # type: ignore[arg-type]
            task.prompt("pointwise")
            requests = plan_scoring(task, spec, provider).requests  # type: ignore[arg-type]
            labels = len(task.labels)
            per_candidate = 1 if scoring == "logprobs" else labels
            if not warmed:  # the server starts with the first request: not timed
                await provider.complete(requests[-1], timeout=600)
                warmed = True
            for request in requests[: candidates * per_candidate]:
                started = time.perf_counter()
                await provider.complete(request, timeout=600)
                timings.setdefault(scoring, []).append(time.perf_counter() - started)
                if request.prompt is not None:
                    lengths.append(len(request.prompt))
        first, whole = (statistics.median(timings[k]) for k in ("logprobs", "continuation"))
        shown = statistics.median(lengths)
        print(f"model {model}; {candidates} candidates; echoed prompts ~{shown:.0f} characters")
        print(f"first-token logprobs (chat):   {first:.3f} s per request (1 per candidate)")
        print(f"continuation (echo, per label): {whole:.3f} s per request ({labels} per candidate)")
        print(
            f"ratio per request: {whole / first:.1f}x; per candidate: {labels * whole / first:.1f}x"
        )
    finally:
        await provider.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local/smollm2")
    parser.add_argument("--candidates", type=int, default=4)
    options = parser.parse_args()
    asyncio.run(main(options.model, options.candidates))
