"""Bad input: exit 2 naming file, line and field, before anything is sent or created.

Each case runs the command a user would type (``biasaudit run SPEC.yaml``,
``fanout``, ``replay``), against a loopback server that counts what reaches it
where an endpoint is involved.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner, Result

from biasaudit.cli import cli
from biasaudit.spec import MAX_ROUNDS as SPEC_MAX_ROUNDS, MAX_TIMEOUT_S as SPEC_MAX_TIMEOUT_S
from tests.servers import OpenAIServer

from .test_kill_resume import ROOT, ServerProcess, wait_until, write_prompts

CSV = "name,group,purpose\nAnn,A,a car\nBo,B,a roof\nCy,A,a shop\nDi,B,a boat\n"
PROMPT = {"system": "You screen loans.", "user": "{name}: {purpose}. Approve? Answer Yes or No."}


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


def write_spec(tmp_path: Path, server: OpenAIServer, **fields: Any) -> Path:
    (tmp_path / "candidates.csv").write_text(fields.pop("csv", CSV))
    data = {
        "task": "allocation", "model": "vllm/m", "base_url": server.base_url,
        "candidates": "candidates.csv", "reference_group": "A", "pointwise": PROMPT,
        "runs_dir": "runs", **fields,
    }  # fmt: skip
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


def refused(result: Result, *pieces: str) -> None:
    """Exit 2, one clean line naming what is wrong; nothing created, nothing sent."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for piece in pieces:
        assert piece in result.output, (piece, result.output)


def nothing_happened(tmp_path: Path, server: OpenAIServer) -> None:
    assert server.request_count == 0
    runs = tmp_path / "runs"
    assert not runs.exists() or not [p for p in runs.iterdir() if p.is_dir()]


def run_spec(path: Path) -> Result:
    return CliRunner().invoke(cli, ["run", str(path), "--no-report"])


# --- 14. prompt placeholders ----------------------------------------------------------------


@pytest.mark.parametrize(
    "user",
    ["{name!z} wants {purpose}", "{name:d}", "{name:>2000000000}", "{name.upper}", "{0}", "{}",
     "{name[0]}", "an unclosed {brace"],
)  # fmt: skip
def test_only_plain_placeholders_are_allowed(
    tmp_path: Path, server: OpenAIServer, user: str
) -> None:
    path = write_spec(tmp_path, server, pointwise={"system": "Screen.", "user": user})
    started = time.monotonic()
    result = run_spec(path)
    refused(result, "field 'user'")
    assert time.monotonic() - started < 10  # {name:>2000000000} is never rendered
    nothing_happened(tmp_path, server)


def test_a_prompt_file_with_a_format_spec_is_named(tmp_path: Path, server: OpenAIServer) -> None:
    (tmp_path / "prompt.yaml").write_text('system: Screen.\nuser: "{name:>9} {purpose}"\n')
    path = write_spec(tmp_path, server, pointwise={"file": "prompt.yaml"})
    refused(run_spec(path), "prompt.yaml", "field 'user'", "{name:>9}")
    nothing_happened(tmp_path, server)


# --- 15. YAML that bites -----------------------------------------------------------------


def test_a_yaml_alias_bomb_as_the_task_fails_fast(tmp_path: Path) -> None:
    levels = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 9):
        this, previous = chr(ord("a") + i), chr(ord("a") + i - 1)
        levels.append(f"{this}: &{this} [" + ", ".join([f"*{previous}"] * 9) + "]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(levels) + "\ntask: *i\nmodel: sim/biased\n")
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["run", str(path)])
    assert time.monotonic() - started < 10
    assert result.exit_code == 2 and "field 'task'" in result.output and len(result.output) < 600


def test_a_key_given_twice_in_a_spec_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("task: ruted\nmodel: sim/biased\nreplicates: 2\nmodel: sim/fair\n")
    refused(CliRunner().invoke(cli, ["run", str(path)]), "key 'model' given twice (lines 2 and 4)")


# --- 16. bounds, labels, pools ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [("rounds", 2_000_000_000), ("bootstrap", 10**12), ("gap_bootstrap", 10**9), ("pools", 10**8),
     ("timeout", float("inf")), ("k_max", 10**6), ("seed", 2**70)],
)  # fmt: skip
def test_bounds_are_checked_with_the_spec(
    tmp_path: Path, server: OpenAIServer, field: str, value: Any
) -> None:
    path = write_spec(tmp_path, server, **{field: value})
    refused(run_spec(path), f"field '{field}'")
    nothing_happened(tmp_path, server)


