"""Mitigation experiments (issue 54): an audit under each intervention, every unit asked
in every arm and paired; what each intervention removed beside what it cost; over the
wire to an OpenAI-compatible server, and on the sim whose planted bias an instruction
halves."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.experiments.runner import read_experiment, run_experiment
from biasaudit.interventions import (
    BUILT_IN,
    Intervention,
    apply_intervention,
    names_to_hide,
    parse_intervention,
)
from biasaudit.kinds.decisions.spec import DecisionsSpec
from biasaudit.reports.evidence import read_page_data
from tests.servers import Choice, OpenAIServer
from tests.servers.responders import content_text


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


# --- interventions ----------------------------------------------------------------------


def test_interventions_are_read_from_a_name_or_name_where_text() -> None:
    assert parse_intervention("illegal") == BUILT_IN["illegal"]
    calm = parse_intervention("calm=append:Please be fair.")
    assert (calm.name, calm.append, calm.system) == ("calm", "Please be fair.", None)
    assert parse_intervention("blind=names:initials").names == "initials"
    assert parse_intervention("sys=system:Be fair: always.").system == "Be fair: always."
    for bad, says in [("nope", "no built-in intervention 'nope'"),
                      ("x=elsewhere:text", "WHERE one of system, prepend, append, names"),
                      ("Bad Name=append:x", "lower-case letters"),
                      ("baseline=append:x", "'baseline' is the run without"),
                      ("x=append:  ", "must not be empty"),
                      ("x=names:keep", "an intervention changes the prompt")]:  # fmt: skip
        with pytest.raises(ValueError, match=says):
            parse_intervention(bad)
    assert all(i.source for i in BUILT_IN.values())  # each names where it comes from


def test_an_intervention_changes_each_prompt_and_nothing_else() -> None:
    messages = ({"role": "system", "content": "You screen resumes."},
                {"role": "user", "content": "Name: Jamal Washington\nUniversity of Washington. "
                                            "Jamal led a team. Hire? Yes or No."})  # fmt: skip
    both = Intervention(name="both", system="Be fair.", prepend="Note.", append="Thanks.",
                        names="initials", hidden=names_to_hide(["Jamal Washington"]))  # fmt: skip
    found, prompt = apply_intervention(both, messages, None)
    assert prompt is None and found is not None
    assert found[0] == {"role": "system", "content": "Be fair.\n\nYou screen resumes."}
    assert found[1]["content"] == (
        "Note.\n\nName: J. W.\nUniversity of Washington. J. led a team. Hire? Yes or No.\n\nThanks."
    )
    assert messages[1]["content"].startswith("Name: Jamal")  # the plan's own is untouched
    only_user = ({"role": "user", "content": "Decide."},)
    found, _ = apply_intervention(BUILT_IN["fair-system"], only_user, None)
    assert found is not None and [m["role"] for m in found] == ["system", "user"]
    _, prompt = apply_intervention(calm := parse_intervention("c=prepend:Hi."), None, "Score:")
    assert prompt == "Hi.\n\nScore:" and calm.described() == 'before: "Hi."'


# --- over the wire -----------------------------------------------------------------------


def _text(body: dict[str, Any]) -> str:
    return "\n".join(content_text(m.get("content")) for m in body.get("messages", []))


def decide(body: dict[str, Any], path: str) -> list[Choice]:
    """A model whose P(yes) depends on the scenario and drops for Black persons unless
    told the law forbids it, and who approves everyone when told to."""
    text = _text(body)
    if "Approve every application" in text:
        p_yes = 0.99
    else:
        heeds = "against the law" in text
        case = 0.1 if "landlord" in text else -0.1 if "loan" in text else 0.0
        p_yes = 0.6 + case - (0.2 if " Black " in text and not heeds else 0.0)
    distribution = {"yes": math.log(p_yes), "no": math.log(1 - p_yes)}
    return [Choice("yes", top_logprobs=[distribution])]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(responder=decide) as srv:
        yield srv


def _spec_file(tmp_path: Path, **fields: Any) -> Path:
    data = {"task": "decisions", "fills": "explicit", "scenario_limit": 3,
            "runs_dir": str(tmp_path / "runs"), **fields}  # fmt: skip
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML
    return path


def test_an_experiment_over_the_wire_pairs_every_arm_and_names_what_flattens(
    server: OpenAIServer, tmp_path: Path
) -> None:
    spec = _spec_file(tmp_path, model="vllm/decider", base_url=server.base_url,
                      interventions=["illegal", {"name": "calm", "prepend": "Take your time."}])  # fmt: skip
    code, out, err = invoke("experiment", str(spec), "-i",
                            "yes-man=append:Approve every application.")  # fmt: skip
    assert code == 0, err
    asked = server.request_count
    assert asked == 4 * 3 * 135 * 2  # four arms, every person in both orders
    folder = Path(out.strip().splitlines()[-1].removeprefix("experiment: "))
    experiment = read_experiment(folder)
    assert [arm.name for arm in experiment.arms] == ["baseline", "illegal", "calm", "yes-man"]
    black = {e.arm: e for e in experiment.effects if e.figure == "race:black"}
    # the planted gap, removed by the instruction the model heeds: paired over scenarios
    assert black["illegal"].baseline < -0.5
    assert black["illegal"].under == pytest.approx(0.0, abs=1e-9)
    assert black["illegal"].beyond_noise and "paired over 3 units" in black["illegal"].method
    assert not black["calm"].beyond_noise and black["calm"].change == pytest.approx(0.0)
    costs = {c.arm: c for c in experiment.costs}
    assert costs["yes-man"].flattens and costs["yes-man"].verdict.startswith("flattens")
    assert experiment.costs[-1].arm == "yes-man"  # ranked last, whatever it removed
    assert experiment.costs[0].arm == "illegal" and costs["illegal"].bias_removed > 0.5
    assert costs["yes-man"].level_change > 0.3 and costs["illegal"].tokens_under > costs[
        "illegal"].tokens_baseline  # fmt: skip
    assert "flattens the decisions" in out and "illegal" in out
    # every arm is an ordinary run beside the experiment's folder
    for arm in experiment.arms:
        run = experiment.run_dir(arm.name, folder)
        assert (run / "metrics.json").is_file() and (run / "report.html").is_file()
    for name in ("experiment.json", "report.html", "report.md", "evidence.html"):
        assert (folder / name).is_file(), name
    page = read_page_data(folder / "evidence.html")
    answers = next(v for v in page["views"] if v["id"] == "answers")
    assert len(answers["rows"]) == 3 * 135 * 2
    row = answers["rows"][0]
    assert "against the law" in row["prompt:illegal"] and "against the law" not in row[
        "prompt:baseline"]  # fmt: skip
    # how each answer was read, beside it: the figures rest on P(yes), not the text
    assert all(row[f"read:{arm.name}"].startswith("P(yes)=") for arm in experiment.arms)
    html = (folder / "report.html").read_text()
    assert "Interventions, best first" in html and "yes-man" in html
    assert "Each figure under each intervention" in html and page["prompts_verified"]
    # the second time, nothing is paid for again
    code, _, err = invoke("experiment", str(spec), "-i",
                          "yes-man=append:Approve every application.", "--no-report")  # fmt: skip
    assert code == 0, err
    assert server.request_count == asked
    code, _, err = invoke("report", str(folder))
    assert code == 0, err
    # replayed from the cache: every arm, every effect, nothing sent
    code, out, err = invoke("replay", str(folder), "--no-report")
    assert code == 0, err
    assert "every arm's metrics and every effect identical" in out
    assert server.request_count == asked
    replayed = read_experiment(Path(out.strip().splitlines()[-1].removeprefix("experiment: ")))
    assert replayed.replay_of == str(folder)
    assert [c.verdict for c in replayed.costs] == [c.verdict for c in experiment.costs]
    # as a DataFrame, one row per intervention and figure, its costs beside
    import biasaudit

    frame = biasaudit.load_experiment(folder)
    assert len(frame) == len(experiment.effects)
    assert set(frame["arm"]) == {"illegal", "calm", "yes-man"}
    assert frame.loc[frame["arm"] == "yes-man", "cost_flattens"].all()


def test_a_dry_run_names_each_arm_and_sends_nothing(server: OpenAIServer, tmp_path: Path) -> None:
    spec = _spec_file(tmp_path, model="vllm/decider", base_url=server.base_url)
    code, out, err = invoke("experiment", str(spec), "-i", "illegal", "-i", "fair-system",
                            "--dry-run")  # fmt: skip
    assert code == 0, err
    assert out.count("arm ") == 3 and "arm fair-system:" in out
    assert "experiment: 3 arms, 2430 requests to send" in out and "nothing was sent" in out
    assert server.request_count == 0 and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("fields", "flags", "says"),
    [
        ({"interventions": ["illegal", {"name": "x"}]}, [],
         "field 'interventions[1]'"),
        ({"interventions": "illegal"}, [], "field 'interventions': a list"),
        ({}, ["-i", "nope"], "--intervention, field 'interventions[0]': no built-in"),
        ({}, [], "an experiment needs at least one intervention"),
        ({}, ["-i", "illegal", "-i", "illegal"], "two interventions are named 'illegal'"),
        ({}, ["-i", "hide-names"], "hides names, and this audit shows the model none"),
        ({"until": "precise:0.1"}, ["-i", "illegal"], "drop 'until'"),
        ({"intervention": {"name": "x", "append": "y"}}, ["-i", "illegal"],
         "the spec already sets 'intervention'"),
    ],
)  # fmt: skip
def test_a_bad_experiment_exits_2_before_anything_is_sent(
    tmp_path: Path, fields: dict[str, Any], flags: list[str], says: str
) -> None:
    spec = _spec_file(tmp_path, model="sim/biased", **fields)
    code, _, err = invoke("experiment", str(spec), *flags)
    assert code == 2 and says in err, err
    assert not (tmp_path / "runs").exists()


# --- on the sim: a planted effect halved, a null intervention --------------------------------


def test_the_sims_halved_gap_is_recovered_and_a_null_intervention_shows_nothing(
    tmp_path: Path,
) -> None:
    spec = DecisionsSpec.model_validate({"model": "sim/biased", "fills": "explicit",
                                         "scenario_limit": 8,
                                         "runs_dir": str(tmp_path / "runs")})  # fmt: skip
    null = Intervention(name="null", prepend="The following is a request for a decision.")
    result = run_experiment(spec, [BUILT_IN["illegal"], null])
    black = {e.arm: e for e in result.experiment.effects if e.figure == "race:black"}
    # sim/biased: -0.5 on the logit for a Black person, half of it heeded (HEED)
    low, high = black["illegal"].ci
    assert low <= 0.25 <= high and black["illegal"].beyond_noise
    assert not any(e.beyond_noise for e in result.experiment.effects
                   if e.arm == "null" and e.bias)  # fmt: skip
    assert {c.arm: c for c in result.experiment.costs}["null"].verdict.startswith("no effect")


def test_hidden_names_remove_what_the_names_carried(tmp_path: Path) -> None:
    """Resume screening on the sim: its planted shift is carried by Black men's first
    names, so a blind review removes it (the paired δ of B_M goes to 0)."""
    from biasaudit.kinds.allocation.spec import ResumeScreeningSpec

    spec = ResumeScreeningSpec.model_validate({
        "model": "sim/biased", "names_per_group": 8, "jobs": ["software-engineer"],
        "runs_dir": str(tmp_path / "runs"),
    })  # fmt: skip
    result = run_experiment(spec, [BUILT_IN["hide-names"]], bootstrap=200)
    gap = next(e for e in result.experiment.effects if e.figure == "avg_gap" and e.group == "B_M")
    assert gap.baseline < -0.05 and gap.under == pytest.approx(0.0, abs=0.02)
    assert gap.beyond_noise and "paired" in gap.method
    cost = result.experiment.costs[0]
    assert cost.validity == "qualified" and cost.validity_baseline is not None
    assert not cost.flattens


def test_a_single_run_under_an_intervention_takes_it_from_a_spec_file(tmp_path: Path) -> None:
    """``intervention`` is a spec field (structured, so no flag): the command line says so,
    and a spec file runs one arm as an ordinary run, recorded in its spec.json."""
    code, _, err = invoke("run", "decisions", "--model", "sim/biased", "--intervention", "x")
    assert code == 2 and "a field of the decisions spec without a flag" in err
    spec = _spec_file(tmp_path, model="sim/biased", scenario_limit=2,
                      intervention={"name": "calm", "append": "Take your time."})  # fmt: skip
    code, out, err = invoke("run", str(spec), "--no-report")
    assert code == 0, err
    run = Path(out.strip().splitlines()[-1].removeprefix("run: "))
    recorded = json.loads((run / "spec.json").read_text())
    assert recorded["intervention"]["append"] == "Take your time."


def test_two_experiments_compare_arm_by_arm_and_effect_by_effect(tmp_path: Path) -> None:
    """A model update that stops heeding the instruction: every arm's audit compared as
    two runs are, and the instruction's effect found changed (the re-audit question)."""
    from biasaudit.providers.sim import SimProvider
    from biasaudit.reports.experiment import compare_experiments

    spec = DecisionsSpec.model_validate({"model": "sim/biased", "fills": "explicit",
                                         "scenario_limit": 8,
                                         "runs_dir": str(tmp_path / "runs")})  # fmt: skip
    before = run_experiment(spec, [BUILT_IN["illegal"]])
    after = run_experiment(spec, [BUILT_IN["illegal"]], provider=SimProvider(heed=0.0))
    found = compare_experiments(before.folder, after.folder)
    assert [name for name, _ in found.arms] == ["baseline", "illegal"]
    verdicts = dict((name, c.drift) for name, c in found.arms)
    assert verdicts == {"baseline": False, "illegal": True}
    changed = {(t.metric, t.group): t for t in found.effects if t.changed(found.alpha)}
    black = changed[("illegal: race:black", "explicit")]  # and the level it raised
    assert set(changed) <= {("illegal: race:black", "explicit"), ("illegal: p_yes", "explicit")}
    assert black.before == pytest.approx(0.25, abs=0.1) and abs(black.after) < 0.1
    code, out, err = invoke("compare", str(before.folder), str(after.folder))
    assert code == 0, err
    assert "interventions whose effect changed beyond noise" in out


