"""Hosts people have: Azure OpenAI (its api-key header and api-version), the SDKs' own
OPENAI_BASE_URL / ANTHROPIC_BASE_URL, and the OpenAI-compatible hosts biasaudit knows
by name, each over the wire to a loopback server or by what resolving it gives."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from biasaudit.errors import ConfigurationError, MissingAPIKeyError
from biasaudit.kinds.registry import run_spec
from biasaudit.providers import KNOWN_PROVIDERS, resolve_model
from biasaudit.spec import parse_spec
from tests.servers import AnthropicServer, OpenAIServer

KEY = "azure-key-0123456789abcdef"


class AzureServer(OpenAIServer):
    """Azure's rule: the key in ``api-key``; a bearer token is not a key."""

    def authorized(self, headers: Mapping[str, str]) -> bool:
        return headers.get("api-key") == KEY and "Authorization" not in headers


def audit(model: str, runs: Path, **fields: object) -> object:
    spec = parse_spec({"task": "ruted", "contexts": "standard", "model": model,
                       "runs_dir": str(runs), **fields})  # fmt: skip
    return run_spec(spec, command=["test"])


def test_azure_sends_the_key_as_api_key_and_the_deployment_as_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    with AzureServer(require_api_key=KEY) as server:
        finished = audit("azure/my-gpt4o", tmp_path, base_url=server.base_url)
        requests = server.requests
    assert finished.exit_code == 0  # type: ignore[attr-defined]
    assert requests and all(r.headers.get("api-key") == KEY for r in requests)
    assert not any("authorization" in r.headers for r in requests)
    assert {r.body["model"] for r in requests if r.body} == {"my-gpt4o"}
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".csv", ".md", ".html"):
            assert KEY not in path.read_text(errors="replace"), path


def test_azure_needs_an_address_and_a_deployment_url_its_api_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_API_VERSION", raising=False)
    with pytest.raises(ConfigurationError, match=r"RESOURCE\.openai\.azure\.com/openai/v1"):
        resolve_model("azure/dep")
    deployment = "https://res.openai.azure.com/openai/deployments/dep"
    with pytest.raises(ConfigurationError, match="needs its api-version"):
        resolve_model("azure/dep", base_url=deployment)
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    provider = resolve_model("azure/dep", base_url=deployment)
    assert provider._endpoint.query == {"api-version": "2024-10-21"}  # type: ignore[attr-defined]
    given = resolve_model("azure/dep", base_url=deployment + "?api-version=2025-01-01")
    assert given._endpoint.query == {"api-version": "2025-01-01"}  # type: ignore[attr-defined]


def test_credentials_in_an_azure_url_are_refused_not_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Azure takes no basic auth: a URL's user:password@ would go unsent without a word."""
    from click.testing import CliRunner

    from biasaudit.cli import cli

    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    url = "https://alice:s3cret-pass@res.openai.azure.com/openai/v1"
    with pytest.raises(ConfigurationError, match=r"carries credentials \(user:password@\)"):
        resolve_model("azure/dep", base_url=url)
    result = CliRunner().invoke(
        cli, ["run", "ruted", "--contexts", "standard", "--model", "azure/dep", "--base-url",
              url, "--dry-run"],
    )  # fmt: skip
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "s3cret-pass" not in result.output and "alice" not in result.output
    assert "AZURE_OPENAI_API_KEY" in result.output


def test_the_sdks_base_url_variables_are_honoured_without_base_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with OpenAIServer() as openai_server, AnthropicServer() as anthropic_server:
        monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_server.base_url)
        assert audit("openai/gpt-4o-mini", tmp_path / "a").exit_code == 0  # type: ignore[attr-defined]
        assert (
            audit("anthropic/claude-3-5-haiku-latest", tmp_path / "b", replicates=2).exit_code == 0
        )  # type: ignore[attr-defined]
        sent = openai_server.requests
        assert sent and anthropic_server.requests
    # Still OpenAI's own API, at another address: its parameter names are kept.
    assert all("max_completion_tokens" in r.body for r in sent if r.body)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    explicit = resolve_model("openai/gpt-4o-mini", base_url="http://127.0.0.1:8/v1")
    assert explicit.base_url == "http://127.0.0.1:8/v1"


@pytest.mark.parametrize(
    ("name", "url", "key"),
    [("gemini", "https://generativelanguage.googleapis.com/v1beta/openai", "GEMINI_API_KEY"),
     ("mistral", "https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
     ("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
     ("xai", "https://api.x.ai/v1", "XAI_API_KEY")],
)  # fmt: skip
def test_known_hosts_resolve_by_name_and_name_their_key(
    name: str, url: str, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(key, raising=False)
    with pytest.raises(MissingAPIKeyError, match=key):
        resolve_model(f"{name}/some-model")
    monkeypatch.setenv(key, "k-test")
    provider = resolve_model(f"{name}/some-model")
    assert provider.base_url == url and provider.capabilities == KNOWN_PROVIDERS[name].capabilities
    assert provider.capabilities.completions is False


def test_mistral_answers_by_sampling_and_bedrock_names_its_gateway(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MISTRAL_API_KEY", "k-test")
    assert resolve_model("mistral/mistral-small").capabilities.logprobs is False
    with pytest.raises(ConfigurationError, match="OpenAI-compatible gateway"):
        resolve_model("bedrock/anthropic.claude-3-haiku")
    gateway = resolve_model("bedrock/anthropic.claude-3-haiku", base_url="http://127.0.0.1:4000/v1")
    assert gateway.base_url == "http://127.0.0.1:4000/v1"


@pytest.mark.parametrize(
    ("given", "said"),
    [("gpt-4o", "here openai/gpt-4o"), ("claude-sonnet-4-5", "here anthropic/claude-sonnet-4-5"),
     ("llama3", "e.g. openai/gpt-4o-mini or sim/biased"),
     ("openai/", "e.g. openai/gpt-4o-mini or sim/biased")],
)  # fmt: skip
def test_a_model_without_its_provider_is_refused_with_the_spelling_to_use(
    given: str, said: str
) -> None:
    with pytest.raises(ConfigurationError, match=f"model '{given}' must be written "
                       f"provider/model, {said}"):  # fmt: skip
        resolve_model(given)
