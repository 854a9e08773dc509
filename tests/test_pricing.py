"""`biasaudit run --dry-run / --max-cost`: prices, token estimates, and a budget that holds."""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.errors import RunAbortedError, UsageError
from biasaudit.kinds.registry import run_spec
from biasaudit.pricing import (
    DEFAULT_OUTPUT_TOKENS,
    BudgetedProvider,
    ModelPrice,
    estimate_tokens,
    load_prices,
)
from biasaudit.providers import ModelRequest, resolve_model
from biasaudit.providers._types import SamplingParams
from biasaudit.spec import parse_spec
from biasaudit.store.runs import read_manifest, read_responses
from tests.servers import OpenAIServer

SMALL = ["--jobs", "software-engineer", "--names-per-group", "1", "--rounds", "50"]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text("prices:\n  vllm/test-model: {input: 1.0, output: 2.0}\n")
    return path


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_shipped_prices_know_snapshots_and_aliases_and_free_models() -> None:
    table = load_prices()
    assert table.price("openai/gpt-4o-mini") == ModelPrice(input=0.15, output=0.60)
    assert table.price("openai/gpt-4o-2024-08-06") == table.price("openai/gpt-4o")
    assert table.price("anthropic/claude-3-5-haiku-20241022") == table.price(
        "anthropic/claude-3-5-haiku-latest"
    )
    free = ModelPrice(input=0.0, output=0.0)
    assert table.price("sim/biased") == free and table.price("local/smollm2") == free
    assert table.price("vllm/meta-llama/Llama-3-8B", base_url="http://gpu:8000/v1") == free
    assert table.price("myhost/model", base_url="http://gpu:8000/v1") == free
    assert table.price("together/meta-llama/Llama-3-70b") is None  # a paid host not listed


def test_a_user_price_file_wins_and_a_bad_one_is_named(prices: Path, tmp_path: Path) -> None:
    assert load_prices(prices).price("vllm/test-model") == ModelPrice(input=1.0, output=2.0)
    bad = tmp_path / "bad.yaml"
    bad.write_text("prices:\n  openai/gpt-4o: {input: cheap}\n")
    with pytest.raises(UsageError, match=r"prices .*bad.yaml, field 'prices.openai/gpt-4o.input'"):
        load_prices(bad)


def test_token_estimate_is_characters_over_four_plus_chat_overhead() -> None:
    chat = ModelRequest(
        id="a",
        messages=({"role": "system", "content": "x" * 10}, {"role": "user", "content": "y" * 7}),
        params=SamplingParams(max_tokens=3, n=2),
    )
    assert estimate_tokens(chat) == (math.ceil(17 / 4) + 2 * 4 + 3, 6)
    legacy = ModelRequest(id="b", prompt="The nurse is")
    assert estimate_tokens(legacy) == (3, DEFAULT_OUTPUT_TOKENS)


def test_dry_run_counts_cache_hits_as_free_and_sends_nothing(
    server: OpenAIServer, prices: Path, tmp_path: Path
) -> None:
    base = ["run", "resume-screening", "--model", "vllm/test-model", "--base-url", server.base_url,
            "--runs-dir", str(tmp_path), *SMALL]  # fmt: skip
    code, out, _ = invoke(*base, "--dry-run", "--prices", str(prices))
    assert code == 0 and server.request_count == 0 and not list(tmp_path.glob("2*"))
    lines = out.splitlines()
    cache = tmp_path / "cache.sqlite"
    assert lines[0] == (
        f"dry run of vllm/test-model: 48 requests, 0 in the cache {cache} (free), 48 to send"
    )
    assert lines[2].startswith("estimated cost: $0.0") and "prices change" in lines[2]
    assert invoke(*base)[0] == 0 and server.request_count == 48
    code, out, _ = invoke(*base, "--dry-run", "--prices", str(prices))
    assert out.splitlines()[0].endswith(f"48 in the cache {cache} (free), 0 to send")
    assert "estimated cost: $0.0000" in out
    code, out, _ = invoke(*base, "--dry-run")  # self-hosted, no price file: free, and says so
    assert out.splitlines()[-1] == "estimated cost: $0.00 (local or self-hosted model)"


