"""Fan-out throughput and cache replay, measured as a user runs them.

1. ``biasaudit fanout`` of N chat prompts (max_tokens 1, logprobs on) at
   concurrency C against a loopback OpenAI-compatible server (a separate
   process) that waits L seconds per request: wall time including start-up,
   requests/s, peak RSS of the biasaudit process, and the ratio to the
   theoretical floor N x L / C.
2. Replay of a run of R responses from the cache (``--replay``), wall time.
3. With ``--reference``: the same requests from two reference programs
   (``reference_clients.py``: a bare aiohttp client, and the openai SDK used
   as its documentation shows), start-up included, each run right after a
   biasaudit run on the same server, so the machine's drift moves them alike.
4. With ``--cpu``: the client's CPU time per request (user + system, from
   ``getrusage``), fanning out in this process; other load on the machine,
   which moves wall times a lot, hardly moves this figure.
5. With ``--leases``: what claiming requests in the shared cache costs (the
   cross-process check: one transaction claiming every request before it is
   sent, leases renewed and released), as CPU per request of in-process
   fan-outs with the claim and without it (the engine's claim switched off in
   this process only), run in turn, A B A B, so drift moves both alike.

Run from the repository root:  python bench/bench_fanout.py [--prompts 2000] [--replay-size 100000]
[--repeat 5] [--cpu] [--reference] [--leases]. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_prompts(path: Path, n: int, *, logprobs: bool = True) -> None:
    with open(path, "w") as handle:
        for i in range(n):
            params: dict[str, object] = {"max_tokens": 1}
            if logprobs:
                params |= {"logprobs": True, "top_logprobs": 5}
            line = {
                "id": f"p{i}",
                "messages": [
                    {
                        "role": "user",
                        "content": f"Candidate {i}: should we interview? Answer Yes or No.",
                    }
                ],
                "params": params,
            }
            handle.write(json.dumps(line) + "\n")


def start_server(latency: float) -> tuple[subprocess.Popen[str], int]:
    """The loopback OpenAI-compatible server (a separate process) and its port."""
    server, url = spawn_server(
        ["-m", "tests.servers.openai_server", "--port", "0", "--latency", str(latency)]
    )
    return server, int(url.rsplit(":", 1)[1].split("/")[0])


def spawn_server(argv: list[str]) -> tuple[subprocess.Popen[str], str]:
    """``python ARGV`` from the repository root, once it prints ``PORT n``; and its /v1 URL."""
    server = subprocess.Popen([sys.executable, *argv], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.startswith("PORT "):
        server.kill()
        raise RuntimeError(f"server did not start: {line!r}")
    return server, f"http://127.0.0.1:{int(line.split()[1])}/v1"


def machine_line() -> str:
    """The header line every bench prints: date, host, cores, Python, architecture."""
    return (
        f"# {time.strftime('%Y-%m-%d')} on {platform.node()}: {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {platform.machine()}"
    )


def run_biasaudit(args: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS in MB of the child, and its stdout."""
    with tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "biasaudit", *args],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            cwd=ROOT,
        )
        assert child.stdout is not None
        out = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)  # this child's own peak RSS
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"biasaudit failed ({child.returncode}): {err.read()[-2000:]}")
    return wall, usage.ru_maxrss // 1024, out


REFERENCES = ("aiohttp", "openai-sdk")


def bench_fanout(
    n: int, concurrency: int, latency: float, workers: int, work: Path, *, reference: bool = False
) -> None:
    prompts = work / "prompts.jsonl"
    write_prompts(prompts, n)
    server, port = start_server(latency)
    base_url = f"http://127.0.0.1:{port}/v1"
    references: dict[str, float] = {}
    try:
        args = [
            "fanout", str(prompts), "--model", "vllm/bench", "--base-url", base_url,
            "--concurrency", str(concurrency), "--runs-dir", str(work / f"runs-{concurrency}-{workers}-{time.monotonic_ns()}"),
            "--workers", str(workers),
        ]  # fmt: skip
        wall, peak_mb, out = run_biasaudit(args)
        if reference:
            for kind in REFERENCES:
                references[kind] = run_reference(kind, prompts, base_url, concurrency, n)
    finally:
        server.terminate()
        server.wait()
    for kind, seconds in references.items():
        print(
            f"ref     n={n} concurrency={concurrency} {kind} program: wall {seconds:.2f}s "
            f"incl. start-up, {n / seconds:.0f} req/s"
        )
    if f"{n} answered, 0 failed" not in out:
        raise RuntimeError(f"not every prompt was answered: {out}")
    floor = n * latency / concurrency
    print(
        f"fanout  n={n} concurrency={concurrency} workers={workers} latency={latency * 1000:.0f}ms: "
        f"wall {wall:.2f}s incl. start-up, {n / wall:.0f} req/s, peak RSS {peak_mb} MB, "
        f"theoretical floor {floor:.2f}s (ratio {wall / floor:.2f})"
    )