def test_the_command_line_bounds_are_the_specs() -> None:
    # The options are made from the spec's fields, so their bounds are the spec's.
    context = click.Context(cli)
    run = cli.get_command(context, "run")
    assert isinstance(run, click.Group)
    command = run.get_command(context, "resume-screening")
    assert command is not None
    types = {param.name: param.type for param in command.params}
    assert isinstance(types["rounds"], click.IntRange) and types["rounds"].max == SPEC_MAX_ROUNDS
    timeout = types["timeout"]
    assert isinstance(timeout, click.FloatRange) and timeout.max == SPEC_MAX_TIMEOUT_S
    assert timeout.min == 0 and timeout.min_open


def test_labels_of_one_value_are_refused(tmp_path: Path, server: OpenAIServer) -> None:
    path = write_spec(tmp_path, server, labels={"Yes": 1, "No": 1})
    refused(run_spec(path), "field 'labels'", "same value")
    nothing_happened(tmp_path, server)


def test_a_pool_larger_than_the_candidates_is_refused(tmp_path: Path, server: OpenAIServer) -> None:
    path = write_spec(tmp_path, server, pool={"design": "random", "size": 50})
    refused(run_spec(path), "pools of 50 are larger than the 4 candidates")
    nothing_happened(tmp_path, server)


def test_a_subtask_missing_a_group_is_refused(tmp_path: Path, server: OpenAIServer) -> None:
    csv = "name,group,purpose,job\nAnn,A,x,j1\nBo,B,y,j1\nCy,A,z,j2\n"
    path = write_spec(tmp_path, server, csv=csv, subtask_column="job")
    refused(run_spec(path), "subtask 'j2' has no candidate of group 'B'")
    nothing_happened(tmp_path, server)


# --- 17. encodings, deep lines, what the endpoint cannot take ----------------------------------


def latin1(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("latin-1"))
    return path


def test_a_latin1_spec_is_named_by_line(tmp_path: Path) -> None:
    path = latin1(tmp_path / "spec.yaml", "task: ruted\n# Résumé screening\nmodel: sim/biased\n")
    refused(CliRunner().invoke(cli, ["run", str(path)]), "spec.yaml, line 2", "not UTF-8", "0xe9")


def test_a_latin1_prompt_file_is_named(tmp_path: Path, server: OpenAIServer) -> None:
    latin1(tmp_path / "prompt.yaml", "system: Screen.\nuser: '{name}: {purpose}. Café?'\n")
    path = write_spec(tmp_path, server, pointwise={"file": "prompt.yaml"})
    refused(run_spec(path), "prompt.yaml, line 2", "not UTF-8")


def test_latin1_grade_score_items_are_named(tmp_path: Path) -> None:
    line = '{"id": "q1", "prompt": "Café?", "options": ["a", "b"]}\n'
    path = latin1(tmp_path / "items.jsonl", line)
    result = CliRunner().invoke(
        cli, ["run", "grade-score", "--items", str(path), "--model", "sim/biased"]
    )
    refused(result, "items.jsonl, line 1", "not UTF-8")


def test_latin1_and_deep_fanout_lines_are_named(tmp_path: Path, server: OpenAIServer) -> None:
    good = '{"id": "a", "messages": [{"role": "user", "content": "hi"}]}\n'
    latin = latin1(tmp_path / "latin.jsonl", good + '{"id": "b", "prompt": "Café"}\n')
    deep = tmp_path / "deep.jsonl"
    deep.write_text(
        good + '{"id": "b", "prompt": "x", "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
    )
    for path, where in ((latin, "latin.jsonl, line 2"), (deep, "deep.jsonl, line 2")):
        args = ["fanout", str(path), "--model", "vllm/m", "--base-url", server.base_url,
                "--runs-dir", str(tmp_path / "runs")]  # fmt: skip
        refused(CliRunner().invoke(cli, args), where)
    nothing_happened(tmp_path, server)


