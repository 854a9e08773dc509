"""The prompt as sent is recoverable from the run directory alone, on another machine,
without the cache, and checks against the cache key it was sent under (issue: the
answers file held no prompt; an auditor rebuilt it from the spec and the shipped data)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.frames import load_prompts
from biasaudit.store.runs import PROMPTS_FILE, prompt_sent, read_prompts, read_responses


def _run(tmp_path: Path) -> Path:
    result = CliRunner().invoke(cli, [
        "run", "resume-screening", "--model", "sim/biased", "--jobs", "retail-associate",
        "--names-per-group", "2", "--rounds", "50", "--no-report", "--runs-dir", str(tmp_path),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    return Path(result.stdout.rstrip().splitlines()[-1].removeprefix("run: "))


def test_every_answer_has_its_prompt_as_sent_under_the_same_cache_key(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    (tmp_path / "cache.sqlite").unlink()  # the run directory alone
    header, prompts = read_prompts(run_dir)
    responses = read_responses(run_dir)
    assert len(prompts) == len(responses) == 96
    for response in responses:
        prompt = prompts[(response.id, response.replicate)]
        assert prompt.cache_key == response.cache_key and prompt_sent(header, prompt)
    name_line = next(
        line
        for message in next(iter(prompts.values())).request["messages"]
        for line in message["content"].splitlines()
        if line.startswith("Name: ")
    )
    scores = pd.read_csv(run_dir / "scores.csv")
    assert name_line.removeprefix("Name: ") in set(scores["name"])


def test_an_edited_prompt_no_longer_checks_and_a_damaged_file_is_named(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    path = run_dir / PROMPTS_FILE
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    record = json.loads(lines[1])
    record["request"]["messages"][-1]["content"] += " (edited)"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n")
    frame = load_prompts(run_dir)
    assert len(frame) == 96 and (~frame["as_sent"]).sum() == 1
    path.write_bytes(path.read_bytes()[:200])  # cut short
    frame = load_prompts(run_dir)
    assert frame.empty and f"{path} is damaged" in frame.attrs["skipped"][0]