def run_reference(kind: str, prompts: Path, base_url: str, concurrency: int, n: int) -> float:
    """Wall seconds of ``reference_clients.py KIND`` sending the same prompts."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "reference_clients.py"), kind, str(prompts),
         base_url, str(concurrency)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    wall = time.perf_counter() - started
    if done.stdout.split() != [str(n)]:
        raise RuntimeError(f"the {kind} reference did not parse {n} answers: {done.stdout!r}")
    return wall


def bench_cpu(n: int, concurrency: int, latency: float, repeat: int, work: Path) -> None:
    """Client CPU per request of an in-process fan-out (after one warm-up run)."""
    import resource

    from biasaudit.engine.fanout import FanoutOptions, read_prompts, run_fanout
    from biasaudit.engine.loop import run_async

    prompts = work / "cpu-prompts.jsonl"
    write_prompts(prompts, n)
    server, port = start_server(latency)
    try:
        for run in range(repeat + 1):
            options = FanoutOptions(
                model="vllm/bench",
                base_url=f"http://127.0.0.1:{port}/v1",
                concurrency=concurrency,
                runs_dir=work / f"runs-cpu-{run}",
            )
            before = resource.getrusage(resource.RUSAGE_SELF)
            started = time.perf_counter()
            with open(os.devnull, "w") as quiet:
                run_async(run_fanout(read_prompts(prompts), options, stderr=quiet))
            wall = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            label = "warm-up (imports the SDK)" if run == 0 else f"run {run}"
            print(
                f"cpu     n={n} concurrency={concurrency} in-process, {label}: "
                f"{cpu * 1e6 / n:.0f} us CPU per request (whole run: reading prompts, "
                f"cache, run directory), wall {wall:.2f}s"
            )
    finally:
        server.terminate()
        server.wait()


def bench_leases(n: int, concurrency: int, latency: float, pairs: int, work: Path) -> None:
    """CPU per request with and without the claim in the shared cache, in turn."""
    import resource
    import statistics

    from biasaudit.engine.core import Engine
    from biasaudit.engine.fanout import FanoutOptions, read_prompts, run_fanout
    from biasaudit.engine.loop import run_async

    prompts = work / "lease-prompts.jsonl"
    write_prompts(prompts, n)
    server, port = start_server(latency)
    leasing = Engine._leasing
    figures: dict[str, list[float]] = {"with the claim": [], "without": []}
    try:
        for run in range(2 * pairs + 2):  # the first pair warms up (imports the SDK)
            label = "with the claim" if run % 2 == 0 else "without"
            Engine._leasing = leasing if run % 2 == 0 else property(lambda self: False)  # type: ignore[method-assign]
            options = FanoutOptions(
                model="vllm/bench", base_url=f"http://127.0.0.1:{port}/v1",
                concurrency=concurrency, runs_dir=work / f"runs-lease-{run}",
            )  # fmt: skip
            before = resource.getrusage(resource.RUSAGE_SELF)
            with open(os.devnull, "w") as quiet:
                run_async(run_fanout(read_prompts(prompts), options, stderr=quiet))
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            if run >= 2:
                figures[label].append(cpu * 1e6 / n)
    finally:
        Engine._leasing = leasing  # type: ignore[method-assign]
        server.terminate()
        server.wait()
    on, off = (statistics.median(figures[k]) for k in ("with the claim", "without"))
    ratios = sorted(
        a / b for a, b in zip(figures["with the claim"], figures["without"], strict=True)
    )
    print(
        f"leases  n={n} concurrency={concurrency} in-process, {pairs} pairs: CPU per request "
        f"{on:.0f} us with the claim, {off:.0f} us without (median); ratio per pair "
        f"{ratios[0]:.3f}-{ratios[-1]:.3f}, median {statistics.median(ratios):.3f}"
    )


def bench_replay(size: int, work: Path) -> None:
    prompts = work / "replay.jsonl"
    write_prompts(prompts, size)
    runs = work / "runs-replay"
    fill, _, _ = run_biasaudit(
        [
            "fanout",
            str(prompts),
            "--model",
            "sim/biased",
            "--runs-dir",
            str(runs),
            "--concurrency",
            "64",
        ]
    )
    wall, peak_mb, out = run_biasaudit(
        ["fanout", str(prompts), "--model", "sim/biased", "--runs-dir", str(runs), "--replay"]
    )
    if f"{size} from cache" not in out:
        raise RuntimeError(f"replay was not served from the cache: {out}")
    print(
        f"replay  n={size}: wall {wall:.2f}s incl. start-up ({size / wall:.0f} responses/s), "
        f"peak RSS {peak_mb} MB; filling the cache from sim/ took {fill:.1f}s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[128])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument(
        "--workers", type=int, nargs="*", default=[1, 2], help="none: no fan-out runs"
    )
    parser.add_argument("--replay-size", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=1, help="times to run each fan-out")
    parser.add_argument("--cpu", action="store_true", help="also measure CPU per request")
    parser.add_argument(
        "--reference", action="store_true", help="also time two reference clients (workers=1 runs)"
    )
    parser.add_argument(
        "--leases", action="store_true", help="also measure what claiming in the cache costs"
    )
    args = parser.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for concurrency in args.concurrency:
            for workers in args.workers:
                for _ in range(args.repeat):
                    bench_fanout(
                        args.prompts, concurrency, args.latency, workers, work,
                        reference=args.reference and workers == 1,
                    )  # fmt: skip
            if args.cpu:
                bench_cpu(args.prompts, concurrency, args.latency, max(args.repeat, 3), work)
            if args.leases:
                bench_leases(args.prompts, concurrency, args.latency, max(args.repeat, 5), work)
        if args.replay_size:
            bench_replay(args.replay_size, work)


if __name__ == "__main__":
    main()
