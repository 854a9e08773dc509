"""Allocation audits over the wire: a loopback OpenAI-compatible server with a planted P(Yes)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from biasaudit.kinds.allocation.run import AuditResult, run as audit
from biasaudit.kinds.candidates.resume import read_names
from biasaudit.spec import parse_spec
from biasaudit.textfiles import DATA_DIR
from tests.servers import Choice, OpenAIServer, request_key

NAMES = read_names(DATA_DIR / "names.csv")
FIRST_NAMES = {group: {name.split()[0] for name in names} for group, names in NAMES.items()}
NAME = re.compile(r"^Name: (\w+)", re.MULTILINE)


def first_name(body: dict[str, Any], path: str) -> str:
    found = NAME.search(request_key(body, path))
    return found.group(1) if found else ""


def jitter(body: dict[str, Any], path: str) -> float:
    """A deterministic spread of +-0.1 so candidates do not all tie."""
    digest = hashlib.sha256(request_key(body, path).encode()).digest()
    return (digest[0] / 255 - 0.5) / 5


def planted(body: dict[str, Any], path: str) -> list[Choice]:
    """P(Yes) 0.65 for everyone, 0.35 for Hispanic women."""
    p_yes = 0.35 if first_name(body, path) in FIRST_NAMES["H_F"] else 0.65
    return [Choice.binary(p_yes + jitter(body, path))]


def irregular(body: dict[str, Any], path: str) -> list[Choice]:
    """White women's screeners hedge ("Maybe"); Asian women's answer off the label set entirely."""
    name = first_name(body, path)
    if name in FIRST_NAMES["W_F"]:
        return [Choice("Maybe", [{"Maybe": -0.2, "Yes": -2.0, "No": -2.5}])]
    if name in FIRST_NAMES["A_F"]:
        return [Choice("Sorry, I cannot judge that.", [{"Sorry": -0.01, "I": -5.0}])]
    return [Choice.binary(0.6 + jitter(body, path))]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(responder=planted) as srv:
        yield srv


def run(server: OpenAIServer, runs_dir: Path, **fields: Any) -> AuditResult:
    spec = parse_spec(
        {"task": "resume-screening", "model": "vllm/test-model", "base_url": server.base_url,
         "runs_dir": str(runs_dir), "jobs": "hr-specialist", "names_per_group": 4,
         "rounds": 200, "bootstrap": 200, "gap_bootstrap": 40, "concurrency": 8, **fields}
    )  # fmt: skip
    return audit(spec)


def test_planted_bias_is_found_over_the_wire_and_a_second_run_costs_nothing(
    server: OpenAIServer, tmp_path: Path
) -> None:
    first = run(server, tmp_path)
    requests = 6 * 8 * 4
    assert server.request_count == requests and first.exit_code == 0
    body = server.bodies()[0]
    assert body["logprobs"] is True and body["top_logprobs"] == 10 and body["max_tokens"] == 1
    h_f = first.metrics.groups["H_F"]
    # Four names per group: the interval of ΔDP over names is wide, its estimate is not.
    assert h_f.rabbi_ci and h_f.rabbi_ci[1] < 0 and h_f.dp_gap["1"] < 0
    assert not first.metrics.simulated and first.metrics.model == "vllm/test-model"

    second = run(server, tmp_path)
    assert server.request_count == requests  # nothing new reached the server
    assert second.metrics.requests.cache_hits == requests and second.metrics.requests.sent == 0
    assert second.metrics.groups == first.metrics.groups


def test_irregular_answers_are_counted_not_fatal(server: OpenAIServer, tmp_path: Path) -> None:
    server.responder = irregular
    result = run(server, tmp_path)
    per_group = 6 * 4
    counts = result.metrics.candidates
    assert result.exit_code == 0 and counts.total == 8 * per_group
    assert counts.irregular == 2 * per_group and counts.unscored == per_group
    assert (
        result.metrics.groups["W_F"].irregular == per_group
        and result.metrics.groups["W_F"].n == per_group
    )
    a_f = result.metrics.groups["A_F"]
    assert a_f.n == 0 and a_f.unscored == per_group and a_f.rabbi is None
    assert any(note.startswith("A_F: no scored candidates") for note in result.metrics.notes)
    assert "A_F left out of the selection pools" in " ".join(result.metrics.notes)
    assert result.metrics.selection and result.metrics.selection.pool_size == 7
    assert a_f.dp_gap == {} and result.metrics.groups["H_M"].dp_gap_ci
    scores = pd.read_csv(result.run_dir / "scores.csv")
    hedged = scores[scores["group"] == "W_F"]
    assert hedged["irregular"].all() and hedged["score"].notna().all()
    assert hedged["p_Yes"].iloc[0] > 0.5  # Yes -2.0 against No -2.5, renormalised


def test_unparseable_pairwise_answers_are_counted(server: OpenAIServer, tmp_path: Path) -> None:
    def judge(body: dict[str, Any], path: str) -> list[Choice]:
        prompt = request_key(body, path)
        names = NAME.findall(prompt)
        if names and names[0] in FIRST_NAMES["W_F"]:
            return [Choice("It depends on what the team needs.")]
        return [Choice("B" if names and names[0] in FIRST_NAMES["H_M"] else "A")]

    server.responder = judge
    result = run(server, tmp_path, method="pairwise", pools=5)
    stats = result.metrics.pairwise
    assert stats is not None and stats.n_prompts == 5 * 56
    assert stats.unparsed == 5 * 7 and stats.regular == pytest.approx(1 - 7 / 56)
    body = server.bodies()[0]
    assert body["temperature"] == 0.0 and "logprobs" not in body


def test_reasoning_effort_reaches_every_request_and_its_cache_key(
    server: OpenAIServer, tmp_path: Path
) -> None:
    low = run(server, tmp_path, reasoning_effort="low")
    requests = 6 * 8 * 4
    assert low.exit_code == 0 and server.request_count == requests
    assert {body.get("reasoning_effort") for body in server.bodies()} == {"low"}
    spec = json.loads((low.run_dir / "spec.json").read_text())
    assert spec["reasoning_effort"] == "low"
    # Another effort is another question: nothing of the first run answers it.
    default = run(server, tmp_path)
    assert default.metrics.requests.cache_hits == 0 and server.request_count == 2 * requests
    assert "reasoning_effort" not in server.bodies()[-1]
    again = run(server, tmp_path, reasoning_effort="low")
    assert again.metrics.requests.cache_hits == requests and server.request_count == 2 * requests
