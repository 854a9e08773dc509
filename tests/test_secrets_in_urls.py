"""Credentials in a base URL, and headers that carry keys: used for every request, written nowhere."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.providers import ModelRequest, resolve_model
from biasaudit.secrets import EndpointURL, public_headers, redact_command, redact_url
from biasaudit.store.runs import read_manifest
from tests.servers import AnthropicServer, OpenAIServer

from .test_kill_resume import ROOT

PASSWORD = "pw-canary-7d1e4b"
QUERY_KEY = "qk-canary-93a0c2"
HEADER_KEY = "hk-canary-50f6e1"
CANARIES = (PASSWORD, QUERY_KEY, HEADER_KEY)


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.jsonl"
    lines = [{"id": f"q{i}", "messages": [{"role": "user", "content": f"Q{i}"}]} for i in range(3)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture(params=["openai", "anthropic"])
def server(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[OpenAIServer | AnthropicServer]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    cls = OpenAIServer if request.param == "openai" else AnthropicServer
    with cls() as running:
        yield running


def model_of(server: OpenAIServer | AnthropicServer) -> str:
    return "vllm/m" if isinstance(server, OpenAIServer) else "anthropic/m"


def with_credentials(url: str) -> str:
    return (
        url.replace("http://", f"http://auditor:{PASSWORD}@")
        + f"?api-version=2024-06-01&api-key={QUERY_KEY}"
    )


def written_everywhere(tmp_path: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file()]


def test_credentials_in_the_url_and_headers_reach_the_endpoint_and_nothing_written(
    server: OpenAIServer | AnthropicServer,
    prompts: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GATEWAY_KEY", HEADER_KEY)
    runs = tmp_path / "runs"
    url = with_credentials(server.base_url)
    args = ["fanout", str(prompts), "--model", model_of(server), "--base-url", url,
            "--header", "api-key=$GATEWAY_KEY", "--header", "x-team=literal-team-secret",
            "--runs-dir", str(runs)]  # fmt: skip
    # As a user runs it (the manifest records the process's own command line), logging all.
    done = subprocess.run(
        [sys.executable, "-m", "biasaudit", *args], capture_output=True, text=True, timeout=120,
        env={**os.environ, "BIASAUDIT_LOG": "debug"}, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr

    sent = server.requests[0]
    basic = base64.b64encode(f"auditor:{PASSWORD}".encode()).decode()
    assert sent.headers["authorization"] == f"Basic {basic}"
    assert sent.headers["api-key"] == HEADER_KEY and sent.headers["x-team"] == "literal-team-secret"
    assert f"api-key={QUERY_KEY}" in sent.query and "api-version=2024-06-01" in sent.query

    assert "HTTP Request: POST" in output, "debug logging was on: the requests were logged"
    for canary in (*CANARIES, "literal-team-secret"):
        assert canary not in output
        for path, data in written_everywhere(tmp_path):
            if path != prompts:
                assert canary.encode() not in data, (canary, path)
    run_dir = Path(done.stdout.strip().splitlines()[-1].removeprefix("run: "))
    manifest = read_manifest(run_dir)
    shown = manifest.endpoint["base_url"]
    assert shown.startswith("http://***:***@127.0.0.1:") and "api-key=***" in shown
    assert "api-version=2024-06-01" in shown
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["headers"] == {"api-key": "$GATEWAY_KEY", "x-team": "***"}
    assert "x-team=***" in manifest.command and "api-key=$GATEWAY_KEY" in manifest.command


def test_the_cache_key_does_not_depend_on_credentials(
    server: OpenAIServer | AnthropicServer, prompts: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    base = ["fanout", str(prompts), "--model", model_of(server), "--runs-dir", str(runs)]
    first = CliRunner().invoke(cli, [*base, "--base-url", with_credentials(server.base_url)])
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(
        cli, [*base, "--base-url", server.base_url + "?api-version=2024-06-01", "--replay"]
    )
    assert again.exit_code == 0 and "3 from cache, 0 requests sent" in again.output


def test_a_run_with_credentials_in_its_url_replays(
    server: OpenAIServer | AnthropicServer, prompts: Path, tmp_path: Path
) -> None:
    args = ["fanout", str(prompts), "--model", model_of(server), "--base-url",
            with_credentials(server.base_url), "--runs-dir", str(tmp_path / "runs")]  # fmt: skip
    first = CliRunner().invoke(cli, args)
    run_dir = first.output.strip().splitlines()[-1].removeprefix("run: ")
    replayed = CliRunner().invoke(cli, ["replay", run_dir, "--no-report"])
    assert replayed.exit_code == 0, replayed.output


def test_an_audit_spec_json_never_holds_the_url_credentials(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        url = with_credentials(server.base_url)
        args = ["run", "grade-score", "--items", "demo", "--model", "vllm/m", "--base-url", url,
                "--runs-dir", str(tmp_path / "runs"), "--no-report"]  # fmt: skip
        result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    for path, data in written_everywhere(tmp_path):
        assert PASSWORD.encode() not in data and QUERY_KEY.encode() not in data, path


def test_a_header_naming_an_unset_variable_fails_before_sending(
    prompts: Path, tmp_path: Path
) -> None:
    with OpenAIServer() as server:
        args = ["fanout", str(prompts), "--model", "vllm/m", "--base-url", server.base_url,
                "--header", "api-key=$NOT_SET_ANYWHERE", "--runs-dir", str(tmp_path / "runs")]  # fmt: skip
        result = CliRunner().invoke(cli, args)
        assert server.request_count == 0
    assert result.exit_code == 2 and "NOT_SET_ANYWHERE" in result.output
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("bad", ["no-equals-sign", "=value", "bad name=1"])
def test_a_malformed_header_is_a_usage_error(bad: str, prompts: Path) -> None:
    result = CliRunner().invoke(
        cli, ["fanout", str(prompts), "--model", "vllm/m", "--base-url", "http://127.0.0.1:9/v1",
              "--header", bad],
    )  # fmt: skip
    assert result.exit_code == 2


def test_url_masking() -> None:
    url = "https://me:secret@gw.example/v1/?api-key=abc&api-version=1&sig=xyz"
    endpoint = EndpointURL(url)
    assert endpoint.shown == "https://***:***@gw.example/v1/?api-key=***&api-version=1&sig=***"
    assert endpoint.connect == "https://gw.example/v1"
    assert endpoint.scope == "https://gw.example/v1?api-version=1"
    assert endpoint.query == {"api-key": "abc", "api-version": "1", "sig": "xyz"}
    assert EndpointURL("http://127.0.0.1:8000/v1/").scope == "http://127.0.0.1:8000/v1"
    assert redact_url("see https://tok@h/x") == "see https://***@h/x"
    assert public_headers({"a": "$A", "b": "${B}", "c": "lit"}) == {
        "a": "$A",
        "b": "${B}",
        "c": "***",
    }
    assert redact_command(["--header", "k=v", "--header=j=$J", "--base-url", url]) == [
        "--header", "k=***", "--header=j=$J", "--base-url",
        "https://***:***@gw.example/v1/?api-key=***&api-version=1&sig=***",
    ]  # fmt: skip


def test_a_provider_with_credentials_keeps_its_old_cache_keys() -> None:
    plain = resolve_model("vllm/m", base_url="http://127.0.0.1:8000/v1")
    secret = resolve_model(
        "vllm/m", base_url=f"http://u:{PASSWORD}@127.0.0.1:8000/v1/?key={QUERY_KEY}"
    )
    request = ModelRequest.model_validate({"id": "q", "prompt": "x"})

    def key(provider: object) -> str:
        return request.cache_key(provider="vllm", model="m", base_url=provider.cache_scope)  # type: ignore[attr-defined]

    assert key(plain) == key(secret)
    assert plain.describe()["base_url"] == "http://127.0.0.1:8000/v1"
    assert PASSWORD not in repr(secret.describe()) and QUERY_KEY not in repr(secret.describe())