def test_a_dry_run_counts_a_repeated_comparison_once(tmp_path: Path) -> None:
    """Pairwise pools of few names repeat comparisons; the engine sends each once, so the
    dry run counts the copies apart and plans to send what the run then sends."""
    base = ["run", "resume-screening", "--method", "pairwise", "--model", "sim/biased",
            "--jobs", "software-engineer", "--names-per-group", "2", "--runs-dir",
            str(tmp_path), "--no-report"]  # fmt: skip
    code, out, _ = invoke(*base, "--dry-run")
    first = out.splitlines()[0]
    assert code == 0 and "the same as another (sent once)" in first, first
    to_send = int(first.rsplit(", ", 1)[1].split()[0])
    assert invoke(*base)[0] == 0
    [run] = tmp_path.glob("2*")
    counts = read_manifest(run).counts
    assert to_send == counts.sent < counts.requests
    assert f"{counts.requests} requests" in first


def test_max_cost_refuses_to_start_above_the_estimate(
    server: OpenAIServer, prices: Path, tmp_path: Path
) -> None:
    code, _, err = invoke(
        "run", "resume-screening", "--model", "vllm/test-model", "--base-url", server.base_url,
        "--runs-dir", str(tmp_path), *SMALL, "--prices", str(prices), "--max-cost", "0.001",
    )  # fmt: skip
    assert code == 2 and server.request_count == 0 and not list(tmp_path.glob("2*"))
    assert "--max-cost $0.001: not started, the estimate is $0.0" in err
    assert "nothing was sent" in err


def test_max_cost_within_the_estimate_runs_and_reports_the_spend(
    server: OpenAIServer, prices: Path, tmp_path: Path
) -> None:
    code, out, err = invoke(
        "run", "resume-screening", "--model", "vllm/test-model", "--base-url", server.base_url,
        "--runs-dir", str(tmp_path), *SMALL, "--prices", str(prices), "--max-cost", "5",
    )  # fmt: skip
    lines = out.splitlines()
    assert code == 0 and server.request_count == 48
    assert lines[-2].startswith("spent: $0.0") and lines[-2].endswith(" of $5")
    assert lines[-1].startswith(f"run: {tmp_path}") and "estimated cost:" in err


def test_spend_crossing_the_budget_stops_the_run_cleanly(
    server: OpenAIServer, tmp_path: Path
) -> None:
    spec = parse_spec(
        {"task": "resume-screening", "model": "vllm/test-model", "base_url": server.base_url,
         "runs_dir": str(tmp_path), "jobs": "software-engineer", "names_per_group": 1,
         "concurrency": 1}
    )  # fmt: skip
    inner = resolve_model("vllm/test-model", base_url=server.base_url)
    # About 100 prompt tokens an answer at $100 per million: the budget holds ten answers.
    budgeted = BudgetedProvider(inner, ModelPrice(input=100.0, output=100.0), max_cost=0.1)
    with pytest.raises(RunAbortedError, match=r"spent \$0\.1\d* of the --max-cost \$0\.1 budget"):
        run_spec(spec, provider=budgeted, command=["test"])
    (run_dir,) = tmp_path.glob("2*")
    manifest = read_manifest(run_dir)
    sent = server.request_count
    assert manifest.status == "aborted" and "--max-cost" in (manifest.error or "")
    assert 1 <= sent < 48 and manifest.counts.failures == 48 - sent
    records = read_responses(run_dir)
    assert sum(r.error is None for r in records) == sent and len(records) == 48

    rerun = run_spec(spec, command=["test"])  # the answers that arrived are cached
    assert rerun.exit_code == 0 and server.request_count == 48
    assert rerun.manifest.counts.cache_hits == sent


