"""A refusal is the model's answer: cached, counted in the run and in every audit, replayed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.kinds.allocation.run import run as audit
from biasaudit.kinds.ruted.run import run as ruted_audit
from biasaudit.kinds.ruted.spec import RutedSpec
from biasaudit.providers import ModelRequest, ModelResponse
from biasaudit.providers.sim import SimProvider
from biasaudit.replay import replay_run
from biasaudit.spec import parse_spec
from biasaudit.store.runs import read_manifest, read_responses
from tests.servers import AnthropicServer, Fault, OpenAIServer

from .test_audit_server import planted

REFUSAL = "I can't help with screening people by name."


def _openai_refusal(body: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": None, "refusal": REFUSAL}
    return {**body, "choices": [{**body["choices"][0], "message": message, "logprobs": None}]}


def _anthropic_refusal(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "content": [], "stop_reason": "refusal"}


def _prompts(path: Path) -> Path:
    lines = [
        {"id": name, "messages": [{"role": "user", "content": f"prompt {name}"}]}
        for name in ("a", "refuse-me", "b")
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_refusal_is_cached_counted_and_never_paid_twice(
    provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    cls, reshape = {
        "openai": (OpenAIServer, _openai_refusal),
        "anthropic": (AnthropicServer, _anthropic_refusal),
    }[provider]
    prompts = _prompts(tmp_path / "p.jsonl")
    model = "vllm/m" if provider == "openai" else "anthropic/m"
    with cls() as server:
        server.fail_all(Fault.reshaped(reshape), match="refuse-me")
        args = ["fanout", str(prompts), "--model", model, "--base-url", server.base_url]
        args += ["--runs-dir", str(tmp_path / "runs")]
        first = CliRunner().invoke(cli, args)
        assert first.exit_code == 0, first.output
        assert "3 answered, 0 failed, 1 refused" in first.output
        second = CliRunner().invoke(cli, args)
        assert second.exit_code == 0 and "1 refused; 3 from cache, 0 requests sent" in second.output
        assert server.request_count == 3
    run_dir = Path(second.output.strip().splitlines()[-1].removeprefix("run: "))
    [refused] = [r for r in read_responses(run_dir) if r.id == "refuse-me"]
    assert refused.cached and refused.refusal and refused.error is None
    assert read_manifest(run_dir).counts.refusals == 1


def test_a_run_holding_a_refusal_replays(tmp_path: Path) -> None:
    prompts = _prompts(tmp_path / "p.jsonl")
    with OpenAIServer() as server:
        server.fail_all(Fault.reshaped(_openai_refusal), match="refuse-me")
        args = ["fanout", str(prompts), "--model", "vllm/m", "--base-url", server.base_url]
        result = CliRunner().invoke(cli, [*args, "--runs-dir", str(tmp_path / "runs")])
    run_dir = result.output.strip().splitlines()[-1].removeprefix("run: ")
    replayed = CliRunner().invoke(cli, ["replay", run_dir, "--no-report"])
    assert replayed.exit_code == 0, replayed.output


def test_refusals_count_in_an_allocation_audit_and_replay_identically(tmp_path: Path) -> None:
    refused: list[str] = []

    def about_one_in_ten(body: dict[str, Any]) -> bool:
        text = json.dumps(body.get("messages"), sort_keys=True)
        if hashlib.sha256(text.encode()).digest()[0] >= 26:
            return False
        refused.append(text)
        return True

    with OpenAIServer(responder=planted) as server:
        server.fail_all(Fault.reshaped(_openai_refusal), match=about_one_in_ten)
        spec = {
            "task": "resume-screening", "model": "vllm/test-model", "base_url": server.base_url,
            "runs_dir": str(tmp_path), "jobs": "hr-specialist", "names_per_group": 4,
            "rounds": 200, "bootstrap": 200, "gap_bootstrap": 40,
        }  # fmt: skip
        result = audit(parse_spec(spec))
        sent = server.request_count
    counts = result.metrics.candidates
    assert len(refused) > 5 and counts.refused == len(refused) and counts.failed == 0
    assert counts.irregular >= counts.refused
    scores = pd.read_csv(result.run_dir / "scores.csv")
    assert scores.loc[scores["refused"], "score"].isna().all()
    assert read_manifest(result.run_dir).counts.refusals == len(refused)
    replayed = replay_run(result.run_dir)
    assert replayed.differences == [] and replayed.manifest.counts.sent == 0
    assert replayed.manifest.counts.refusals == len(refused) and sent == len(scores)


class _RefusesNurses(SimProvider):
    """sim/biased, refusing every long-form text about a nurse."""

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        response = await super().complete(request, timeout=timeout)
        if request.messages is not None and "nurse" in json.dumps(request.messages):
            return response.model_copy(update={"refusal": "I would rather not."})
        return response


def test_refusals_count_in_a_ruted_audit(tmp_path: Path) -> None:
    spec = parse_spec(
        {"task": "ruted", "model": "sim/biased", "runs_dir": str(tmp_path),
         "contexts": "bedtime", "replicates": 4}
    )  # fmt: skip
    assert isinstance(spec, RutedSpec)
    result = ruted_audit(spec, provider=_RefusesNurses())
    bedtime = result.metrics.contexts["bedtime"]
    assert bedtime.refused == 4 and bedtime.failed == 0
    assert any("4 replicates refused by the model" in note for note in result.metrics.notes)
    occupations = pd.read_csv(result.run_dir / "occupations.csv")
    nurse = occupations[occupations["occupation"] == "nurse"].iloc[0]
    assert nurse["refused"] == 4 and nurse["n"] == 0