@pytest.mark.parametrize(
    ("line", "field"),
    [({"messages": [{"role": "user", "content": "x"}], "params": {"logprobs": True, "top_logprobs": 50}},
      "returns at most 20 top_logprobs"),
     ({"messages": [{"role": "wizard", "content": "x"}]}, "role must be one of"),
     ({"messages": [{"role": "user", "content": 5}]}, "content must be text")],
    ids=["top-logprobs-50", "unknown-role", "content-not-text"],
)  # fmt: skip
def test_a_request_the_endpoint_cannot_take_is_named_before_anything_is_created(
    tmp_path: Path, server: OpenAIServer, line: dict[str, Any], field: str
) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(
        json.dumps({"id": "ok", "prompt": "x"}) + "\n" + json.dumps({"id": "q", **line}) + "\n"
    )
    args = ["fanout", str(path), "--model", "vllm/m", "--base-url", server.base_url,
            "--runs-dir", str(tmp_path / "runs")]  # fmt: skip
    refused(CliRunner().invoke(cli, args), "p.jsonl, line 2", field)
    nothing_happened(tmp_path, server)


def test_more_stop_sequences_than_openai_takes(tmp_path: Path, server: OpenAIServer) -> None:
    path = tmp_path / "p.jsonl"
    stops = {"id": "q", "prompt": "x", "params": {"stop": ["a", "b", "c", "d", "e"]}}
    path.write_text(json.dumps(stops) + "\n")
    args = ["fanout", str(path), "--model", "openai/gpt-3.5-turbo-instruct", "--runs-dir",
            str(tmp_path / "runs")]  # fmt: skip
    result = CliRunner().invoke(cli, args, env={"OPENAI_API_KEY": "sk-test-not-used-0123"})
    refused(result, "p.jsonl, line 1", "at most 4 stop sequences")


def test_an_empty_group_cell_is_named(tmp_path: Path, server: OpenAIServer) -> None:
    path = write_spec(tmp_path, server, csv="name,group,purpose\nAnn,A,x\nBo,,y\nCy,B,z\n")
    refused(run_spec(path), "candidates.csv, line 3, field 'group'", "empty")
    nothing_happened(tmp_path, server)


@pytest.mark.parametrize(
    ("csv", "said"),
    [
        ("", "candidates.csv is empty: a CSV file with a header row is expected"),
        (CSV + "Ed,A,a van, with a roof\n", "candidates.csv, line 6: 4 fields where the header has 3"),
        (CSV.replace("Bo,B,a roof", 'Bo,B,"a roof'), "candidates.csv, line 3: a double quote opened here is never closed"),
        (CSV.replace(",", ";"), "candidates.csv, line 1: the header is separated by semicolons, not commas"),
        (CSV.replace(",", "\t"), "candidates.csv, line 1: the header is separated by tabs, not commas"),
    ],
    ids=["empty", "extra-field", "open-quote", "semicolons", "tabs"],
)  # fmt: skip
def test_a_table_that_is_not_comma_separated_csv_is_named_by_line(
    tmp_path: Path, server: OpenAIServer, csv: str, said: str
) -> None:
    """pandas' tokenizer messages (records counted from 1, rows from 0) as the file's line."""
    result = run_spec(write_spec(tmp_path, server, csv=csv))
    refused(result, said)
    assert "C error" not in result.output and "tokenizing" not in result.output
    nothing_happened(tmp_path, server)


# --- 18. broken runs, orphaned workers -------------------------------------------------------


@pytest.mark.parametrize("command", ["replay", "compare", "report"])
def test_a_truncated_manifest_is_not_a_run_directory(tmp_path: Path, command: str) -> None:
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts, 3)
    ran = CliRunner().invoke(
        cli, ["fanout", str(prompts), "--model", "sim/biased", "--runs-dir", str(tmp_path / "runs")]
    )
    run_dir = Path(ran.output.strip().splitlines()[-1].removeprefix("run: "))
    manifest = run_dir / "manifest.json"
    manifest.write_text(manifest.read_text()[:80])
    args = {"replay": ["replay", str(run_dir)], "compare": ["compare", str(run_dir), str(run_dir)],
            "report": ["report", str(run_dir)]}[command]  # fmt: skip
    refused(CliRunner().invoke(cli, args), "is not a run directory")