def test_answers_in_flight_when_the_budget_is_reached_are_kept_not_paid_twice(
    tmp_path: Path,
) -> None:
    """Eight requests at a time, answered one by one (each in 0.1 to 0.45 s): when the
    budget is spent, the others already sent are paid for; they are awaited and cached,
    so the rerun sends only what was never sent."""

    class OneByOne(OpenAIServer):
        turns = itertools.count()

        @property  # type: ignore[override]
        def latency(self) -> float:  # read per request
            return 0.1 + 0.05 * (next(self.turns) % 8)

        @latency.setter
        def latency(self, value: float) -> None:
            pass

    with OneByOne() as server:
        spec = parse_spec(
            {"task": "resume-screening", "model": "vllm/test-model", "base_url": server.base_url,
             "runs_dir": str(tmp_path), "jobs": "software-engineer", "names_per_group": 1,
             "concurrency": 8}
        )  # fmt: skip
        inner = resolve_model("vllm/test-model", base_url=server.base_url)
        budgeted = BudgetedProvider(inner, ModelPrice(input=100.0, output=100.0), max_cost=0.1)
        with pytest.raises(RunAbortedError, match=r"--max-cost \$0\.1 budget"):
            run_spec(spec, provider=budgeted, command=["test"])
        (run_dir,) = tmp_path.glob("2*")
        paid = server.request_count
        records = read_responses(run_dir)
        answered = sum(r.error is None for r in records)
        assert answered == paid  # every request sent was answered and recorded
        assert paid > 10 and paid % 8 != 1  # the in-flight ones past the budget too
        rerun = run_spec(spec, command=["test"])
        assert rerun.exit_code == 0
        assert server.request_count == 48  # nothing paid twice
        assert rerun.manifest.counts.cache_hits == paid


def test_a_dry_run_says_why_an_endpoint_without_logprobs_or_n_costs_so_many_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code, out, _ = invoke("run", "resume-screening", "--model", "anthropic/claude-3-5-haiku-latest",
                          "--runs-dir", str(tmp_path), *SMALL, "--samples", "5", "--dry-run")  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("dry run of anthropic/claude-3-5-haiku-latest: 240 requests")
    assert lines[1] == (
        "why so many: 48 prompts x 5 sampled answers each; this endpoint has no n, so each "
        "answer is a call of its own (5 a prompt) (sampled answers stand in for logprobs: the "
        "endpoint gives none, or sampling was asked for); --samples N lowers it"
    )


@pytest.mark.usefixtures("quick_refit")
def test_a_dry_run_plans_the_names_that_detect_a_gap_from_a_pilot(tmp_path: Path) -> None:
    """A pilot of 6 names per group, then --dry-run --detect: the power as configured,
    and the names per group for 80% and 95% with their requests. The pilot is refitted on
    halves of its names (the interval's two parts and the estimate's spread); its
    models reproduce the printed sizes, and the interval part matches the pilot's own
    interval at its size."""
    from scipy import stats

    from biasaudit.kinds.allocation.power import planned
    from biasaudit.spec import parse_spec

    base = ["run", "resume-screening", "--model", "sim/biased", "--jobs", "software-engineer",
            "--runs-dir", str(tmp_path)]  # fmt: skip
    code, out, err = invoke(*base, "--names-per-group", "6", "--no-report")
    assert code == 0, err
    pilot = Path(out.strip().splitlines()[-1].removeprefix("run: "))
    code, out, err = invoke(*base, "--names-per-group", "10", "--dry-run", "--detect", "0.1",
                            "--like", str(pilot))  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("power to detect"))
    assert lines[start].startswith("power to detect |ΔDP| >= 0.1 at k=1 against W_M")
    assert "fitted on halves of its names" in lines[start]
    assert lines[start + 1].startswith("  as configured (10 names per group): ")
    spec = parse_spec({"task": "resume-screening", "model": "sim/biased",
                       "jobs": "software-engineer", "like": str(pilot), "detect": 0.1})  # fmt: skip
    models = planned(spec, 1).models
    metrics = json.loads((pilot / "metrics.json").read_text())
    z = stats.norm.ppf(0.975)
    for group, model in models.items():
        assert model.spread_names is not None and model.n_now == 6
        low, high = metrics["groups"][group]["dp_gap_ci"]["1"]
        assert model.se(6) == pytest.approx((high - low) / (2 * z), rel=0.25)
    sizes = [m.names_for(0.1, 0.8) for m in models.values()]
    names = max(n for n in sizes if n is not None)
    assert lines[start + 2].startswith(f"  80% power: {names} names per group, ")
    assert lines[start + 3].startswith("  95% power: ")


