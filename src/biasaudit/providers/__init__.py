"""Providers: one thin adapter per API, chosen by the ``provider/model`` name.

``openai/…`` and ``anthropic/…`` are the hosted APIs; known OpenAI-compatible
hosts (``together/``, ``groq/``, ``fireworks/``, ``openrouter/``) and
self-hosted servers (``vllm/``, ``llamacpp/``, ``ollama/``, ``tgi/``,
``sglang/``, ``lmstudio/``) go through the OpenAI-compatible adapter, as does
any other name given with ``--base-url``; ``sim/…`` is the offline simulated model;
``local/…`` is a GGUF file on a llama.cpp server biasaudit starts itself (:mod:`.local`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import urlparse

from biasaudit.errors import ConfigurationError, UnknownProviderError
from biasaudit.providers._base import Provider, classify_status, parse_retry_after
from biasaudit.providers._types import (
    Capabilities,
    EchoedToken,
    FirstTokenLogprobs,
    ModelChatTemplate,
    ModelRequest,
    ModelResponse,
    SamplingParams,
    Usage,
)
from biasaudit.secrets import read_api_key, read_headers, redact_url

__all__ = [
    "KNOWN_PROVIDERS",
    "PLUGIN_GROUP",
    "Capabilities",
    "EchoedToken",
    "FirstTokenLogprobs",
    "ModelChatTemplate",
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "ProviderInfo",
    "ProviderPlugin",
    "SamplingParams",
    "Usage",
    "classify_status",
    "openai_reasoning_model",
    "parse_retry_after",
    "provider_plugins",
    "provider_spec",
    "resolve_model",
]


@dataclass(frozen=True)
class ProviderInfo:
    """What biasaudit knows in advance about a provider name."""

    kind: str  # "openai" (OpenAI-compatible), "azure", "anthropic", "sim" or "local"
    base_url: str | None  # None: the user must give --base-url
    key_env: str | None  # None: keyless unless --api-key-env is given
    capabilities: Capabilities
    note: str = ""
    url_hint: str | None = None
    """What to say where ``base_url`` is None and none was given (the default: a
    self-hosted server's address)."""
    base_url_env: str | None = None
    """The SDK's variable for another address of the same API (``OPENAI_BASE_URL``),
    read where no ``--base-url`` is given."""
    plugin: str | None = None
    """The package whose entry point declared it (``biasaudit.providers``)."""


_UNKNOWN_LOGPROBS = Capabilities(logprobs=None, max_top_logprobs=None)
# Legacy-completions prompts sent in one request to servers that take a list (vLLM, SGLang).
PROMPT_BATCH = 32

KNOWN_PROVIDERS: dict[str, ProviderInfo] = {
    "openai": ProviderInfo(
        "openai", "https://api.openai.com/v1", "OPENAI_API_KEY",
        Capabilities(max_top_logprobs=20, batch=True, max_stop=4),
        "reasoning models (o-series, gpt-5): no logprobs, temperature 1 only",
        base_url_env="OPENAI_BASE_URL",
    ),
    "anthropic": ProviderInfo(
        "anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY",
        Capabilities(
            completions=False, logprobs=False, max_top_logprobs=0, n=False, seed=False,
            batch=True,
        ),
        "no logprobs, no n: sampled replicates",
        base_url_env="ANTHROPIC_BASE_URL",
    ),
    "azure": ProviderInfo(
        "azure", None, "AZURE_OPENAI_API_KEY",
        Capabilities(completions=False, max_top_logprobs=20, max_stop=4),
        "the model is your deployment; the key goes in the api-key header",
        url_hint="azure/DEPLOYMENT needs your resource's address: --base-url "
        "https://RESOURCE.openai.azure.com/openai/v1 (or a deployment's URL ending in "
        "?api-version=...)",
    ),
    "gemini": ProviderInfo(
        "openai", "https://generativelanguage.googleapis.com/v1beta/openai", "GEMINI_API_KEY",
        Capabilities(completions=False, logprobs=None, max_top_logprobs=None, max_stop=5),
        "Google's OpenAI-compatible endpoint; logprobs depend on the model",
    ),
    "mistral": ProviderInfo(
        "openai", "https://api.mistral.ai/v1", "MISTRAL_API_KEY",
        Capabilities(completions=False, logprobs=False, max_top_logprobs=0, seed=False),
        "no logprobs: sampled replicates",
    ),
    "deepseek": ProviderInfo(
        "openai", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY",
        Capabilities(completions=False, max_top_logprobs=20, n=False, seed=False),
        "deepseek-reasoner: no logprobs",
    ),
    "xai": ProviderInfo(
        "openai", "https://api.x.ai/v1", "XAI_API_KEY",
        Capabilities(completions=False, logprobs=None, max_top_logprobs=None),
    ),
    "bedrock": ProviderInfo(
        "openai", None, None, _UNKNOWN_LOGPROBS,
        "through an OpenAI-compatible gateway (LiteLLM's proxy, Bedrock Access Gateway)",
        url_hint="bedrock/ models are reached through an OpenAI-compatible gateway (Bedrock's "
        "own API is not OpenAI's): run one, e.g. LiteLLM's proxy, and give its address with "
        "--base-url and its key with --api-key-env",
    ),
    "together": ProviderInfo(
        "openai", "https://api.together.xyz/v1", "TOGETHER_API_KEY",
        Capabilities(max_top_logprobs=20),
    ),
    "groq": ProviderInfo(
        "openai", "https://api.groq.com/openai/v1", "GROQ_API_KEY",
        Capabilities(logprobs=False, max_top_logprobs=0, n=False, max_stop=4), "rejects logprobs",
    ),
    "fireworks": ProviderInfo(
        "openai", "https://api.fireworks.ai/inference/v1", "FIREWORKS_API_KEY", _UNKNOWN_LOGPROBS
    ),
    "openrouter": ProviderInfo(
        "openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", _UNKNOWN_LOGPROBS
    ),
    "vllm": ProviderInfo(
        "openai", None, None,
        Capabilities(max_top_logprobs=20, prompt_batch=PROMPT_BATCH, echo=True),
        "top_logprobs capped by the server's --max-logprobs (default 20)",
    ),
    "llamacpp": ProviderInfo(
        "openai", None, None, Capabilities(max_top_logprobs=None, echo=True),
        "logprobs need the server started with logits for all tokens",
    ),
    "ollama": ProviderInfo("openai", None, None, _UNKNOWN_LOGPROBS),
    "tgi": ProviderInfo("openai", None, None, _UNKNOWN_LOGPROBS),
    "sglang": ProviderInfo(
        "openai", None, None,
        Capabilities(max_top_logprobs=None, prompt_batch=PROMPT_BATCH, echo=True),
    ),
    "lmstudio": ProviderInfo("openai", None, None, _UNKNOWN_LOGPROBS),
    "sim": ProviderInfo("sim", None, None, Capabilities(max_top_logprobs=20), "offline, simulated"),
    # llama-cpp-python's server: chat and completions, both with first-token
    # logprobs (chat-style content[]), seed; no `n` (the engine splits n-choice requests).
    "local": ProviderInfo(
        "local", None, None,
        Capabilities(n=False, max_top_logprobs=None, echo=True),
        "local/smollm2 or local/PATH.gguf; needs the [local] extra; one process",
    ),
}  # fmt: skip


PLUGIN_GROUP = "biasaudit.providers"
"""The entry-point group a package registers providers in: each entry is named after the
provider (``echo = "my_package:PLUGIN"``) and points at a :class:`ProviderPlugin`."""


@dataclass(frozen=True)
class ProviderPlugin:
    """A provider another package adds (entry point group :data:`PLUGIN_GROUP`).

    Without ``build`` it is an OpenAI-compatible host: requests go to ``base_url``
    (or the ``--base-url`` given) with the key in ``key_env``, and ``capabilities``
    say what the endpoint can do. With ``build``, ``build(model, base_url=...,
    api_key=..., max_connections=..., headers=...)`` returns the
    :class:`Provider` itself (its own API, or none).
    """

    capabilities: Capabilities = _UNKNOWN_LOGPROBS
    base_url: str | None = None
    key_env: str | None = None
    note: str = ""
    build: Callable[..., Provider] | None = None


@functools.cache
def provider_plugins() -> dict[str, tuple[ProviderPlugin | BaseException, str]]:
    """Every provider plugin installed: its name -> (the plugin, or why it could not be
    loaded; the package that declared it). Built-in names are not overridden."""
    from importlib.metadata import entry_points

    found: dict[str, tuple[ProviderPlugin | BaseException, str]] = {}
    for entry in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        package = entry.dist.name if entry.dist is not None else entry.value
        try:
            plugin = _load_bounded(entry)
            _check_plugin(plugin, entry.value)
        except Exception as error:  # a broken plugin is named, never a traceback
            found[entry.name] = (error, package)
            continue
        found[entry.name] = (plugin, package)
    return found


# How long a plugin may take to import before it is named as hanging and left out.
PLUGIN_LOAD_TIMEOUT_S = 10.0


class _ExitedAtImport(BaseException):
    """``os._exit`` called by a plugin while it imports."""


def _load_bounded(entry: Any) -> Any:
    """``entry.load()`` in a thread, waited for at most :data:`PLUGIN_LOAD_TIMEOUT_S`: a
    plugin that hangs at import, or exits (``sys.exit``, or ``os._exit``, which would end
    the process with nothing said: it is held for the import's time), is an error, not
    the end of every command that looks for plugins."""
    import os
    import threading

    outcome: dict[str, Any] = {}

    def exits(status: int) -> NoReturn:
        raise _ExitedAtImport(status)

    def load() -> None:
        try:
            outcome["plugin"] = entry.load()
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=load, name=f"plugin-{entry.name}", daemon=True)
    really_exit, os._exit = os._exit, exits
    try:
        thread.start()
        thread.join(PLUGIN_LOAD_TIMEOUT_S)
    finally:
        os._exit = really_exit
    if thread.is_alive():
        raise TimeoutError(
            f"{entry.value} did not finish importing within {PLUGIN_LOAD_TIMEOUT_S:g} s "
            "(it hangs at import)"
        )
    error = outcome.get("error")
    if isinstance(error, SystemExit):
        raise RuntimeError(f"{entry.value} called sys.exit({error.code!r}) while importing")
    if isinstance(error, _ExitedAtImport):
        raise RuntimeError(
            f"{entry.value} called os._exit({error.args[0]!r}) while importing (it would have "
            "ended biasaudit with nothing said)"
        )
    if error is not None:
        raise error
    return outcome["plugin"]


