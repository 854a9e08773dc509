"""Listwise audits over the wire: a loopback OpenAI-compatible server that ranks each
pool by Gumbel draws around a planted group shift and a planted bonus for the
candidate shown first, answering in the forms models use (and, now and then,
irregularly). The exact chance of every candidate being put first is known, so the
run's figures are checked against the true values their intervals must cover."""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from biasaudit.kinds.candidates.resume import read_names
from biasaudit.kinds.registry import run_spec
from biasaudit.spec import parse_spec
from biasaudit.textfiles import DATA_DIR
from tests.servers import Choice, OpenAIServer, request_key

NAMES = read_names(DATA_DIR / "names.csv")
GROUP_OF = {name: group for group, names in NAMES.items() for name in names}
BLOCK = re.compile(r"^Candidate ([A-Z]):\s*\nName: (.+)$", re.MULTILINE)
SHIFT = {"H_F": -1.2}
FIRST_SLOT = 1.0


def utilities(
    body: dict[str, Any], path: str, shift: dict[str, float], first_slot: float
) -> tuple[list[str], list[float]]:
    """The letters shown and each candidate's planted utility (group shift, slot bonus)."""
    found = BLOCK.findall(request_key(body, path))
    letters = [letter for letter, _ in found]
    values = [
        shift.get(GROUP_OF[name.strip()], 0.0) + (first_slot if i == 0 else 0.0)
        for i, (_, name) in enumerate(found)
    ]
    return letters, values


def ranker(body: dict[str, Any], path: str) -> list[Choice]:
    return rank(body, path, SHIFT, FIRST_SLOT)


def fair_ranker(body: dict[str, Any], path: str) -> list[Choice]:
    return rank(body, path, {}, 0.0)


def rank(
    body: dict[str, Any], path: str, shift: dict[str, float], first_slot: float
) -> list[Choice]:
    letters, values = utilities(body, path, shift, first_slot)
    seed = hashlib.sha256((request_key(body, path) + str(body.get("seed"))).encode()).digest()
    rng = random.Random(seed)
    drawn = [v - math.log(-math.log(rng.random() or 1e-300)) for v in values]
    order = [letters[i] for i in sorted(range(len(values)), key=lambda i: -drawn[i])]
    form = rng.random()
    if form < 0.4:
        text = ", ".join(order)
    elif form < 0.7:
        text = "\n".join(f"{place}. Candidate {letter}" for place, letter in enumerate(order, 1))
    elif form < 0.9:
        text = "Ranking: " + " > ".join(order)
    elif form < 0.95:
        text = ", ".join([order[0], *order])  # the best named twice: a duplicate
    else:
        text = ", ".join(order[:3])  # a partial ranking
    return [Choice(text)]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(responder=ranker) as srv:
        yield srv


def expected_first(shown: pd.DataFrame) -> pd.DataFrame:
    """Each shown row's exact chance of being put first: the softmax of its answer's
    utilities (the server's Plackett-Luce ranker)."""
    frame = shown.copy()
    frame["utility"] = (
        frame["group"].map(lambda g: SHIFT.get(g, 0.0)) + (frame["slot"] == 1) * FIRST_SLOT
    )
    frame["weight"] = frame["utility"].map(math.exp)
    frame["p_first"] = frame["weight"] / frame.groupby("answer")["weight"].transform("sum")
    return frame


def test_a_run_over_the_wire_recovers_the_planted_group_and_position_bias(
    server: OpenAIServer, tmp_path: Path
) -> None:
    spec = parse_spec(
        {"task": "resume-screening", "method": "listwise", "model": "vllm/ranker",
         "base_url": server.base_url, "runs_dir": str(tmp_path),
         "jobs": "software-engineer", "names_per_group": 12, "pools": 60, "bootstrap": 300}
    )  # fmt: skip
    finished = run_spec(spec, command=["test"])
    metrics = finished.metrics
    shown = pd.read_csv(finished.run_dir / "shown.csv")
    truth = expected_first(shown)
    true_rate = truth.groupby("group")["p_first"].mean()
    rates = {r.group: r for r in metrics.rates if r.k == 1}
    gaps = {g.group: g for g in metrics.gaps if g.k == 1}
    # The planted group: beyond noise, and its true gap inside the interval.
    h_f = gaps["H_F"]
    assert h_f.ci is not None and h_f.ci[1] < 0
    true_gap = true_rate["H_F"] - true_rate["W_M"]
    assert h_f.ci[0] <= true_gap <= h_f.ci[1]
    # Every other group's true gap is 0: covered (one of seven may miss at 95%).
    missed = [g for g, gap in gaps.items() if g != "H_F" and not gap.ci[0] <= 0 <= gap.ci[1]]
    assert len(missed) <= 1, missed
    assert all(rate.ci is not None for rate in rates.values())
    # The planted position bias: slot 1's true share inside its interval, beyond 1/8.
    first = next(s for s in metrics.slots if s.slot == 1)
    true_first = truth.loc[truth["slot"] == 1, "p_first"].mean()
    assert first.ci is not None and first.ci[0] <= true_first <= first.ci[1]
    assert first.ci[0] > 1 / 8
    # Irregular answers are counted, not fatal; partial rankings are kept as partial.
    counts = metrics.counts
    assert counts.failed == 0 and counts.ranked == counts.answers == 60 * 8
    assert counts.duplicates > 0 and counts.partial > 0
    assert 0 < counts.duplicates / counts.answers < 0.15
    impact = {(i.category, i.value): i for i in metrics.impact}
    assert impact[("group", "H_F")].flagged


def test_nothing_is_found_where_nothing_is_planted(tmp_path: Path) -> None:
    with OpenAIServer(responder=fair_ranker) as server:
        spec = parse_spec(
            {"task": "resume-screening", "method": "listwise", "model": "vllm/fair-ranker",
             "base_url": server.base_url, "runs_dir": str(tmp_path),
             "jobs": "software-engineer", "names_per_group": 12, "pools": 60, "bootstrap": 300}
        )  # fmt: skip
        metrics = run_spec(spec, command=["test"]).metrics
    gaps = [g for g in metrics.gaps if g.k == 1]
    assert len([g for g in gaps if not g.ci[0] <= 0 <= g.ci[1]]) <= 1
    assert not [i for i in metrics.impact if i.category == "group" and i.beyond_noise]
    assert metrics.slot_entropy_ci is not None and metrics.slot_entropy_ci[1] >= 0.98
