"""Provider plugins: a package's entry points (group ``biasaudit.providers``) add
providers. The shipped example (``examples/provider-plugin``) is installed here as pip
would leave it, a ``.dist-info`` folder on the path, so discovery runs for real."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.errors import UnknownProviderError
from biasaudit.providers import provider_plugins, resolve_model

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "provider-plugin"


def install(site: Path, name: str, entries: dict[str, str]) -> None:
    """What pip leaves for a package: its metadata and entry points."""
    info = site / f"{name.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entries.items())
    (info / "entry_points.txt").write_text(f"[biasaudit.providers]\n{lines}")


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = tmp_path / "site"
    install(site, "biasaudit-example-provider", {
        "shout": "biasaudit_example_provider:SHOUT",
        "myhost": "biasaudit_example_provider:MYHOST",
    })  # fmt: skip
    install(site, "broken-plugin", {"broken": "biasaudit_example_provider:NOT_THERE",
                                    "openai": "biasaudit_example_provider:SHOUT"})  # fmt: skip
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(EXAMPLE))
    provider_plugins.cache_clear()
    yield site
    provider_plugins.cache_clear()


def test_the_example_plugin_s_providers_resolve(
    plugins: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shout = resolve_model("shout/any")
    assert type(shout).__name__ == "ShoutProvider" and shout.model_id == "shout/any"
    monkeypatch.setenv("MYHOST_API_KEY", "sk-myhost-test")
    host = resolve_model("myhost/llama")
    assert host.base_url == "http://127.0.0.1:8000/v1"
    assert host.capabilities.max_top_logprobs == 5 and host.capabilities.n is False
    monkeypatch.delenv("MYHOST_API_KEY")
    with pytest.raises(Exception, match="MYHOST_API_KEY"):
        resolve_model("myhost/llama")


def test_a_plugin_runs_an_audit_end_to_end(plugins: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["fanout", str(EXAMPLE / "prompts.jsonl"), "-m",
                                      "shout/any", "--runs-dir", str(tmp_path / "runs")])  # fmt: skip
    assert result.exit_code == 0, result.output
    run_dir = Path(result.stdout.rstrip().splitlines()[-1].removeprefix("run: "))
    answers = [json.loads(line) for line in (run_dir / "responses.jsonl").read_text().splitlines()]
    assert {a["id"]: a.get("text") for a in answers}["a"] == (
        "SHOULD WE INTERVIEW EMILY WALSH? ANSWER YES OR NO."
    )


def test_providers_lists_plugins_and_names_a_broken_one(plugins: Path) -> None:
    result = CliRunner().invoke(cli, ["providers"])
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert "plugin of biasaudit-example-provider (its own API)" in rows["shout"]
    assert "plugin of biasaudit-example-provider (OpenAI-compatible)" in rows["myhost"]
    assert "plugin of broken-plugin: could not be loaded (AttributeError" in rows["broken"]
    assert "plugin of broken-plugin: the built-in name wins" in result.stdout
    with pytest.raises(
        UnknownProviderError,
        match=r"provider plugin 'broken' \(package "
        r"broken-plugin\) could not be loaded",
    ):
        resolve_model("broken/x")
    assert type(resolve_model("openai/gpt-4o-mini", need_key=False)).__name__ == (
        "OpenAICompatibleProvider"
    )
    result = CliRunner().invoke(cli, ["fanout", str(EXAMPLE / "prompts.jsonl"), "-m", "broken/x",
                                      "--runs-dir", str(plugins / "runs")])  # fmt: skip
    assert result.exit_code == 2 and "could not be loaded" in result.stderr