def _check_plugin(plugin: Any, where: str) -> None:
    """Refuse a plugin whose declared fields are not of their types (checked once, at the
    boundary, so that nothing later meets a wrong type)."""
    if not isinstance(plugin, ProviderPlugin):
        raise TypeError(f"{where} is a {type(plugin).__name__}, not a ProviderPlugin")
    checks = {
        "capabilities": isinstance(plugin.capabilities, Capabilities),
        "base_url": plugin.base_url is None or isinstance(plugin.base_url, str),
        "key_env": plugin.key_env is None or isinstance(plugin.key_env, str),
        "note": isinstance(plugin.note, str),
        "build": plugin.build is None or callable(plugin.build),
    }
    for field, ok in checks.items():
        if not ok:
            value = getattr(plugin, field)
            raise TypeError(
                f"{where}: its {field} is a {type(value).__name__}, which a ProviderPlugin's "
                f"{field} cannot be"
            )


def _plugin_info(name: str) -> tuple[ProviderInfo, ProviderPlugin] | None:
    """The plugin called ``name`` as a :class:`ProviderInfo`, or None.

    Raises
    ------
    UnknownProviderError
        The plugin is installed but could not be loaded.
    """
    found = provider_plugins().get(name)
    if found is None or name in KNOWN_PROVIDERS:
        return None
    plugin, package = found
    if isinstance(plugin, BaseException):
        raise UnknownProviderError(
            f"provider plugin '{name}' (package {package}) could not be loaded: "
            f"{type(plugin).__name__}: {plugin}"
        )
    info = ProviderInfo("openai", plugin.base_url, plugin.key_env, plugin.capabilities,
                        plugin.note, plugin=package)  # fmt: skip
    return info, plugin


