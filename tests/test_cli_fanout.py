"""`biasaudit fanout` end to end on the offline sim/ model, through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.store.runs import read_manifest, read_responses
from biasaudit.textfiles import EXAMPLES_DIR

EXAMPLE = EXAMPLES_DIR / "prompts.jsonl"


def run_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def write_lines(path: Path, *lines: object) -> Path:
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    )
    return path


def test_fanout_on_sim_writes_a_complete_run(tmp_path: Path) -> None:
    code, out, _ = run_cli(
        "fanout", str(EXAMPLE), "--model", "sim/biased", "--runs-dir", str(tmp_path)
    )
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].startswith(
        "fanout of 6 prompts to sim/biased (simulated model): 6 answered, 0 failed"
    )
    assert lines[-1].startswith("run: ")
    run_dir = Path(lines[-1].removeprefix("run: "))
    assert {p.name for p in run_dir.iterdir()} == {
        "manifest.json",
        "prompts.jsonl.gz",
        "responses.jsonl",
        "inputs.jsonl",
        "spec.json",
    }
    manifest = read_manifest(run_dir)
    assert manifest.status == "completed" and manifest.simulated
    assert (
        manifest.counts.requests == 6
        and manifest.counts.sent == 6
        and manifest.counts.failures == 0
    )
    assert manifest.model_versions == {"sim-biased-v1 (simulated)": 6}
    records = {(r.id, r.replicate): r for r in read_responses(run_dir)}
    assert len(records) == 6
    screen = records[("screen-1", 0)]
    assert screen.text in {"Yes", "No"} and screen.top_logprobs and screen.top_logprobs[0]
    assert len(screen.top_logprobs[0].top) == 5
    assert records[("rate-1", 0)].texts is not None and len(records[("rate-1", 0)].texts or []) == 5


def test_second_run_is_served_from_the_cache(tmp_path: Path) -> None:
    args = ("fanout", str(EXAMPLE), "--model", "sim/biased", "--runs-dir", str(tmp_path))
    run_cli(*args)
    code, out, _ = run_cli(*args, "--replay")
    assert code == 0 and "6 from cache, 0 requests sent" in out
    code, out, _ = run_cli("cache", "stats", "--runs-dir", str(tmp_path))
    assert code == 0 and "sim/biased" in out
    row = next(line for line in out.splitlines() if line.startswith("sim/biased"))
    assert row.split()[1] == "6" and row.split()[-3] == "6"  # 6 entries, 6 hits


def test_replay_miss_fails_clearly(tmp_path: Path) -> None:
    code, _, err = run_cli(
        "fanout", str(EXAMPLE), "--model", "sim/fair", "--runs-dir", str(tmp_path), "--replay"
    )
    assert code == 2
    assert f"replay: no cache at {tmp_path / 'cache.sqlite'}" in err
    assert list(tmp_path.iterdir()) == []  # a replay that cannot finish creates nothing
    prompts = tmp_path.parent / f"{tmp_path.name}-two.jsonl"
    prompts.write_text("".join(EXAMPLE.read_text().splitlines(keepends=True)[:2]))
    assert (
        run_cli("fanout", str(prompts), "--model", "sim/fair", "--runs-dir", str(tmp_path))[0] == 0
    )
    code, _, err = run_cli(
        "fanout", str(EXAMPLE), "--model", "sim/fair", "--runs-dir", str(tmp_path), "--replay"
    )
    assert code == 2
    assert f"prompts are not in the cache {tmp_path / 'cache.sqlite'}" in err
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 1


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{not json", "line 2: not valid JSON"),
        ('["a list"]', "line 2: each line must be a JSON object"),
        ({"messages": [{"role": "user", "content": "x"}]}, "line 2, field 'id': required"),
        ({"id": "b"}, "line 2: give exactly one of 'messages' (chat) or 'prompt'"),
        (
            {"id": "b", "prompt": "x", "params": {"top_logprobs": 500}},
            "line 2, field 'params.top_logprobs'",
        ),
        (
            {"id": "b", "prompt": "x", "params": {"temperture": 1}},
            "line 2, field 'params.temperture': unknown field",
        ),
        ({"id": "b", "prompt": "x", "colour": 1}, "line 2, field 'colour': unknown field"),
        (
            {"id": "a", "prompt": "again"},
            "line 2, field 'id': id 'a' with replicate 0 already appears on line 1",
        ),
    ],
)
def test_bad_input_names_line_and_field(tmp_path: Path, line: object, expected: str) -> None:
    path = write_lines(tmp_path / "in.jsonl", {"id": "a", "prompt": "fine"}, line)
    code, _, err = run_cli(
        "fanout", str(path), "--model", "sim/biased", "--runs-dir", str(tmp_path / "runs")
    )
    assert code == 2, err
    assert expected in err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").glob("*-fanout-*"))


def test_unknown_provider_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run_cli(
        "fanout", str(EXAMPLE), "--model", "nosuch/model", "--runs-dir", str(tmp_path)
    )
    assert code == 2 and "unknown provider 'nosuch'" in err and "--base-url" in err


def test_model_without_provider_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run_cli("fanout", str(EXAMPLE), "--model", "gpt-4o", "--runs-dir", str(tmp_path))
    assert code == 2 and "provider/model" in err


def test_missing_key_fails_before_any_run_is_written(tmp_path: Path) -> None:
    code, _, err = run_cli(
        "fanout",
        str(EXAMPLE),
        "--model",
        "openai/gpt-4o-mini",
        "--runs-dir",
        str(tmp_path),
        env={"OPENAI_API_KEY": ""},
    )
    assert code == 2 and "OPENAI_API_KEY is not set" in err
    assert not list(tmp_path.iterdir())


def test_self_hosted_provider_needs_a_base_url(tmp_path: Path) -> None:
    code, _, err = run_cli(
        "fanout", str(EXAMPLE), "--model", "vllm/llama", "--runs-dir", str(tmp_path)
    )
    assert code == 2 and "--base-url" in err


def test_bad_base_url_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run_cli(
        "fanout",
        str(EXAMPLE),
        "--model",
        "vllm/x",
        "--base-url",
        "ftp://x",
        "--runs-dir",
        str(tmp_path),
    )
    assert code == 2 and "not an http(s) URL" in err


def test_missing_input_file(tmp_path: Path) -> None:
    code, _, err = run_cli("fanout", str(tmp_path / "none.jsonl"), "--model", "sim/biased")
    assert code == 2 and "cannot read" in err


@pytest.mark.parametrize("command", [[], ["fanout"], ["cache"], ["cache", "stats"], ["providers"]])
def test_every_command_has_help(command: list[str]) -> None:
    code, out, _ = run_cli(*command, "--help")
    assert code == 0 and "Usage:" in out


def test_providers_lists_capabilities() -> None:
    code, out, _ = run_cli("providers")
    assert code == 0
    assert "groq" in out and "rejects logprobs" in out and "anthropic" in out