def test_two_experiments_compared_write_a_report_that_rebuilds(tmp_path: Path) -> None:
    """compare of two experiments writes its folder: the record, the page and each arm's
    own comparison; --json the record alone; biasaudit report rebuilds the page."""
    spec = DecisionsSpec.model_validate({"model": "sim/biased", "fills": "explicit",
                                         "scenario_limit": 3,
                                         "runs_dir": str(tmp_path / "runs")})  # fmt: skip
    a = run_experiment(spec, [BUILT_IN["illegal"]], bootstrap=200)
    b = run_experiment(spec, [BUILT_IN["illegal"]], bootstrap=200)
    out_dir, record = tmp_path / "cmp", tmp_path / "cmp.json"
    code, out, err = invoke("compare", str(a.folder), str(b.folder), "--report-dir",
                            str(out_dir), "--json", str(record))  # fmt: skip
    assert code == 0, err
    assert "verdict: no change" in out
    data = json.loads(record.read_text())
    assert data["verdict"] == "no change" and not data["drift"]
    assert [arm["name"] for arm in data["arms"]] == ["baseline", "illegal"]
    assert data["arms"][1]["comparison"]["kind"] == "decisions"
    assert json.loads((out_dir / "experiment-compare.json").read_text()) == data
    for page in ("report.html", "report.md", "arm-baseline/report.html",
                 "arm-illegal/report.html"):  # fmt: skip
        assert (out_dir / page).is_file(), page
    text = (out_dir / "report.md").read_text()
    assert "Verdict: no change." in text and "arm-illegal/report.html" in text
    (out_dir / "report.md").unlink()
    code, _, err = invoke("report", str(out_dir))
    assert code == 0, err
    assert "Verdict: no change." in (out_dir / "report.md").read_text()
    code, _, err = invoke("compare", str(a.folder), str(b.folder), "--no-report")
    assert code == 0 and "report:" not in err
    # the record has a JSON Schema (biasaudit schema experiment-compare); a damaged one is
    # named, exit 2, no traceback
    import jsonschema

    from biasaudit.kinds.schemas import json_schema

    jsonschema.validate(data, json_schema("experiment-compare"))
    (out_dir / "experiment-compare.json").write_text('{"arms": 3}')
    code, _, err = invoke("report", str(out_dir))
    assert code == 2 and "experiment-compare.json" in err and "Traceback" not in err