def resolve_model(
    model_id: str,
    *,
    base_url: str | Sequence[str] | None = None,
    api_key_env: str | None = None,
    max_connections: int = 64,
    need_key: bool = True,
    headers: Mapping[str, str] | None = None,
    local: Mapping[str, int | None] | None = None,
) -> Provider:
    """Build the provider for ``provider/model``.

    ``local`` sets up a ``local/`` model's servers (``n_ctx``, ``n_threads``,
    ``parallel``: :class:`~biasaudit.providers.local.LocalProvider`).

    Several base URLs are replicas of one self-hosted model (:mod:`.replicas`).
    ``headers`` go with every request; a value ``$NAME`` is read from the
    environment (:func:`~biasaudit.secrets.read_headers`).

    Reads the API key (and headers' variables) from the environment now, so a
    missing one fails before any request is sent. ``need_key=False`` (replays,
    which send nothing) skips them.

    Raises
    ------
    UnknownProviderError
        The name is malformed, or names no known provider and no ``base_url`` is given.
    MissingAPIKeyError
        The key's environment variable is unset.
    """
    if base_url is not None and not isinstance(base_url, str):
        from biasaudit.providers.replicas import build_replica_set

        return build_replica_set(
            base_url,
            lambda url: resolve_model(
                model_id, base_url=url, api_key_env=api_key_env,
                max_connections=max_connections, need_key=need_key, headers=headers,
            ),
        )  # fmt: skip
    extra = read_headers(headers, need_values=need_key)
    if model_id.startswith("local/"):
        return _build_local(model_id.partition("/")[2], base_url, KNOWN_PROVIDERS["local"]
                            .capabilities, max_connections, local or {}, bool(extra))  # fmt: skip
    provider = _build(model_id, base_url, api_key_env, max_connections, need_key, extra)
    # Without a spec the engine runs no worker processes: each would start a local
    # model's server of its own, and that server computes one request at a time.
    if provider.name != "local":
        provider.spec = provider_spec(model_id, base_url, api_key_env, headers)
    return provider


