"""Allocation labels scored whole as continuations, over the wire (vLLM's echo).

The loopback server scores every echoed token; each label's tokens get planted
log-probabilities, so the run's label probabilities and scores can be checked
against a hand computation. Labels of several tokens ("Strong yes") count
whole, not by their first token.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.kinds.allocation.run import AuditResult, run as audit
from biasaudit.spec import parse_spec
from tests.servers import OpenAIServer

CSV = "name,group,purpose\nAnn,A,a car\nBo,B,a roof\nCy,A,a shop\nDi,B,a boat\n"
PROMPT = {"system": "You screen loans.", "user": "{name}: {purpose}. Approve?"}
LABELS = {"Strong yes": 1.0, "Yes": 0.75, "No": 0.0}
# log P(token | the prompt so far) of each label's tokens; Bo and Di (group B) are
# less likely to be strongly approved. " Strong" is shared: only the second token
# tells "Strong yes" apart from a label that started the same.
P_STRONG = {"Ann": 0.30, "Bo": 0.10, "Cy": 0.30, "Di": 0.10}
P_YES, P_NO, P_SECOND = 0.40, 0.20, 0.5


def scorer(before: str, token: str) -> float:
    """The server's echo scorer: log P(token | before), planted for the label tokens."""
    if not before.endswith("Answer:") and not before.endswith("Answer: Strong"):
        return -1.0  # the prompt's own tokens: not looked at
    name = before.split("\n\n")[1].split(":")[0]
    if before.endswith("Answer: Strong"):
        return math.log(P_SECOND)
    return math.log({" Strong": P_STRONG[name], " Yes": P_YES, " No": P_NO}[token])


def expected_score(name: str) -> float:
    mass = {"Strong yes": P_STRONG[name] * P_SECOND, "Yes": P_YES, "No": P_NO}
    total = sum(mass.values())
    return sum(LABELS[label] * p / total for label, p in mass.items())


def run(server: OpenAIServer, tmp_path: Path, **fields: Any) -> AuditResult:
    (tmp_path / "candidates.csv").write_text(CSV)
    spec = parse_spec(
        {"task": "allocation", "model": "vllm/m", "base_url": server.base_url,
         "candidates": str(tmp_path / "candidates.csv"), "reference_group": "A",
         "pointwise": PROMPT, "labels": LABELS, "runs_dir": str(tmp_path / "runs"),
         "name_column": "name",
         "scoring": "continuation", "chat_template": "plain", "rounds": 50,
         "bootstrap": 100, **fields}
    )  # fmt: skip
    return audit(spec)


def test_every_label_is_scored_whole_and_the_score_is_its_expected_value(tmp_path: Path) -> None:
    with OpenAIServer(echo_logprob=scorer) as server:
        result = run(server, tmp_path)
        bodies = server.bodies()
    prompts = sorted(p for b in bodies for p in _prompts(b))
    assert result.exit_code == 0 and len(prompts) == 4 * 3  # vLLM: prompts travel as lists
    assert all(b["echo"] is True and b["max_tokens"] == 1 for b in bodies)
    assert "You screen loans.\n\nAnn: a car. Approve?\n\nAnswer: Strong yes" in prompts
    scores = pd.read_csv(result.run_dir / "scores.csv").set_index("name")
    for name in P_STRONG:
        assert scores.loc[name, "score"] == pytest.approx(expected_score(name))
        assert scores.loc[name, "path"] == "continuation"
    assert scores.loc["Ann", "label_mass"] == pytest.approx(0.3 * 0.5 + 0.4 + 0.2)
    assert result.metrics.scoring.path == "continuation"
    assert result.metrics.scoring.chat_template == "plain"
    assert "scored whole as a continuation" in result.metrics.scoring.describe()
    assert result.metrics.groups["B"].avg_gap == pytest.approx(
        expected_score("Bo") - expected_score("Ann")
    )


def test_an_endpoint_that_does_not_echo_fails_those_candidates_and_says_why(
    tmp_path: Path,
) -> None:
    from biasaudit.errors import NoAnswerError
    from biasaudit.store.runs import read_manifest, read_responses

    with OpenAIServer() as server, pytest.raises(NoAnswerError) as raised:  # echo: 400
        run(server, tmp_path, max_retries=0)
    # Every request failed: the run is failed, says why, and has no figures to mislead.
    assert "every request failed" in str(raised.value)
    assert "echo is not supported" in str(raised.value)
    run_dir = Path(raised.value.run_dir or "")
    assert read_manifest(run_dir).status == "failed"
    assert not (run_dir / "scores.csv").exists()
    assert all("echo is not supported" in (r.error or "") for r in read_responses(run_dir))


def test_the_models_own_template_of_a_remote_model_is_asked_for_before_sending(
    tmp_path: Path,
) -> None:
    (tmp_path / "candidates.csv").write_text(CSV)
    with OpenAIServer(echo_logprob=scorer) as server:
        spec = {"task": "allocation", "model": "vllm/m", "base_url": server.base_url,
                "candidates": "candidates.csv", "reference_group": "A", "pointwise": PROMPT,
                "labels": LABELS, "runs_dir": "runs", "scoring": "continuation"}  # fmt: skip
        (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
        result = CliRunner().invoke(cli, ["run", str(tmp_path / "spec.yaml")])
        assert server.request_count == 0
    assert result.exit_code == 2 and "--chat-template chatml, plain" in result.output
    assert "Traceback" not in result.output


def _prompts(body: dict[str, Any]) -> list[str]:
    prompt = body["prompt"]
    return prompt if isinstance(prompt, list) else [prompt]
