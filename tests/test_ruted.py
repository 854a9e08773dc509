"""RUTEd audits end to end on the offline sim model: the planted gender lean must be recovered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from biasaudit.errors import UsageError
from biasaudit.kinds.ruted.run import RutedResult, run as ruted_audit
from biasaudit.kinds.ruted.sim import planted_male_probability
from biasaudit.kinds.ruted.spec import RutedSpec
from biasaudit.kinds.ruted.task import (
    OCCUPATIONS_PATH,
    build_ruted_task,
    indefinite_article,
    read_occupations,
)
from biasaudit.providers import Capabilities, ModelRequest, ModelResponse
from biasaudit.providers.sim import SimProvider
from biasaudit.spec import parse_spec
from biasaudit.store.runs import read_manifest, read_responses

OCCUPATIONS = read_occupations(OCCUPATIONS_PATH)
CONTEXTS = ("standard", "bedtime", "personas", "esl")


def spec(runs_dir: Path, **fields: Any) -> RutedSpec:
    found = parse_spec(
        {"task": "ruted", "model": "sim/biased", "runs_dir": str(runs_dir), **fields}
    )
    assert isinstance(found, RutedSpec)
    return found


def truth(context: str, lean: float = 1.0) -> dict[str, float]:
    """The planted metrics, worked from the planted probabilities by hand."""
    d = np.array([2 * planted_male_probability(o.name, context, lean) - 1 for o in OCCUPATIONS])
    sign = np.array([1.0 if o.majority == "male" else -1.0 for o in OCCUPATIONS])
    return {"neutrality": np.abs(d).mean(), "skew": d.mean(), "stereotype": (sign * d).mean()}


@pytest.fixture(scope="module")
def biased(tmp_path_factory: pytest.TempPathFactory) -> RutedResult:
    return ruted_audit(spec(tmp_path_factory.mktemp("runs")))


@pytest.mark.parametrize("context", CONTEXTS[1:])
@pytest.mark.parametrize("metric", ["neutrality", "skew", "stereotype"])
def test_planted_values_lie_within_the_reported_intervals(
    biased: RutedResult, context: str, metric: str
) -> None:
    figures = biased.metrics.contexts[context]
    low, high = getattr(figures, f"{metric}_ci")
    assert low <= truth(context)[metric] <= high
    # Over the occupations (the default): scipy's t-interval of the per-occupation values.
    assert (low, high) == pytest.approx(_t_interval(biased, context, metric))


def _t_interval(run: RutedResult, context: str, metric: str) -> tuple[float, float]:
    from scipy import stats

    table = pd.read_csv(run.run_dir / "occupations.csv")
    rows = table[table["context"] == context]
    values = {"neutrality": rows["d"].abs(), "skew": rows["d"],
              "stereotype": rows["stereotypical"]}[metric].to_numpy()  # fmt: skip
    low, high = stats.t.interval(0.95, values.size - 1, loc=values.mean(),
                                 scale=stats.sem(values))  # fmt: skip
    floor = 0.0 if metric == "neutrality" else -1.0
    return max(low, floor), min(high, 1.0)


def test_the_standard_test_reads_the_planted_probabilities_exactly(biased: RutedResult) -> None:
    standard = biased.metrics.contexts["standard"]
    assert standard.source == "completions logprobs" and standard.top_logprobs == 20
    for metric, value in truth("standard").items():
        assert getattr(standard, metric) == pytest.approx(value, abs=1e-9)
        # The occupations' spread is the error, though each share is read exactly.
        found = getattr(standard, f"{metric}_ci")
        assert found == pytest.approx(_t_interval(biased, "standard", metric))
        assert found[1] - found[0] > 0.05
    assert standard.coverage == pytest.approx(1.0) and standard.partly_covered == 0
    assert standard.dropped == 0 and standard.excluded == []
    assert standard.d_sd is not None and standard.d_range is not None
    assert standard.listed_mass is not None and 0 < standard.listed_mass <= 1


def test_under_the_papers_conventions_the_intervals_hold_the_occupations_fixed(
    tmp_path: Path,
) -> None:
    paper = ruted_audit(spec(tmp_path, conventions="paper", contexts="standard,bedtime"))
    assert paper.metrics.intervals_over == "replicates"
    standard, bedtime = paper.metrics.contexts["standard"], paper.metrics.contexts["bedtime"]
    for metric, value in truth("standard").items():
        assert getattr(standard, f"{metric}_ci") == pytest.approx([value, value], abs=1e-9)
        low, high = getattr(bedtime, f"{metric}_ci")
        assert high - low < 0.12  # 40 occupations x 30 replicates pin the fixed set down


def test_run_directory_holds_every_artifact(biased: RutedResult) -> None:
    run_dir = biased.run_dir
    assert {p.name for p in run_dir.iterdir()} == {
        "manifest.json", "prompts.jsonl.gz", "responses.jsonl", "spec.json", "metrics.json", "occupations.csv",
        "replicates.csv",
    }  # fmt: skip
    manifest = read_manifest(run_dir)
    assert manifest.kind == "ruted" and manifest.status == "completed" and manifest.simulated
    assert manifest.counts.requests == 40 * 4 and biased.exit_code == 0  # n = 30 per request
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["task"] == "ruted" and metrics["simulated"] is True
    for context in CONTEXTS:
        figures = metrics["contexts"][context]
        for metric in ("neutrality", "skew", "stereotype"):
            assert isinstance(figures[metric], float) and len(figures[f"{metric}_ci"]) == 2
        assert isinstance(figures["dropped"], int)
    assert "k_max" not in json.loads((run_dir / "spec.json").read_text())
    records = read_responses(run_dir)
    assert {r.probe for r in records} == {"nextword", "generation"}


def test_dropped_replicates_are_counted_per_context(biased: RutedResult) -> None:
    replicates = pd.read_csv(biased.run_dir / "replicates.csv")
    assert len(replicates) == 3 * 40 * 30
    for context in CONTEXTS[1:]:
        rows = replicates[replicates["context"] == context]
        figures = biased.metrics.contexts[context]
        verdicts = rows["verdict"].value_counts()
        assert figures.dropped_reasons == {
            "no_pronouns": verdicts.get("none", 0), "tied": verdicts.get("tie", 0)
        }  # fmt: skip
        assert figures.dropped == verdicts.get("none", 0) + verdicts.get("tie", 0) > 0
        assert figures.gendered + figures.dropped == figures.replicates == 1200


def test_occupations_csv_breaks_each_context_down(biased: RutedResult) -> None:
    table = pd.read_csv(biased.run_dir / "occupations.csv")
    assert len(table) == 4 * 40
    esl = table[table["context"] == "esl"].set_index("occupation")
    assert list(esl.index) == [o.name for o in OCCUPATIONS]
    assert (esl["n"] == esl["male"] + esl["female"]).all()
    assert esl["p_male"].to_numpy() == pytest.approx((esl["male"] / esl["n"]).to_numpy())
    assert esl.loc["nurse", "stereotypical"] == pytest.approx(-esl.loc["nurse", "d"])
    standard = table[table["context"] == "standard"].set_index("occupation")
    planted = planted_male_probability("CEO", "standard")
    assert standard.loc["CEO", "p_male"] == pytest.approx(planted)


def test_a_fair_model_shows_no_skew_and_no_stereotype(tmp_path: Path) -> None:
    result = ruted_audit(spec(tmp_path, model="sim/fair"))
    standard = result.metrics.contexts["standard"]
    for metric in ("neutrality", "skew", "stereotype"):
        assert getattr(standard, metric) == pytest.approx(0.0, abs=1e-12)
    for context in CONTEXTS[1:]:
        for metric in ("skew", "stereotype"):
            low, high = getattr(result.metrics.contexts[context], f"{metric}_ci")
            standard_error = (high - low) / (2 * 1.96)
            # Six intervals: one may miss 0 by chance; none by more than sampling noise allows.
            assert abs((low + high) / 2) < 4 * standard_error, (context, metric)
    # Sampling noise alone gives a neutral model some neutrality; the run says so.
    assert any("sampling noise alone" in note for note in result.metrics.notes)


def test_without_logprobs_the_standard_test_samples_first_words(tmp_path: Path) -> None:
    result = ruted_audit(
        spec(tmp_path, contexts="standard", replicates=120), provider=SimProvider(logprobs=False)
    )
    standard = result.metrics.contexts["standard"]
    assert standard.source == "sampled next words" and standard.replicates == 40 * 120
    assert standard.dropped == standard.dropped_reasons["no_listed_word"] > 0
    for metric, value in truth("standard").items():
        low, high = getattr(standard, f"{metric}_ci")
        assert low < high and low <= value <= high, metric
    assert "estimated from 120 sampled first words" in " ".join(result.metrics.notes)


def test_fewer_alternatives_report_their_coverage_and_bounds(tmp_path: Path) -> None:
    standard = ruted_audit(spec(tmp_path, contexts="standard", top_logprobs=10)).metrics.contexts[
        "standard"
    ]
    assert standard.partly_covered == 40 and 0 < (standard.coverage or 0) < 1
    for metric in ("neutrality", "skew", "stereotype"):
        low, high = getattr(standard, f"{metric}_bounds")
        assert low <= getattr(standard, metric) <= high and high - low > 0.1


def test_all_templates_run_and_are_reported_one_by_one(tmp_path: Path) -> None:
    result = ruted_audit(spec(tmp_path, contexts="esl", templates="all", replicates=3))
    esl = result.metrics.contexts["esl"]
    assert result.metrics.templates == list(range(10)) and esl.templates == list(range(10))
    assert esl.replicates == 40 * 10 * 3 and sorted(esl.by_template, key=int) == [
        str(t) for t in range(10)
    ]
    assert sum(t.gendered for t in esl.by_template.values()) == esl.gendered
    assert result.manifest.counts.requests == 400


class CountingSim(SimProvider):
    """The sim model, counting what reaches it; optionally an endpoint without ``n``."""

    def __init__(self, *, n: bool = True) -> None:
        super().__init__()
        self.capabilities = Capabilities(max_top_logprobs=20, n=n)
        self.calls = 0

    def answer(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        return super().answer(request)


def test_replay_from_the_cache_sends_nothing(tmp_path: Path) -> None:
    provider = CountingSim()
    first = ruted_audit(spec(tmp_path), provider=provider)
    assert provider.calls == 160
    replay = ruted_audit(spec(tmp_path, replay=True), provider=provider)
    assert provider.calls == 160  # nothing new reached the model
    assert replay.metrics.requests.sent == 0 and replay.metrics.requests.cache_hits == 160
    assert replay.metrics.contexts == first.metrics.contexts


def test_without_n_each_replicate_is_its_own_cached_request(tmp_path: Path) -> None:
    provider = CountingSim(n=False)
    result = ruted_audit(spec(tmp_path, contexts="personas", replicates=4), provider=provider)
    assert provider.calls == result.manifest.counts.requests == 40 * 4
    records = read_responses(result.run_dir)
    assert sorted({r.replicate for r in records}) == [0, 1, 2, 3]
    more = ruted_audit(spec(tmp_path, contexts="personas", replicates=6), provider=provider)
    assert more.metrics.requests.cache_hits == 40 * 4  # the first four replicates are reused
    assert provider.calls == 40 * 6


def test_your_own_occupations_file(tmp_path: Path) -> None:
    path = tmp_path / "occupations.csv"
    path.write_text("occupation,majority\nengineer,male\nnurse,female\npilot,male\n")
    result = ruted_audit(spec(tmp_path, occupations=str(path), contexts="standard,esl"))
    assert result.metrics.occupations == 3 and result.metrics.male_majority == 2
    assert result.metrics.contexts["esl"].occupations == 3
    task = build_ruted_task(spec(tmp_path, occupations=str(path)))
    engineer, nurse, _ = task.occupations
    assert "about an engineer." in task.messages("esl", 0, engineer)[-1]["content"]
    assert task.standard_text(nurse) == "The nurse is"


@pytest.mark.parametrize(
    ("occupation", "article"),
    [("accountant", "an"), ("nurse", "a"), ("CEO", "a"), ("HR officer", "an"),
     ("editor", "an"), ("construction worker", "a")],
)  # fmt: skip
def test_the_indefinite_article_follows_the_sound(occupation: str, article: str) -> None:
    assert indefinite_article(occupation) == article


def test_a_bad_occupations_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text("occupation,majority\nnurse,female\nnurse,female\n")
    with pytest.raises(UsageError, match="'nurse' appears more than once"):
        build_ruted_task(spec(tmp_path, occupations=str(path)))
    path.write_text("job,majority\nnurse,female\n")
    with pytest.raises(UsageError, match="no column 'occupation'"):
        build_ruted_task(spec(tmp_path, occupations=str(path)))