def provider_spec(
    model_id: str,
    base_url: str | None,
    api_key_env: str | None,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The :func:`resolve_model` arguments that rebuild a provider in a worker process.

    Sent to the worker through a pipe, never written: the worker reads keys and
    headers' variables from the environment it inherits.
    """
    spec: dict[str, Any] = {"model_id": model_id, "base_url": base_url, "api_key_env": api_key_env}
    if headers:
        spec["headers"] = dict(headers)
    return spec


# The first words of hosted models' names, and the provider that serves them.
_FAMILIES = (("gpt-", "openai"), ("chatgpt-", "openai"), ("o1", "openai"), ("o3", "openai"),
             ("o4", "openai"), ("claude-", "anthropic"), ("gemini-", "gemini"),
             ("mistral-", "mistral"), ("deepseek-", "deepseek"), ("grok-", "xai"))  # fmt: skip


def _provider_of(name: str) -> str | None:
    """The provider of a bare model name a user may give (``gpt-4o``: openai), if known."""
    lowered = name.lower()
    return next((provider for prefix, provider in _FAMILIES if lowered.startswith(prefix)), None)


def _build(
    model_id: str,
    base_url: str | None,
    api_key_env: str | None,
    max_connections: int,
    need_key: bool,
    headers: dict[str, str],
) -> Provider:
    provider_name, sep, model = model_id.partition("/")
    if not sep or not provider_name or not model:
        guess = _provider_of(model_id)
        raise UnknownProviderError(
            f"model '{model_id}' must be written provider/model, "
            + (f"here {guess}/{model_id}" if guess and not sep else
               "e.g. openai/gpt-4o-mini or sim/biased")
        )  # fmt: skip
    info = KNOWN_PROVIDERS.get(provider_name)
    plugin = None
    if info is None and (declared := _plugin_info(provider_name)) is not None:
        info, plugin = declared
    if info is None and base_url is None:
        known = ", ".join(sorted({*KNOWN_PROVIDERS, *provider_plugins()}))
        raise UnknownProviderError(
            f"unknown provider '{provider_name}' (known: {known}); for any other "
            "OpenAI-compatible server give --base-url"
        )
    if headers and (info is not None and info.kind in ("sim", "local")):
        raise ConfigurationError(f"{provider_name}/ models send no HTTP requests: no --header")
    if info is not None and info.kind == "sim":
        from biasaudit.providers.sim import SimProvider

        return SimProvider(model)
    if info is not None and info.kind == "local":
        return _build_local(model, base_url, info.capabilities, max_connections)
    info = info or ProviderInfo("openai", None, None, _UNKNOWN_LOGPROBS)
    if plugin is not None and plugin.build is not None:  # its own API, or none
        key_env = api_key_env or info.key_env
        api_key = read_api_key(key_env, provider=provider_name) if key_env and need_key else None
        return _built_by(plugin, info, model, base_url or info.base_url, api_key,
                         max_connections, headers)  # fmt: skip
    own_api = base_url is None  # the provider's own API, at its address or the SDK's variable's
    if base_url is None and info.base_url_env:
        base_url = os.environ.get(info.base_url_env) or None
    url = _check_url(base_url or info.base_url, provider_name, info.url_hint)
    key_env = api_key_env or info.key_env
    api_key = read_api_key(key_env, provider=provider_name) if key_env and need_key else None

    if info.kind == "anthropic":
        from biasaudit.providers.anthropic import AnthropicProvider

        return AnthropicProvider(
            model, api_key=api_key or "", base_url=url, max_connections=max_connections,
            headers=headers,
        )  # fmt: skip
    from biasaudit.providers.openai_compatible import OpenAICompatibleProvider

    if info.kind == "azure":
        url, headers = _azure(url, api_key, headers)
    capabilities = info.capabilities
    if provider_name == "openai" and own_api and not _openai_completions_model(model):
        # OpenAI's own API answers /v1/completions only for its few legacy models;
        # a chat model there gets a 404, so probes must not choose that path.
        capabilities = capabilities.model_copy(update={"completions": False})
    if provider_name == "openai" and own_api and openai_reasoning_model(model):
        capabilities = capabilities.model_copy(update=_OPENAI_REASONING)
    return OpenAICompatibleProvider(
        provider_name,
        model,
        base_url=url,
        api_key=api_key,
        capabilities=capabilities,
        max_connections=max_connections,
        uses_max_completion_tokens=provider_name == "openai" and own_api,
        headers=headers,
        bearer=info.kind != "azure",
    )


# The models OpenAI's API still serves through legacy /v1/completions.
_OPENAI_COMPLETIONS_MODELS = ("gpt-3.5-turbo-instruct", "davinci-002", "babbage-002")


def _openai_completions_model(model: str) -> bool:
    """Whether ``model`` (possibly a dated or fine-tuned variant) is one of them."""
    base = model.removeprefix("ft:")
    return base.startswith(_OPENAI_COMPLETIONS_MODELS)


# What OpenAI's reasoning models take: no logprobs (the API refuses them), one
# answer per call (every replicate its own call, like Anthropic's), and room for
# the hidden reasoning on top of each answer's max_tokens. The API counts that
# reasoning against max_completion_tokens: a label answer asked for in 1 token
# would otherwise come back empty, its budget spent on reasoning. It is billed
# only as used; a larger allowance costs nothing unless the model reasons longer.
REASONING_TOKENS = 4096
_OPENAI_REASONING: dict[str, Any] = {
    "logprobs": False,
    "max_top_logprobs": 0,
    "n": False,
    "reasoning_tokens": REASONING_TOKENS,
}


def openai_reasoning_model(model: str) -> bool:
    """Whether OpenAI serves ``model`` as a reasoning model (o-series, gpt-5 family, codex-mini).

    The gpt-5 chat models (``gpt-5-chat-latest``, ``gpt-5.1-chat-latest``) are not:
    they take temperature and logprobs like gpt-4o. Dated, fine-tuned and
    ``-mini``/``-pro`` variants are what their family is.
    """
    base = model.removeprefix("ft:").split(":", 1)[0].lower()
    if base.startswith("gpt-5"):
        return "-chat" not in base
    if base.startswith("codex-mini"):
        return True
    family = base.split("-", 1)[0]
    return len(family) > 1 and family[0] == "o" and family[1:].isdigit()


def _build_local(
    model: str,
    base_url: str | None,
    capabilities: Capabilities,
    max_connections: int,
    settings: Mapping[str, int | None] = {},
    headers: bool = False,
) -> Provider:
    if headers:
        raise ConfigurationError("local/ models send no HTTP requests: no --header")
    if not model:
        raise UnknownProviderError(
            "model 'local/' must be written local/smollm2 or local/PATH.gguf"
        )
    if base_url is not None:
        raise ConfigurationError(
            "local/ models start their own server, so --base-url has no place here; "
            "for a llama.cpp server you run yourself, use llamacpp/MODEL --base-url URL"
        )
    from biasaudit.providers.local import LocalProvider

    return LocalProvider(
        model, capabilities=capabilities, max_connections=max_connections,
        n_ctx=settings.get("n_ctx"), n_threads=settings.get("n_threads"),
        parallel=settings.get("parallel") or 1,
    )  # fmt: skip


def _built_by(
    plugin: ProviderPlugin,
    info: ProviderInfo,
    model: str,
    url: str | None,
    api_key: str | None,
    max_connections: int,
    headers: dict[str, str],
) -> Provider:
    assert plugin.build is not None
    try:
        provider = plugin.build(model, base_url=url, api_key=api_key,
                                max_connections=max_connections, headers=headers)  # fmt: skip
    except Exception as error:
        raise UnknownProviderError(
            f"provider plugin (package {info.plugin}) failed to build {model!r}: "
            f"{type(error).__name__}: {error}"
        ) from None
    if not isinstance(provider, Provider):
        raise UnknownProviderError(
            f"provider plugin (package {info.plugin}) built a {type(provider).__name__}, "
            "not a biasaudit Provider"
        )
    provider.plugin = info.plugin or "a provider plugin"
    return provider


AZURE_API_VERSION_ENV = "OPENAI_API_VERSION"
"""The openai SDK's variable for Azure's ``api-version``, which a deployment's URL needs."""


def _azure(url: str, api_key: str | None, headers: dict[str, str]) -> tuple[str, dict[str, str]]:
    """Azure OpenAI: the key in the ``api-key`` header (and no bearer token), and a
    deployment's URL (``.../openai/deployments/NAME``) with its ``api-version``, from the
    URL or ``OPENAI_API_VERSION``. The v1 API (``.../openai/v1``) takes none."""
    parsed = urlparse(url)
    if "@" in parsed.netloc:
        # Azure takes its key in the api-key header only: basic auth in the URL would be
        # dropped without a word, and the request sent without the credentials given.
        raise ConfigurationError(
            f"--base-url '{redact_url(url)}' carries credentials (user:password@), which "
            "Azure OpenAI does not take: give the key in AZURE_OPENAI_API_KEY (sent as the "
            "api-key header) and drop them from the URL, or, for a gateway in front of Azure "
            "that wants basic auth, use openai/MODEL with that --base-url"
        )
    if "/deployments/" in parsed.path and "api-version=" not in parsed.query:
        version = os.environ.get(AZURE_API_VERSION_ENV)
        if not version:
            raise ConfigurationError(
                f"an Azure deployment's URL needs its api-version: end --base-url with "
                f"?api-version=YYYY-MM-DD, set {AZURE_API_VERSION_ENV}, or use the v1 API "
                "(https://RESOURCE.openai.azure.com/openai/v1), which takes none"
            )
        url += ("&" if parsed.query else "?") + f"api-version={version}"
    found = dict(headers)
    if api_key:
        found["api-key"] = api_key
    return url, found


def _check_url(url: str | None, provider_name: str, hint: str | None = None) -> str:
    if url is None:
        raise ConfigurationError(
            hint
            or f"{provider_name}/ is a self-hosted server: give its address with "
            "--base-url, e.g. --base-url http://127.0.0.1:8000/v1"
        )
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigurationError(f"--base-url '{redact_url(url)}' is not an http(s) URL")
    return url