@pytest.mark.parametrize(
    ("audit", "unit", "size"),
    # 80% power with SE² = V/unit: the fewest units with (z + z_0.8)² V / D² <= units.
    [(["resume-screening", "--jobs", "software-engineer", "--names-per-group", "10"],
      "names per group", 2 * (1 / 8) * (7 / 8)),
     (["resume-screening", "--method", "listwise", "--jobs", "software-engineer", "--pools",
       "10"], "pools per subtask", 2 * (1 / 8) * (7 / 8)),
     (["grade-score", "--items", "demo"], "items", 0.25),
     (["ruted", "--contexts", "standard"], "occupations", 1.0)],
)  # fmt: skip
def test_without_a_pilot_every_kind_plans_from_stated_worst_case_defaults(
    tmp_path: Path, audit: list[str], unit: str, size: float
) -> None:
    """Neither --like nor --pilot: the plan says it rests on stated defaults, the most a
    unit's variance can be at the stated value (a rate's p(1-p), a score in [0, 1], a
    skew in [-1, 1]), and its sizes follow from them; nothing is sent and no run is
    written."""
    from scipy import stats

    code, out, err = invoke("run", *audit, "--model", "sim/biased", "--runs-dir",
                            str(tmp_path / "runs"), "--dry-run", "--detect", "0.1")  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("power to detect"))
    assert "from stated defaults (" in lines[start] and "cautious" in lines[start]
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    expected = math.ceil(z * z * size / 0.01 - 1e-9)
    assert lines[start + 2].startswith(f"  80% power: {expected} {unit}, "), lines[start + 2]
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("pilot", "audit", "unit", "what"),
    [(["grade-score", "--items", "demo"], ["grade-score", "--items", "demo"], "items",
      "a change of the score"),
     (["ruted", "--contexts", "standard,bedtime"], ["ruted", "--contexts", "standard,bedtime"],
      "occupations", "a skew"),
     (["resume-screening", "--method", "listwise", "--jobs", "software-engineer", "--pools", "6"],
      ["resume-screening", "--method", "listwise", "--jobs", "software-engineer", "--pools",
       "10"], "pools per subtask", "|ΔDP|")],
)  # fmt: skip
def test_every_kind_plans_its_own_unit_from_a_pilot(
    tmp_path: Path, pilot: list[str], audit: list[str], unit: str, what: str
) -> None:
    code, out, err = invoke("run", *pilot, "--model", "sim/biased", "--runs-dir", str(tmp_path),
                            "--no-report")  # fmt: skip
    assert code == 0, err
    like = out.strip().splitlines()[-1].removeprefix("run: ")
    code, out, err = invoke("run", *audit, "--model", "sim/biased", "--runs-dir", str(tmp_path),
                            "--dry-run", "--detect", "0.1", "--like", like)  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("power to detect"))
    assert lines[start].startswith(f"power to detect {what} >= 0.1")
    assert f"SE scaled by 1/sqrt({unit})" in lines[start]
    for target, line in zip(("80%", "95%"), lines[start + 2 : start + 4], strict=True):
        assert line.startswith(f"  {target} power: ") and f" {unit}, " in line
        assert "requests to send" in line
    other = next(p for p in tmp_path.glob("2*") if p.is_dir())
    mismatch = invoke("run", "resume-screening", "--model", "sim/biased", "--runs-dir",
                      str(tmp_path), "--dry-run", "--detect", "0.1", "--like", str(other))  # fmt: skip
    if "allocation" not in other.name:
        assert mismatch[0] == 2 and "not an allocation run" in mismatch[2]