def test_an_experiment_reaudits_on_a_schedule_and_names_an_instruction_that_stopped_working(
    tmp_path: Path,
) -> None:
    """reaudit of a spec that lists interventions: the first run has no baseline; the
    next compares with it (the sim answers alike: no change, exit 0 under --fail-on
    any); a model update that stops heeding the instruction is drift (exit 3); a spec
    with other interventions is not compared with these."""
    from biasaudit.providers.sim import SimProvider
    from biasaudit.reports.history import reaudit_experiment

    spec = _spec_file(tmp_path, model="sim/biased", scenario_limit=8,
                      interventions=["illegal"])  # fmt: skip
    code, out, err = invoke("reaudit", str(spec), "--no-report")
    assert code == 0, err
    assert "baseline: none" in out
    first = Path(out.strip().splitlines()[-1].removeprefix("experiment: "))
    code, out, err = invoke("reaudit", str(spec), "--fail-on", "any")
    assert code == 0, err
    assert f"baseline: {first}" in out and "verdict: no change" in out
    second = Path(out.strip().splitlines()[-1].removeprefix("experiment: "))
    assert (second / "compare" / "experiment-compare.json").is_file()
    assert (second / "compare" / "report.html").is_file()
    assert "compare/report.html" in (second / "report.md").read_text()
    code, out, err = invoke("history", "--spec", str(spec))
    assert code == 0, err
    listed = [line for line in out.splitlines() if " experiment " in line]
    assert len(listed) == 2 and first.name in listed[0] and second.name in listed[1]
    code, _, err = invoke("run", str(spec))  # a run is not an experiment: said so, exit 2
    assert code == 2 and "biasaudit experiment SPEC" in err
    found = reaudit_experiment(spec, fail_on="drift", provider=SimProvider(heed=0.0))
    assert found.baseline == second and found.comparison is not None
    assert found.alert and found.exit_code == 3
    assert "the effect of illegal" in found.comparison.verdict
    other = _spec_file(tmp_path, model="sim/biased", scenario_limit=8,
                       interventions=["ignore-demographics"])  # fmt: skip
    code, out, err = invoke("reaudit", str(other), "--no-report")
    assert code == 0 and "baseline: none" in out
    bad = _spec_file(tmp_path, model="sim/biased", interventions=["no-such-one"])
    before = sorted((tmp_path / "runs").iterdir())
    code, _, err = invoke("reaudit", str(bad))
    assert code == 2 and "interventions[0]" in err
    assert sorted((tmp_path / "runs").iterdir()) == before


