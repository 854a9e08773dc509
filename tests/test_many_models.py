"""Several models in one command (``run ... -m A -m B``, a spec's ``models:``): one run
directory each, one cache, the models' requests in flight together, then the study."""

from __future__ import annotations

import _thread
import asyncio
import itertools
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.engine.loop import run_async, run_in_threads
from biasaudit.errors import UsageError
from biasaudit.kinds.registry import run_spec
from biasaudit.spec import parse_spec
from tests.servers import OpenAIServer
from tests.servers.responders import default_responder

FAST = ["--names-per-group", "3", "--pools", "5", "--jobs", "software-engineer"]


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def run_lines(stdout: str) -> list[Path]:
    return [Path(line.removeprefix("run: ")) for line in stdout.splitlines()
            if line.startswith("run: ")]  # fmt: skip


def test_two_models_run_each_then_the_study_and_share_one_cache(tmp_path: Path) -> None:
    args = ["run", "resume-screening", "-m", "sim/biased", "-m", "sim/fair", *FAST,
            "--runs-dir", str(tmp_path)]  # fmt: skip
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    runs = run_lines(result.stdout)
    assert [r.name.split("-allocation-")[1][:-5] for r in runs] == ["sim-biased", "sim-fair"]
    # the runs' lines come last, one a model, as a single run ends with its own
    assert result.stdout.splitlines()[-2:] == [f"run: {run}" for run in runs]
    assert "resume-screening audit of sim/biased" in result.stdout
    assert "resume-screening audit of sim/fair" in result.stdout
    assert "study of 2 runs: sim/biased (SIMULATED), sim/fair (SIMULATED)" in result.stdout
    assert len(list(tmp_path.glob("*-study-allocation-*"))) == 1
    assert [p.name for p in tmp_path.glob("*.sqlite")] == ["cache.sqlite"]
    for model in ("sim/biased", "sim/fair"):
        assert f"{model}: resume-screening: 144/144 done (0 cached" in result.stderr
    again = invoke(*args, "--no-report")
    assert again.exit_code == 0, again.output
    for model in ("sim/biased", "sim/fair"):
        assert f"{model}: resume-screening: 144/144 done (144 cached" in again.stderr


def test_a_spec_s_models_and_the_command_line_s_model_in_their_place(tmp_path: Path) -> None:
    spec = tmp_path / "audit.yaml"
    spec.write_text(
        "task: ruted\nmodels: [sim/biased, sim/fair]\ncontexts: standard\n"
        f"runs_dir: {tmp_path / 'runs'}\n"
    )
    both = invoke("run", str(spec), "--no-report")
    assert both.exit_code == 0, both.output
    assert len(run_lines(both.stdout)) == 2 and "RUTEd study" in both.stdout
    one = invoke("run", str(spec), "-m", "sim/fair", "--no-report")
    assert one.exit_code == 0, one.output
    assert len(run_lines(one.stdout)) == 1 and "-ruted-sim-fair-" in one.stdout


def test_an_unknown_model_among_them_stops_all_before_anything_is_written(tmp_path: Path) -> None:
    result = invoke("run", "resume-screening", "-m", "sim/biased", "-m", "nope/model", *FAST,
                    "--runs-dir", str(tmp_path / "runs"))  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.startswith("error: nope/model: unknown provider 'nope'")
    assert not (tmp_path / "runs").exists()