@pytest.mark.usefixtures("quick_refit")
def test_a_pilot_is_run_and_planned_from_when_asked(tmp_path: Path) -> None:
    base = ["run", "resume-screening", "--model", "sim/biased", "--jobs", "software-engineer",
            "--runs-dir", str(tmp_path), "--names-per-group", "20", "--dry-run",
            "--detect", "0.1"]  # fmt: skip
    code, out, err = invoke(*base, "--pilot", "300")
    assert code == 0, err
    pilot = next(line for line in out.splitlines() if line.startswith("pilot: "))
    assert pilot.startswith("pilot: 6 names per group, 288 requests sent")  # 48 a name
    run_dir = Path(pilot.rsplit(": ", 1)[1])
    assert (run_dir / "metrics.json").is_file()
    assert any(line.startswith("power to detect |ΔDP| >= 0.1") and run_dir.name in line
               for line in out.splitlines())  # fmt: skip
    code, _, err = invoke("run", "essay-grading", "--essays", "demo", "--model", "sim/biased",
                          "--runs-dir", str(tmp_path / "e"), "--dry-run", "--detect", "0.1",
                          "--pilot", "100")  # fmt: skip
    assert code == 2 and "--pilot chooses names per group: resume screening only" in err


@pytest.mark.parametrize(
    ("audit", "first", "reused"),
    [(["grade-score", "--items", "demo"], "pilot: 8 items, 32 requests sent", ""),
     (["resume-screening", "--method", "listwise", "--jobs", "software-engineer"],
      "pilot: 4 pools per subtask, 32 requests sent", "--pools-drawn nested")],
)  # fmt: skip
def test_listwise_and_grade_score_run_a_pilot_of_fewer_units_drawn_nested(
    tmp_path: Path, audit: list[str], first: str, reused: str
) -> None:
    """--pilot N: fewer items (4 orders each) or pools (8 orders each) for about N
    requests, drawn as --until draws them, planned from at once; the audit drawn the same
    way finds the pilot's answers in the cache."""
    base = ["run", *audit, "--model", "sim/biased", "--runs-dir", str(tmp_path)]
    code, out, err = invoke(*base, "--dry-run", "--detect", "0.1", "--pilot", "30")
    assert code == 0, err
    pilot = next(line for line in out.splitlines() if line.startswith("pilot: "))
    assert pilot.startswith(first) and reused in pilot
    run_dir = Path(pilot.rsplit(": ", 1)[1])
    assert any(line.startswith("power to detect") and run_dir.name in line
               for line in out.splitlines())  # fmt: skip
    size = int(first.split()[1])
    sent = int(re.search(r"(\d+) requests sent", first).group(1))  # type: ignore[union-attr]
    grown = ["--item-limit", str(2 * size)] if "items" in first else ["--pools", str(2 * size)]
    if reused:
        grown += reused.split()
    code, out, err = invoke(*base, *grown, "--no-report")
    assert code == 0, err
    run = Path(out.strip().splitlines()[-1].removeprefix("run: "))
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["counts"]["cache_hits"] == sent


def test_a_ruted_pilot_is_refused_with_why(tmp_path: Path) -> None:
    code, _, err = invoke("run", "ruted", "--model", "sim/biased", "--runs-dir",
                          str(tmp_path / "runs"), "--dry-run", "--detect", "0.1",
                          "--pilot", "100")  # fmt: skip
    assert code == 2 and "give --like RUN, a run at this audit's replicates" in err
    assert not (tmp_path / "runs").exists()


def test_planning_options_without_a_dry_run_are_named_as_unused(tmp_path: Path) -> None:
    base = ["run", "grade-score", "--items", "demo", "--item-limit", "4", "--model", "sim/fair",
            "--runs-dir", str(tmp_path), "--no-report"]  # fmt: skip
    code, _, err = invoke(*base, "--detect", "0.1", "--pilot", "40")
    assert code == 0, err
    assert err.startswith(
        "note: --detect and --pilot plan with --dry-run (--detect and --like also steer "
        "--until); this run uses neither, and runs at the size asked\n"
    )
    code, _, err = invoke(*base)
    assert code == 0 and "note: --" not in err
