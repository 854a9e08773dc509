"""`biasaudit run grade-score` and `biasaudit study` of Grade Score runs, through CliRunner on full output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def run_dir_of(out: str) -> Path:
    last = out.rstrip("\n").splitlines()[-1]
    assert last.startswith("run: ")
    return Path(last.removeprefix("run: "))


EXPECTED_RUN = """\
grade-score audit of sim/biased (SIMULATED model, for demos and tests; not a real model)
judge: prompt 1 (select, then explain); temperature 0.3, up to 200 tokens
items: demo: 16 items x 4 options; 4 cyclic orders x 2 replicates = 128 requests
requests: 128 (128 sent, 0 from cache, 0 failed, 0 refused); answers: 128 usable, 0 unparsed; items scored: 16

score          mean  95% interval (Student t over items; '-': too few)
Grade Score   0.885  [0.831, 0.938]
entropy       0.912  [0.857, 0.968]
choice        0.859  [0.806, 0.913]

slot chosen   1: 39.1% [28.5%, 50.5%] *   2: 15.6% [8.6%, 25.2%]   3: 24.2% [15.4%, 34.9%]   4: 21.1% [12.9%, 31.4%]   (no bias: 25.0% each; is a slot preferred? p = 0.0025, exact binomial per slot, intervals simultaneous over the 4 slots; n = 128 answers; * beyond noise)
preferred option (people's choice) chosen in 85.9% [80.6%, 91.3%] of answers, and most chosen in 100.0% of 16 items

per item (slots: answers naming slot 1..n, slot 1 shown first; options by index)
item                   grade entropy  choice unparsed  slots      most chosen  preferred
sky-blue               0.912   0.953   0.875        0  3 1 2 2    1            1
capital-australia      0.912   0.953   0.875        0  3 1 2 2    3            3
reverse-list           1.000   1.000   1.000        0  2 2 2 2    0            0
decline-meeting        0.912   0.953   0.875        0  3 1 2 2    2            2
gas-smell              0.912   0.953   0.875        0  3 1 2 2    3            3
km-to-miles            0.912   0.953   0.875        0  3 2 2 1    0            0
good-morning-spanish   1.000   1.000   1.000        0  2 2 2 2    1            1
leap-years             0.637   0.649   0.625        0  5 0 2 1    2            2
start-running          0.912   0.953   0.875        0  3 2 2 1    1            1
http-404               0.808   0.875   0.750        0  4 2 1 1    3            3
minutes-in-day         1.000   1.000   1.000        0  2 2 2 2    0            0
fix-grammar            0.912   0.953   0.875        0  3 1 2 2    1            1
budget-teen            0.912   0.953   0.875        0  3 1 2 2    1            1
haiku-autumn           0.750   0.750   0.750        0  4 0 2 2    1            1
boil-egg               0.912   0.953   0.875        0  3 2 2 1    2            2
password-advice        0.750   0.750   0.750        0  4 0 2 2    3            3
"""


def test_run_grade_score_prints_the_full_table_and_the_run(tmp_path: Path) -> None:
    code, out, err = invoke(
        "run", "grade-score", "--items", "demo", "--model", "sim/biased", "--replicates", "2",
        "--runs-dir", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    run_dir = run_dir_of(out)
    assert run_dir.parent == tmp_path and (run_dir / "items.csv").exists()
    assert out == EXPECTED_RUN + f"run: {run_dir}\n"
    assert "grade-score: 128/128 done" in err  # progress goes to stderr


def test_a_second_run_and_a_replay_are_served_from_the_cache(tmp_path: Path) -> None:
    args = [
        "run",
        "grade-score",
        "--items",
        "demo",
        "--model",
        "sim/fair",
        "--runs-dir",
        str(tmp_path),
    ]
    code, first, _ = invoke(*args)
    assert code == 0
    code, replayed, _ = invoke(*args, "--replay")
    assert code == 0
    assert replayed.splitlines()[3] == (
        "requests: 64 (0 sent, 64 from cache, 0 failed, 0 refused); answers: 64 usable, "
        "0 unparsed; items scored: 16"
    )
    assert replayed.splitlines()[4:-1] == first.splitlines()[4:-1]


def test_replay_without_cached_answers_fails_clearly(tmp_path: Path) -> None:
    code, out, err = invoke(
        "run", "grade-score", "--items", "demo", "--model", "sim/fair", "--replay",
        "--runs-dir", str(tmp_path),
    )  # fmt: skip
    assert code == 2 and out == ""
    assert f"replay: no cache at {tmp_path / 'cache.sqlite'}" in err
    assert list(tmp_path.iterdir()) == []  # nothing created


EXPECTED_SPEC_RUN_HEAD = """\
grade-score audit of sim/fair (SIMULATED model, for demos and tests; not a real model)
judge: prompt 4 (grade each option 0-5, then select); temperature 0.3, up to 800 tokens
items: demo: 16 items x 4 options + 1 unrelated option from another item; 5 cyclic orders x 1 replicate = 80 requests
requests: 80 (80 sent, 0 from cache, 0 failed, 0 refused); answers: 80 usable, 0 unparsed; items scored: 16

score          mean  95% interval (Student t over items; '-': too few)
Grade Score   1.000  [0.794, 1.000]
entropy       1.000  [0.794, 1.000]
choice        1.000  [0.794, 1.000]

slot chosen   1: 20.0% [9.9%, 33.8%]   2: 20.0% [9.9%, 33.8%]   3: 20.0% [9.9%, 33.8%]   4: 20.0% [9.9%, 33.8%]   5: 20.0% [9.9%, 33.8%]   (no bias: 20.0% each; is a slot preferred? p = 1, exact binomial per slot, intervals simultaneous over the 5 slots; n = 80 answers)
preferred option (people's choice) chosen in 81.2% [59.8%, 100.0%] of answers, and most chosen in 81.2% of 16 items
unrelated option chosen in 18.8% of answers
"""


def test_a_grade_score_spec_runs_like_the_command(tmp_path: Path) -> None:
    spec = tmp_path / "judge.yaml"
    spec.write_text(
        "task: grade-score\nmodel: sim/fair\nitems: demo\nprompt: 4\nrandom_option: true\n"
        "runs_dir: runs\n"
    )
    code, out, err = invoke("run", str(spec))
    assert code == 0, err
    assert out.startswith(EXPECTED_SPEC_RUN_HEAD)
    assert run_dir_of(out).parent == tmp_path / "runs"
    assert json.loads((run_dir_of(out) / "metrics.json").read_text())["prompt"] == "4"


def test_a_prompt_file_next_to_the_spec_is_found(tmp_path: Path) -> None:
    (tmp_path / "judge.prompt.yaml").write_text(
        "max_tokens: 20\nsystem: Pick the best of {n_options}.\n"
        "candidate: 'Option {number}:\n  {text}'\nuser: '{prompt}\n\n{options}\n\nAnswer Option N.'\n"
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "task: grade-score\nmodel: sim/fair\nitems: demo\nprompt: judge.prompt.yaml\nruns_dir: runs\n"
    )
    code, out, _ = invoke("run", str(spec))
    assert code == 0
    assert out.splitlines()[1] == (
        "judge: prompt "
        f"{tmp_path / 'judge.prompt.yaml'} (from judge.prompt.yaml); temperature 0.3, up to 20 tokens"
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--k-max", "3"],
            "Error: --k-max is an allocation-audit option; grade-score does not use it\n",
        ),
        (
            ["--prompt", "9"],
            "error: cannot read prompt 9: No such file or directory (the shipped prompts are 1, 2, 3, 4)\n",
        ),
        (
            ["--items", "nowhere.jsonl"],
            "error: cannot read items nowhere.jsonl: No such file or directory\n",
        ),
    ],
)
def test_bad_options_are_named_before_anything_is_sent(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    base = {"--items": "demo", "--model": "sim/biased", "--runs-dir": str(tmp_path / "runs")}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    code, out, err = invoke("run", "grade-score", *[part for pair in base.items() for part in pair])
    assert code == 2 and out == "" and err.endswith(expected)
    assert not (tmp_path / "runs").exists()


def test_all_orders_of_seven_options_are_refused(tmp_path: Path) -> None:
    items = tmp_path / "seven.jsonl"
    options = [f"answer {k}" for k in range(7)]
    items.write_text(json.dumps({"id": "q", "prompt": "Best?", "options": options}) + "\n")
    code, _, err = invoke(
        "run", "grade-score", "--items", str(items), "--model", "sim/fair", "--permutations", "all",
        "--runs-dir", str(tmp_path),
    )  # fmt: skip
    assert code == 2
    assert err == (
        "error: --permutations all asks all 7! = 5,040 orders of 7 options per item; it is "
        "limited to 6 options: use --permutations cyclic\n"
    )


def test_grade_score_needs_its_items() -> None:
    code, _, err = invoke("run", "grade-score", "--model", "sim/biased")
    assert code == 2 and "Missing option '--items'" in err


def test_a_bad_grade_score_spec_names_the_field(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("task: grade-score\nmodel: sim/fair\nitems: demo\npermutations: some\n")
    code, _, err = invoke("run", str(spec))
    assert code == 2
    assert err == f"error: {spec}, field 'permutations': Input should be 'cyclic' or 'all'\n"


def test_grade_score_has_help() -> None:
    code, out, _ = invoke("run", "grade-score", "--help")
    assert code == 0 and "--random-option" in out and "--permutations [cyclic|all]" in out


EXPECTED_STUDY = """\
Grade Score study of 4 runs: sim/biased (SIMULATED), sim/fair (SIMULATED)
items: demo (16 items)
asked: cyclic orders x 1 replicate(s), temperature 0.3

Grade Score: harmonic mean of the entropy and choice scores; mean ± half the 95% interval
model       prompt 1      prompt 1 +random  prompt 2
sim/biased  0.822 ±0.101  0.763 ±0.102      -
sim/fair    -             -                 1.000 ±0.103

entropy score: 1 = no favourite slot, 0 = always the same slot; mean ± half the 95% interval
model       prompt 1      prompt 1 +random  prompt 2
sim/biased  0.816 ±0.107  0.764 ±0.107      -
sim/fair    -             -                 1.000 ±0.103

choice score: share of answers naming the item's most chosen option; mean ± half the 95% interval
model       prompt 1      prompt 1 +random  prompt 2
sim/biased  0.828 ±0.094  0.762 ±0.097      -
sim/fair    -             -                 1.000 ±0.103

agreement with people's preferred option: mean over items of the share of answers choosing it ± half its interval (items that name one)
model       prompt 1      prompt 1 +random  prompt 2
sim/biased  0.828 ±0.094  0.637 ±0.179      -
sim/fair    -             -                 1.000 ±0.103

answers naming no option, of all asked (refusals included)
model       prompt 1      prompt 1 +random  prompt 2
sim/biased  0.0% of 64    0.0% of 80        -
sim/fair    -             -                 0.0% of 64

the unrelated (random) option chosen, of usable answers
model       prompt 1      prompt 1 +random  prompt 2
sim/biased  -             17.5% of 80       -
sim/fair    -             -                 -
"""


def test_study_lays_models_prompts_and_random_option_side_by_side(tmp_path: Path) -> None:
    runs = []
    for model, extra in (
        ("sim/biased", []), ("sim/biased", ["--random-option"]), ("sim/fair", ["--prompt", "2"]),
        ("sim/fair", ["--prompt", "2"]),
    ):  # fmt: skip
        code, out, _ = invoke(
            "run", "grade-score", "--items", "demo", "--model", model, *extra,
            "--runs-dir", str(tmp_path),
        )  # fmt: skip
        assert code == 0
        runs.append(str(run_dir_of(out)))
    code, out, _ = invoke("study", *runs[:3])
    assert code == 0
    assert out == EXPECTED_STUDY.replace("4 runs", "3 runs")
    code, out, err = invoke("study", *runs)  # a repeated audit counts once
    assert code == 0
    assert out == EXPECTED_STUDY.replace("4 runs", "3 runs")
    assert "counted once: 2 runs audit the same model (sim/fair)" in err
    assert f"{runs[3]} stands for them" in err and f"left out: {runs[2]}" in err


def test_study_refuses_to_mix_grade_score_and_allocation_runs(tmp_path: Path) -> None:
    code, out, _ = invoke(
        "run", "grade-score", "--items", "demo", "--model", "sim/fair", "--runs-dir", str(tmp_path)
    )
    grade_run = run_dir_of(out)
    fanout_input = tmp_path / "prompts.jsonl"
    fanout_input.write_text('{"id": "q", "messages": [{"role": "user", "content": "Hi"}]}\n')
    code, out, _ = invoke(
        "fanout", str(fanout_input), "--model", "sim/fair", "--runs-dir", str(tmp_path)
    )
    other = run_dir_of(out)
    code, _, err = invoke("study", str(grade_run), str(other), "--no-report")
    assert code == 0
    assert f"note: skipped {other}: a fanout run, not an audit run" in err
    code, out, _ = invoke("run", "resume-screening", "--model", "sim/fair", "--runs-dir",
                          str(tmp_path), "--names-per-group", "2", "--no-report")  # fmt: skip
    allocation_run = run_dir_of(out)
    code, _, err = invoke("study", str(grade_run), str(allocation_run))
    assert code == 2 and err.startswith("error: a study compares runs of one kind: ")


def test_tasks_lists_grade_score_with_its_data_and_prompts() -> None:
    from biasaudit.textfiles import DATA_DIR, PROMPTS_DIR

    code, out, _ = invoke("tasks")
    assert code == 0
    assert (
        f"""\
grade-score: A judge picks the best of an item's options, shown in every cyclic order: by position or by content? (Grade Score)
  groups:     none: the judge's choices by slot and by option are audited
  pools:      each item's n options in its n cyclic orders (all n! with --permutations all)
  items:      yours: --items FILE.jsonl with id, prompt, options[, preferred | ranks]
  demo:       {DATA_DIR / "grade_items_demo.jsonl"} (16 items x 4 options, written for biasaudit; --items demo)
  prompt:     {PROMPTS_DIR / "grade-score.1.yaml"} (1: select, then explain)
  prompt:     {PROMPTS_DIR / "grade-score.2.yaml"} (2: evaluate each option, then select)
  prompt:     {PROMPTS_DIR / "grade-score.3.yaml"} (3: select, told to ignore the order)
  prompt:     {PROMPTS_DIR / "grade-score.4.yaml"} (4: grade each option 0-5, then select)
  run:        biasaudit run grade-score --items FILE.jsonl --model MODEL [--prompt 1|2|3|4|FILE]
"""
        in out
    )


def test_a_study_of_many_runs_shows_every_run_and_labels_only_simulated_ones(
    tmp_path: Path,
) -> None:
    """Runs on two item files get rows of their own; a prompt file's column is headed by
    its name; all 13 runs are drawn (no silent cap); with a real run among them (imported
    answers), only the simulated rows say SIMULATED and the page is not tagged as a whole."""
    from biasaudit.textfiles import DATA_DIR, PROMPTS_DIR

    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "red.yaml").write_text((PROMPTS_DIR / "grade-score.1.yaml").read_text())
    items = tmp_path / "few.jsonl"
    demo = (DATA_DIR / "grade_items_demo.jsonl").read_text().splitlines()
    items.write_text("\n".join(demo[:4]) + "\n")
    runs = []
    for extra in (*(["--prompt", str(p)] for p in (1, 2, 3, 4)),
                  *(["--prompt", str(p), "--random-option"] for p in (1, 2, 3, 4))):  # fmt: skip
        for model in ("sim/biased",):
            code, out, err = invoke("run", "grade-score", "--items", "demo", "--model", model,
                                    *extra, "--runs-dir", str(tmp_path), "--no-report")  # fmt: skip
            assert code == 0, err
            runs.append(str(run_dir_of(out)))
    for model, extra in (("sim/biased", ["--items", "demo", "--prompt", str(prompts / "red.yaml")]),
                         ("sim/biased", ["--items", str(items)]),
                         ("sim/fair", ["--items", "demo"]),
                         ("sim/fair", ["--items", "demo", "--prompt", "2"])):  # fmt: skip
        args = ["--model", model, *extra]
        code, out, err = invoke("run", "grade-score", *args, "--runs-dir", str(tmp_path),
                                "--no-report")  # fmt: skip
        assert code == 0, err
        runs.append(str(run_dir_of(out)))
    trials = tmp_path / "trials.csv"
    trials.write_text("item,shown,slot\nq1,A B C,1\nq1,B C A,2\nq1,C A B,3\n"
                      "q2,A B C,1\nq2,B C A,1\nq2,C A B,1\n")  # fmt: skip
    code, out, err = invoke("score", "grade-score", str(trials), "--runs-dir", str(tmp_path),
                            "--no-report")  # fmt: skip
    assert code == 0, err
    runs.append(str(run_dir_of(out)))
    code, out, err = invoke("study", *runs)
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("model"))
    assert "prompt red" in header and "prompt red.yaml" not in header
    rows = [line.split("  ")[0] for line in out.splitlines()[:40] if line.startswith("sim/")]
    assert "sim/biased on demo" in rows and "sim/biased on few" in rows
    report = Path(err.strip().splitlines()[-1].removeprefix("report: "))
    markdown = report.with_name("report.md").read_text()
    assert "Position histograms of all 13 runs" in markdown
    assert "## Runs compared — SIMULATED" not in markdown  # a real run is among them
    assert "Some runs are of a SIMULATED model" in markdown
    assert "| sim/biased on demo (SIMULATED) |" in markdown