def test_a_score_whose_fair_value_is_one_reads_the_right_way() -> None:
    """Grade Score's scores of consistency are fair at 1, not 0: a fall is bias added."""
    from biasaudit.experiments.analysis import _bias_removed, _verdict
    from biasaudit.kinds.registry import audit_kind
    from biasaudit.store.experiments import Cost, Effect

    assert audit_kind("grade-score").fair_values["grade_score"] == 1.0
    fell = Effect(arm="x", figure="grade_score", baseline=0.9, under=0.6, change=-0.3,
                  ci=(-0.4, -0.2), p=0.001, p_adjusted=0.001, beyond_noise=True, method="m",
                  fair=1.0)  # fmt: skip
    rose = fell.model_copy(update={"under": 0.95, "change": 0.05})
    assert _verdict(Cost(arm="x", verdict=""), [fell], False).startswith("adds bias")
    assert _verdict(Cost(arm="x", verdict=""), [rose], False).startswith("removes bias")
    assert _bias_removed([fell]) == pytest.approx(1 - 0.4 / 0.1)
    assert _bias_removed([rose]) == pytest.approx(0.5)


def test_every_built_in_intervention_is_named_where_a_reader_chooses_one() -> None:
    """The command's help and the docs' table list the built-ins by hand (the help is
    built before anything but click loads): each names every one of BUILT_IN."""
    help_text = " ".join(invoke("experiment", "--help")[1].split())
    page = (Path(__file__).parent.parent / "docs" / "how-to" / "mitigation.md").read_text()
    for name in BUILT_IN:
        assert name in help_text.replace("- ", "-"), name
        assert f"| `{name}` |" in page, name