def test_the_orphaned_worker_of_a_killed_run_exits_quietly(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "server.log", "--latency", "0.2")
    try:
        prompts = tmp_path / "p.jsonl"
        write_prompts(prompts, 1200)
        parent = subprocess.Popen(
            [sys.executable, "-m", "biasaudit", "fanout", str(prompts), "--model", "vllm/m",
             "--base-url", server.base_url, "--runs-dir", str(tmp_path / "runs"),
             "--workers", "2", "--concurrency", "8"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_until(lambda: sum(server.received().values()) >= 40)
        children = _children(parent.pid)
        assert children, "the run started a worker"
        parent.send_signal(signal.SIGKILL)
        _, err = parent.communicate(timeout=30)  # the worker shares the parent's stderr
        for pid in children:
            wait_until(lambda pid=pid: not _alive(pid), timeout=10)
        sent = sum(server.received().values())
        time.sleep(1.0)
        assert sum(server.received().values()) == sent, "the orphan went on sending"
        assert "Traceback" not in err and "BrokenPipeError" not in err
    finally:
        server.stop()


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(line) for line in found.stdout.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split(")")[-1].split()[0] == "Z")


@pytest.mark.parametrize(
    ("variable", "value"),
    [("BIASAUDIT_LEASE_SECONDS", "abc"), ("BIASAUDIT_LEASE_SECONDS", "-5"),
     ("BIASAUDIT_LEASE_SECONDS", "nan"), ("BIASAUDIT_COST_NOTICE", "one dollar")],
)  # fmt: skip
def test_a_malformed_number_in_the_environment_is_named_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    runs = tmp_path / "runs"
    result = CliRunner().invoke(
        cli, ["run", "resume-screening", "--model", "sim/fair", "--jobs", "software-engineer",
              "--names-per-group", "2", "--runs-dir", str(runs), "--no-report"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"{variable}={value!r}: expected a number" in result.output
    assert not runs.exists() or not [p for p in runs.iterdir() if p.is_dir()]


_PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY",
                    "all_proxy", "NO_PROXY", "no_proxy")  # fmt: skip


@pytest.mark.parametrize(
    ("value", "problem"),
    [("::not a url::", "names no host"), ("http://proxy:notaport", "port that is not a number")],
)
def test_a_malformed_proxy_variable_is_one_line_and_leaves_loopback_alone(
    tmp_path: Path,
    server: OpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    problem: str,
) -> None:
    """A proxy variable the HTTP client cannot read ended every fanout in an httpx
    traceback, even to a loopback server that no proxy would serve."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", value)
    monkeypatch.setenv("HTTPS_PROXY", value)
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": "a", "prompt": "x"}) + "\n")
    remote = ["fanout", str(path), "--model", "vllm/m", "--base-url", "http://model.invalid/v1",
              "--runs-dir", str(tmp_path / "runs")]  # fmt: skip
    refused(CliRunner().invoke(cli, remote), "HTTP_PROXY=", problem, "unset it")
    assert not (tmp_path / "runs").exists()
    local = ["fanout", str(path), "--model", "vllm/m", "--base-url", server.base_url,
             "--runs-dir", str(tmp_path / "runs")]  # fmt: skip
    result = CliRunner().invoke(cli, local)
    assert result.exit_code == 0 and "1 answered, 0 failed" in result.output, result.output


def test_a_text_longer_than_any_prompt_may_be_is_refused_before_planning(
    tmp_path: Path, server: OpenAIServer
) -> None:
    """A decision scenario holding one 20 MB template made a dry run grow to 12 GB over
    85 s and price 414 prompts of about 5 M tokens each: texts are bounded where they are
    read (a scenario's template like a table's cell; a fan-out's prompt at about 2
    million tokens, more than any model's context)."""
    scenarios = tmp_path / "scenarios.jsonl"
    template = "A landlord decides whether to rent to {who}. " + "x" * 200_000
    scenarios.write_text(json.dumps({"id": "big", "template": template}) + "\n")
    args = ["run", "decisions", "--model", "vllm/m", "--base-url", server.base_url,
            "--scenarios", str(scenarios), "--dry-run", "--runs-dir", str(tmp_path / "runs")]  # fmt: skip
    refused(CliRunner().invoke(cli, args), "scenarios.jsonl, line 1, field 'template'",
            "200,045 characters, more than the 100,000")  # fmt: skip
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "a", "prompt": "y" * 8_000_001}) + "\n")
    args = ["fanout", str(prompts), "--model", "vllm/m", "--base-url", server.base_url,
            "--runs-dir", str(tmp_path / "runs")]  # fmt: skip
    refused(
        CliRunner().invoke(cli, args),
        "p.jsonl, line 1, field 'prompt'",
        "longer than any model's context",
    )
    nothing_happened(tmp_path, server)
