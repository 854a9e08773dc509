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
from biasaudit.textfiles import EXAMPLES_DIR

EXAMPLE = EXAMPLES_DIR / "provider-plugin"


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


HOSTILE_PLUGINS = """
import asyncio
import sys
import time

from biasaudit.providers import Capabilities, ModelResponse, Provider, ProviderPlugin


class OddProvider(Provider):
    def __init__(self, model, answer):
        self.name, self.model, self.base_url = "odd", model, None
        self.capabilities = Capabilities(logprobs=False, max_top_logprobs=0)
        self.answer = answer

    async def complete(self, request, *, timeout):
        if self.answer == "never":
            await asyncio.Event().wait()  # an answer that never comes
        if self.answer == "raise":
            raise ValueError("the plugin's own bug")
        if self.answer == "dict":
            return {"texts": ["hello"]}
        n = request.params.n or 1
        return ModelResponse(texts=("hello",) * n, finish_reasons=("stop",) * n)


WRONG_TYPES = ProviderPlugin(capabilities="everything", note="capabilities of the wrong type")
DICT = ProviderPlugin(build=lambda model, **_: OddProvider(model, "dict"))
RAISES = ProviderPlugin(build=lambda model, **_: OddProvider(model, "raise"))
NEVER = ProviderPlugin(build=lambda model, **_: OddProvider(model, "never"))
"""


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Plugins that break in every way a package can: wrong types, a wrong return
    type, an exception of its own, sys.exit and a hang at import."""
    import biasaudit.providers as providers

    site = tmp_path / "site"
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "hostile_plugins.py").write_text(HOSTILE_PLUGINS)
    (tmp_path / "code" / "exits_plugin.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "code" / "kills_plugin.py").write_text("import os\nos._exit(4)\n")
    (tmp_path / "code" / "hangs_plugin.py").write_text(
        "import time\nwhile True:\n    time.sleep(0.05)\n"
    )
    install(site, "hostile-plugins", {
        "wrongtypes": "hostile_plugins:WRONG_TYPES", "dicty": "hostile_plugins:DICT",
        "raisy": "hostile_plugins:RAISES", "never": "hostile_plugins:NEVER",
        "exits": "exits_plugin:X", "kills": "kills_plugin:X",
        "hangs": "hangs_plugin:X",
    })  # fmt: skip
    install(site, "biasaudit-example-provider", {"shout": "biasaudit_example_provider:SHOUT"})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.setattr(providers, "PLUGIN_LOAD_TIMEOUT_S", 1.0)
    providers.provider_plugins.cache_clear()
    yield tmp_path
    providers.provider_plugins.cache_clear()


def test_broken_plugins_are_named_bounded_and_do_not_stop_the_others(hostile: Path) -> None:
    result = CliRunner().invoke(cli, ["providers"])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert "its capabilities is a str" in rows["wrongtypes"]
    assert "called sys.exit(3) while importing" in rows["exits"]
    assert "called os._exit(4) while importing" in rows["kills"]
    assert "did not finish importing within 1 s (it hangs at import)" in rows["hangs"]
    assert "plugin of biasaudit-example-provider" in rows["shout"]  # the others still work
    result = CliRunner().invoke(cli, ["fanout", str(EXAMPLE / "prompts.jsonl"), "-m",
                                      "shout/x", "--runs-dir", str(hostile / "runs")])  # fmt: skip
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("provider", "message"), [
    ("never", "OddProvider (provider plugin of hostile-plugins) gave no answer within 1 s "
              "(--timeout)"),
    ("dicty", "OddProvider.complete() returned a dict, not a ModelResponse"),
    ("raisy", "OddProvider (provider plugin of hostile-plugins) failed: ValueError: the "
              "plugin's own bug"),
])  # fmt: skip
def test_a_plugin_that_answers_wrongly_fails_its_requests_named_never_a_traceback(
    hostile: Path, provider: str, message: str
) -> None:
    result = CliRunner().invoke(cli, ["fanout", str(EXAMPLE / "prompts.jsonl"), "-m",
                                      f"{provider}/x", "--runs-dir", str(hostile / "runs"),
                                      "--max-retries", "0", "--timeout", "1"])  # fmt: skip
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    assert result.exit_code == 1
    run_dir = Path(result.stdout.strip().splitlines()[-1].removeprefix("run: "))
    errors = [json.loads(line).get("error") for line in
              (run_dir / "responses.jsonl").read_text().splitlines()]  # fmt: skip
    assert errors and all(message in (error or "") for error in errors), errors
