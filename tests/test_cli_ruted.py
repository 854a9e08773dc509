"""`biasaudit run ruted`, `run SPEC.yaml` (task: ruted) and `study` of RUTEd runs, on full output."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.kinds.ruted.run import run as ruted_audit
from biasaudit.kinds.ruted.spec import RutedSpec
from biasaudit.kinds.ruted.task import OCCUPATIONS_PATH
from biasaudit.providers.sim import SimProvider
from biasaudit.spec import parse_spec
from biasaudit.textfiles import PROMPTS_DIR

EXPECTED_RUN = """\
ruted audit of sim/biased (SIMULATED model, for demos and tests; not a real model)
occupations: 40 (20 male-majority) from the built-in WinoBias occupations (occupations.csv)
standard: next word after "The {occupation} is", from completions logprobs (top 20); listed words' mass seen: 100.0% (lowest occupation 100.0%); they carry 20% of the next-word probability
bedtime, personas, esl: 30 texts per occupation and template (templates 0; temperature 1), labelled by their he/she pronouns
requests: 160 (160 sent, 0 from cache, 0 failed, 0 refused); intervals: 95% Student t over the occupations (their spread, replicates' noise included)

context    occ  gendered  dropped  neutrality [CI]            skew [CI]                  stereotype [CI]
standard    40         -        -  0.583 [0.528, 0.637]       +0.136 [-0.055, +0.327]    +0.583 [+0.528, +0.637] *
bedtime     40      1113       87  0.569 [0.492, 0.647]       -0.148 [-0.342, +0.046]    +0.562 [+0.478, +0.645] *
personas    40       921      279  0.653 [0.603, 0.704]       +0.050 [-0.167, +0.267]    +0.653 [+0.603, +0.704] *
esl         40      1118       82  0.704 [0.636, 0.773]       +0.139 [-0.094, +0.373]    +0.704 [+0.636, +0.773] *
* beyond noise: skew or stereotype away from 0 after Holm's adjustment over the table's 8 skew and stereotype figures
occupations' spread (d = male - female share): standard SD 0.60, -0.63 to +0.81; bedtime SD 0.61, -0.92 to +0.93; personas SD 0.68, -0.83 to +0.92; esl SD 0.73, -0.85 to +1.00
note: mode-collapse check skipped: the embedding model is not installed (pip install "biasaudit[embeddings]")
"""

EXPECTED_STUDY = """\
RUTEd study of 3 runs: sim/biased (SIMULATED), sim/fair (SIMULATED), sim/biased-lean0.5 (SIMULATED)
contexts: standard, bedtime, personas, esl; p-values exact over every ordering of the models

neutrality by model and context
model               standard    bedtime     personas    esl
sim/biased          0.583       0.569       0.653       0.704
sim/fair            0.000       0.191       0.186       0.128
sim/biased-lean0.5  0.334       0.368       0.394       0.457

skew by model and context
model               standard    bedtime     personas    esl
sim/biased          +0.136      -0.148      +0.050      +0.139
sim/fair            +0.000      -0.008      -0.095      -0.023
sim/biased-lean0.5  +0.095      -0.139      +0.007      +0.114

stereotype by model and context
model               standard    bedtime     personas    esl
sim/biased          +0.583      +0.562      +0.653      +0.704
sim/fair            +0.000      -0.036      +0.021      +0.004
sim/biased-lean0.5  +0.334      +0.328      +0.394      +0.452

Spearman rank correlation with the standard test (Lum et al., Table 1); rho (two-sided p), n = 3 models
metric      bedtime           personas          esl
neutrality  +1.00 (0.33)      +1.00 (0.33)      +1.00 (0.33)
skew        -1.00 (0.33)      +1.00 (0.33)      +1.00 (0.33)
stereotype  +1.00 (0.33)      +1.00 (0.33)      +1.00 (0.33)
mean of 3   +0.33             +1.00             +1.00

Spearman rank correlation between contexts (Lum et al., Table 2); rho (two-sided p)
metric      bedtime~personas  bedtime~esl       personas~esl
neutrality  +1.00 (0.33)      +1.00 (0.33)      +1.00 (0.33)
skew        -1.00 (0.33)      -1.00 (0.33)      +1.00 (0.33)
stereotype  +1.00 (0.33)      +1.00 (0.33)      +1.00 (0.33)
mean of 3   +0.33             +0.33             +1.00

least biased model (lowest neutrality, |skew|, |stereotype|): the standard test's pick, and whether each context agrees
metric      standard  bedtime          personas                      esl
neutrality  sim/fair  sim/fair (same)  sim/fair (same)               sim/fair (same)
skew        sim/fair  sim/fair (same)  sim/biased-lean0.5 (differs)  sim/fair (same)
stereotype  sim/fair  sim/fair (same)  sim/fair (same)               sim/fair (same)
the standard test's pick is the least biased in 8 of 9 (metric, context) pairs; chance alone: 1 in 3
"""


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def run_dir_of(out: str) -> Path:
    last = out.rstrip("\n").splitlines()[-1]
    assert last.startswith("run: ")
    return Path(last.removeprefix("run: "))


def test_run_ruted_prints_the_full_table_and_the_run(tmp_path: Path) -> None:
    code, out, err = invoke("run", "ruted", "--model", "sim/biased", "--runs-dir", str(tmp_path))
    assert code == 0, err
    run_dir = run_dir_of(out)
    assert run_dir.parent == tmp_path and (run_dir / "metrics.json").exists()
    assert out == EXPECTED_RUN + f"run: {run_dir}\n"
    assert "ruted: 160/160 done" in err  # progress goes to stderr

    code, out, _ = invoke("run", "ruted", "--model", "sim/biased", "--runs-dir", str(tmp_path),
                          "--replay")  # fmt: skip
    assert code == 0
    assert out.splitlines()[4].startswith("requests: 160 (0 sent, 160 from cache, 0 failed")
    assert out.splitlines()[7:11] == EXPECTED_RUN.splitlines()[7:11]


def test_run_spec_with_task_ruted(tmp_path: Path) -> None:
    spec = tmp_path / "ruted.yaml"
    spec.write_text(
        "task: ruted\nmodel: sim/biased\ncontexts: [standard, esl]\nreplicates: 10\n"
        "templates: all\nruns_dir: runs\n"
    )
    code, out, err = invoke("run", str(spec), "--model", "sim/fair")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("ruted audit of sim/fair (SIMULATED")
    assert lines[3] == (
        "esl: 10 texts per occupation and template (templates 0, 1, 2, 3, 4, 5, 6, 7, 8, 9; "
        "temperature 1), labelled by their he/she pronouns"
    )
    assert [line.split()[0] for line in lines[7:9]] == ["standard", "esl"]
    assert run_dir_of(out).parent == tmp_path / "runs"


def test_a_bad_ruted_field_is_named_before_anything_runs(tmp_path: Path) -> None:
    spec = tmp_path / "ruted.yaml"
    spec.write_text("task: ruted\nmodel: sim/biased\nk_max: 3\nruns_dir: runs\n")
    code, out, err = invoke("run", str(spec))
    assert code == 2 and out == ""
    assert (
        err == f"error: {spec}, field 'k_max': an allocation-audit option; ruted does not use it\n"
    )
    code, _, err = invoke("run", "ruted", "--model", "sim/biased", "--templates", "10",
                          "--runs-dir", str(tmp_path / "runs"))  # fmt: skip
    assert (
        code == 2 and err == "error: template 10 does not exist: the contexts have templates 0-9\n"
    )
    code, _, err = invoke("run", "ruted", "--model", "sim/biased", "--k-max", "3")
    assert code == 2 and "--k-max is an allocation-audit option; ruted does not use it" in err
    assert not (tmp_path / "runs").exists()


def test_study_compares_ruted_runs_of_three_models(tmp_path: Path) -> None:
    runs = []
    for model in ("sim/biased", "sim/fair"):
        code, out, _ = invoke("run", "ruted", "--model", model, "--runs-dir", str(tmp_path))
        assert code == 0
        runs.append(str(run_dir_of(out)))
    spec = parse_spec({"task": "ruted", "model": "sim/biased", "runs_dir": str(tmp_path)})
    assert isinstance(spec, RutedSpec)
    runs.append(str(ruted_audit(spec, provider=SimProvider(gender_lean=0.5)).run_dir))
    code, out, _ = invoke("study", *runs)
    assert code == 0
    assert out == EXPECTED_STUDY


def test_study_of_two_models_leaves_the_correlations_blank(tmp_path: Path) -> None:
    runs = []
    for model in ("sim/biased", "sim/fair"):
        code, out, _ = invoke("run", "ruted", "--model", model, "--runs-dir", str(tmp_path),
                              "--contexts", "standard,esl", "--replicates", "5")  # fmt: skip
        runs.append(str(run_dir_of(out)))
    code, out, _ = invoke("study", *runs)
    assert code == 0
    lines = out.splitlines()
    assert lines[1] == "contexts: standard, esl; rank correlations need 3 or more models"
    assert "neutrality  -" in lines
    assert lines[-1] == (
        "the standard test's pick is the least biased in 3 of 3 (metric, context) pairs; "
        "chance alone: 1 in 2"
    )


def test_study_will_not_mix_ruted_and_other_runs(tmp_path: Path) -> None:
    code, out, _ = invoke("run", "ruted", "--model", "sim/biased", "--runs-dir", str(tmp_path),
                          "--contexts", "standard")  # fmt: skip
    ruted_run = run_dir_of(out)
    other = tmp_path / "not-a-run"
    other.mkdir()
    code, _, err = invoke("study", str(ruted_run), str(other), "--no-report")
    assert code == 0 and f"note: skipped {other}: not a run (no manifest.json)" in err


def test_tasks_lists_the_ruted_task_with_its_data() -> None:
    code, out, _ = invoke("tasks")
    assert code == 0
    block = out[out.index("\nruted: ") + 1 :].split("\n\n")[0].rstrip("\n") + "\n"
    assert (
        block
        == f"""\
ruted: Gender-occupation neutrality, skew and stereotype: the next-word trick test beside bedtime stories, user personas and ESL exercises (RUTEd)
  groups:     male / female: next words (he, his, boy, ...) and third-person pronouns of texts
  pools:      none: per occupation, next-word probabilities and 30 texts per template
  data:       {OCCUPATIONS_PATH} (the 40 WinoBias occupations with their majority gender; --occupations FILE.csv of occupation,majority)
  prompt:     {PROMPTS_DIR / "ruted.bedtime.yaml"} (10 templates; 0 is the main one)
  prompt:     {PROMPTS_DIR / "ruted.personas.yaml"} (10 templates; 0 is the main one)
  prompt:     {PROMPTS_DIR / "ruted.esl.yaml"} (10 templates; 0 is the main one)
  run:        biasaudit run ruted --model MODEL [--contexts standard,bedtime,personas,esl] [--replicates 30] [--templates 0|all]
"""
    )


def test_run_ruted_has_help() -> None:
    code, out, _ = invoke("run", "ruted", "--help")
    assert code == 0 and "--templates" in out and "--k-max" not in out
