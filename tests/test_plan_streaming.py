"""Planning streams: a dry run (and ``--max-cost``'s estimate) reads each kind's requests
as they are made, a chunk at a time, and holds neither every prompt nor a copy of a
template per person (issue: a decisions file of long templates grew a dry run to 12 GB).

The estimate read in chunks equals the one read whole; each kind's streamed requests
are the ones its run sends; a dry run of 4,000 prompts of 90,000 characters stays
within a bounded memory (the same plan held whole needs 380 MB)."""

from __future__ import annotations

import io
import json
import tracemalloc
from pathlib import Path

import pytest

from biasaudit.kinds.registry import kind_of_spec, plan_requests
from biasaudit.pricing import estimate_cost, estimate_spec_cost, load_prices
from biasaudit.providers import resolve_model
from biasaudit.spec import parse_spec
from tests.test_sim import _built_in_specs

FILLER = "The applicant's file runs long. " * 2_800  # about 90,000 characters


def _long_scenarios(path: Path, count: int) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            template = f"Scenario {i}: {{who}} asks for a loan. {FILLER}Should it be approved?"
            out.write(json.dumps({"id": f"s{i}", "template": template}) + "\n")
    return path


@pytest.mark.parametrize(("kind", "spec"), _built_in_specs(), ids=lambda x: str(x)[:40])
def test_each_kind_streams_the_requests_its_run_sends(
    kind: str, spec: object, tmp_path: Path
) -> None:
    """The plan read as it is made is what a run sends: every request, under the cache
    key its run recorded in prompts.jsonl.gz, in the run's order."""
    from biasaudit.engine.core import Engine
    from biasaudit.providers.sim import SimProvider
    from biasaudit.store.runs import read_prompts

    spec = spec.model_copy(update={"runs_dir": tmp_path / "runs",  # type: ignore[attr-defined]
                                   "cache": tmp_path / "cache.sqlite", "report": False})  # fmt: skip
    provider = SimProvider("biased")
    streamed = plan_requests(spec, provider)  # type: ignore[arg-type]
    assert iter(streamed) is streamed, f"{kind}: the plan is not read as it is made"
    engine = Engine(provider, None, spec.engine_settings())  # type: ignore[attr-defined]
    planned = [((r.id, r.replicate), engine.key(r)) for r in streamed]
    ran = kind_of_spec(spec).run(spec, provider=provider, stderr=io.StringIO())  # type: ignore[arg-type]
    _, sent = read_prompts(ran.run_dir)
    assert planned == [(where, record.cache_key) for where, record in sent.items()]


def test_the_estimate_read_in_chunks_equals_the_estimate_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small chunks, a cache holding some answers, calls repeated across chunks (the
    engine sends one): every count and token equal to the whole plan's."""
    from biasaudit.engine.core import Engine
    from biasaudit.providers import ModelResponse
    from biasaudit.store.cache import ResponseCache

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    scenarios = tmp_path / "scenarios.jsonl"
    texts = ["{who} asks for a loan. Approve it?"] * 2 + ["{who} asks for a lease. Sign it?"]
    scenarios.write_text("".join(json.dumps({"id": f"s{i}", "template": text}) + "\n"
                                 for i, text in enumerate(texts)))  # fmt: skip
    spec = parse_spec({"task": "decisions", "model": "openai/gpt-4o-mini",
                       "scenarios": str(scenarios), "cache": str(tmp_path / "cache.sqlite")})  # fmt: skip
    provider = resolve_model("openai/gpt-4o-mini")
    prices = load_prices()
    requests = list(plan_requests(spec, provider))
    engine = Engine(provider, None, spec.engine_settings())
    calls = engine.calls(requests)
    keys = [engine.key(call) for call in calls]
    with ResponseCache(spec.cache_path) as cache:  # every seventh answer paid for before
        for key in keys[::7]:
            cache.put(key, ModelResponse(texts=["Yes"]), model_id="gpt-4o-mini")
    whole = estimate_cost(provider, requests, prices=prices, units=calls, keys=keys,
                          cached_keys=set(keys[::7]))  # fmt: skip
    assert whole.cache_hits and whole.to_send and whole.repeats  # s1 asks what s0 asks
    monkeypatch.setattr("biasaudit.pricing.PLAN_CHUNK_REQUESTS", 13)
    chunked = estimate_spec_cost(spec, provider, prices)
    for field in ("requests", "cache_hits", "repeats", "input_tokens", "output_tokens"):
        assert getattr(chunked, field) == getattr(whole, field), field


def test_a_dry_run_of_long_prompts_holds_one_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    scenarios = _long_scenarios(tmp_path / "long.jsonl", 10)
    spec = parse_spec({"task": "decisions", "model": "openai/gpt-4o-mini",
                       "scenarios": str(scenarios), "cache": str(tmp_path / "cache.sqlite")})  # fmt: skip
    provider = resolve_model("openai/gpt-4o-mini")
    tracemalloc.start()
    try:
        estimate = estimate_spec_cost(spec, provider, load_prices())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    planned = estimate.requests * 90_000  # characters, were every prompt held at once
    assert estimate.requests >= 4_000 and planned > 350e6
    assert peak < 100e6, (
        f"a dry run of {estimate.requests} long prompts peaked at {peak / 1e6:.0f} MB"
    )