def test_a_dry_run_of_several_models_prices_each_and_their_total(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = invoke("run", "resume-screening", "-m", "sim/fair", "-m", "openai/gpt-4o-mini",
                    *FAST, "--runs-dir", str(tmp_path), "--dry-run")  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "sim/fair:" and "openai/gpt-4o-mini:" in lines
    assert lines[-1].startswith("all 2 models: $")
    assert not list(tmp_path.glob("*-allocation-*"))


def test_the_models_requests_are_in_flight_together(tmp_path: Path) -> None:
    """A slow server and a fast one, each a model of the spec with its own base_url
    (the slow one first): the fast model's requests arrive before the slow model's
    last, where one run after the other would have sent all of the slow one's first."""
    order = itertools.count()
    arrivals: dict[str, list[int]] = {"slow": [], "fast": []}
    lock = threading.Lock()

    def recording(name: str) -> Any:
        def responder(body: dict[str, Any], path: str) -> Any:
            with lock:
                arrivals[name].append(next(order))
            return default_responder(body, path)

        return responder

    with (
        OpenAIServer(responder=recording("slow"), latency=0.1) as slow,
        OpenAIServer(responder=recording("fast")) as fast,
    ):
        spec = parse_spec(
            {"task": "resume-screening", "jobs": "software-engineer", "names_per_group": 3,
             "pools": 5, "runs_dir": str(tmp_path), "concurrency": 16,
             "models": [{"model": "vllm/slow", "base_url": slow.base_url},
                        {"model": "vllm/fast", "base_url": fast.base_url}]}
        )  # fmt: skip
        assert spec.model_names == ("vllm/slow", "vllm/fast")
        results = run_in_threads(
            [lambda one=one: run_spec(one, command=["test"]) for one in map(spec.for_model,
                                                                            spec.models)]
        )  # fmt: skip
    assert all(not isinstance(r, BaseException) and r.exit_code == 0 for r in results)
    assert len(arrivals["slow"]) == len(arrivals["fast"]) == 144
    assert min(arrivals["fast"]) < max(arrivals["slow"])


def test_ctrl_c_cancels_every_run_in_flight() -> None:
    cancelled: list[str] = []
    started = threading.Barrier(3)

    def job(name: str) -> Any:
        async def wait() -> None:
            started.wait()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.append(name)
                raise

        return lambda: run_async(wait())

    def interrupt() -> None:
        started.wait()
        _thread.interrupt_main()

    # Ctrl-C as a terminal delivers it, whatever this process inherited (a shell's
    # background job starts with SIGINT ignored, and then interrupt_main does nothing).
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt, daemon=True).start()
        with pytest.raises(KeyboardInterrupt) as raised:
            run_in_threads([job("a"), job("b")])
    finally:
        signal.signal(signal.SIGINT, inherited)
    results = getattr(raised.value, "results", None)
    assert sorted(cancelled) == ["a", "b"], f"how each run ended: {results!r}"


def test_ctrl_c_inside_a_submit_still_waits_for_every_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C landing while the runs are being started (here: as the second is
    submitted) is held until every run is, so that each is cancelled and waited for: a
    run that had begun is cancelled where it waits, one whose thread starts after the
    Ctrl-C (a loaded machine) is cancelled before its first step; none runs on."""
    import concurrent.futures

    cancelled: list[str] = []
    began: list[str] = []
    submit = concurrent.futures.ThreadPoolExecutor.submit

    def submit_then_interrupt(pool: Any, job: Any, *args: Any, **kwargs: Any) -> Any:
        future = submit(pool, job, *args, **kwargs)
        if getattr(job, "name", "") == "b":
            signal.raise_signal(signal.SIGINT)  # handled at the next bytecode, in here
        return future

    def job(name: str) -> Any:
        async def wait() -> None:
            began.append(name)
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.append(name)
                raise

        def start() -> Any:
            return run_async(wait())

        start.name = name  # type: ignore[attr-defined]
        return start

    monkeypatch.setattr(concurrent.futures.ThreadPoolExecutor, "submit", submit_then_interrupt)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt) as raised:
            run_in_threads([job("a"), job("b")])
    finally:
        signal.signal(signal.SIGINT, inherited)
    results = raised.value.results  # type: ignore[attr-defined]
    assert len(results) == 2 and all(isinstance(r, asyncio.CancelledError) for r in results)
    assert sorted(cancelled) == sorted(began)


def test_a_fanout_and_run_spec_take_one_model(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"id": "a", "prompt": "Yes or No?"}\n')
    result = invoke("fanout", str(prompts), "-m", "sim/fair", "-m", "sim/biased",
                    "--runs-dir", str(tmp_path / "runs"))  # fmt: skip
    assert result.exit_code == 2 and "a fan-out sends to one model" in result.stderr
    spec = parse_spec({"task": "ruted", "models": ["sim/fair", "sim/biased"]})
    with pytest.raises(UsageError, match="the spec names 2 models"):
        run_spec(spec)
    with pytest.raises(UsageError, match="give model or models, not both"):
        parse_spec({"task": "ruted", "model": "sim/fair", "models": ["sim/biased", "x/y"]})
    with pytest.raises(UsageError, match="'sim/fair' is given twice"):
        parse_spec({"task": "ruted", "models": ["sim/fair", "sim/fair"]})


def test_max_cost_holds_for_all_the_models_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    result = invoke("run", "resume-screening", "-m", "sim/fair", "-m", "openai/gpt-4o-mini",
                    *FAST, "--runs-dir", str(tmp_path / "runs"), "--max-cost", "0.000001")  # fmt: skip
    assert result.exit_code == 2
    assert "--max-cost $1e-06: not started, the estimate is $" in result.stderr
    assert "for the 2 models; nothing was sent" in result.stderr
    assert not (tmp_path / "runs").exists()
