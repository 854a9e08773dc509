"""Every file a user gives, broken every way a file breaks: exit 2, named, nothing written.

One sweep per command and file format: the score imports (CSV), a run's spec
(YAML) and fan-out prompts (JSONL). Each variant is what a real file can
become: empty, a header alone, Latin-1 bytes, a NUL byte, random bytes, a
truncated last line, a duplicated column, a cell far over the limits, a
directory in the file's place. Every one must exit 2 with the file's name
in the message, with no traceback, and leave no run directory behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from biasaudit.cli import cli

BIG = "x" * 200_000  # past the 100,000 characters a cell may hold

CSV_FILES = {
    "allocation": "subtask,group,candidate,qualified,score\n"
    + "".join(f"job,{'R' if i % 2 else 'B'},c{i},true,0.{i}\n" for i in range(1, 9)),
    "grade-score": "item,shown,slot\nq1,A B C,1\nq1,B C A,2\nq1,C A B,3\n",
    "ruted": "occupation,context,p_male\nnurse,standard,0.5\nplumber,standard,0.7\n",
    "listwise": "pool,order,slot,candidate,group,rank\np1,1,1,c1,W_M,1\np1,1,2,c2,B_M,2\n",
    "decisions": "scenario,age,gender,race,p_yes\nq1,30,male,white,0.6\nq1,30,female,black,0.4\n",
}


def csv_variants(base: str) -> dict[str, bytes]:
    header, *rows = base.splitlines()
    first = header.split(",")[0]
    return {
        "empty": b"",
        "header only": (header + "\n").encode(),
        "latin-1": (base + rows[0].replace(rows[0][-1], "é") + "\n").encode("latin-1"),
        "NUL byte": (header + "\n" + rows[0][:3] + "\0" + rows[0][3:] + "\n").encode(),
        "random bytes": np.random.default_rng(0).bytes(4096),
        "open quote": (base + '"' + rows[0]).encode(),
        "duplicate column": (f"{header},{first}\n" + "".join(f"{r},x\n" for r in rows)).encode(),
        "huge cell": (base + rows[0].replace(rows[0].split(",")[0], BIG, 1) + "\n").encode(),
    }


SPEC = "task: resume-screening\nmodel: sim/fair\n"
SPEC_VARIANTS = {
    "empty": b"",
    "latin-1": (SPEC + "runs_dir: r\xe9sum\xe9s\n").encode("latin-1"),
    "NUL byte": (SPEC + "runs_dir: a\0b\n").encode(),
    "random bytes": np.random.default_rng(1).bytes(4096),
    "open bracket": (SPEC + "groups: [W_M, B_M\n").encode(),
    "a list": b"- task: resume-screening\n- model: sim/fair\n",
    "duplicate key": (SPEC + "model: sim/biased\n").encode(),
    "huge": (SPEC + f"# {'y' * 2_000_000}\n").encode(),
}


def jsonl_variants(line: dict[str, object], seed: int) -> dict[str, bytes]:
    """A JSONL file of ``line``, broken every way (as :func:`csv_variants`)."""
    text = json.dumps(line)
    return {
        "empty": b"",
        "latin-1": (text + "\n" + '{"id": "r\xe9", "prompt": "x"}\n').encode("latin-1"),
        "NUL byte": (json.dumps({**line, "id": "a\0b"}) + "\n").encode(),
        "random bytes": np.random.default_rng(seed).bytes(4096),
        "truncated line": (text + "\n" + text[:-7]).encode(),
        "an array": b'[{"id": "q"}]\n',
        "duplicate id": (text + "\n" + text + "\n").encode(),
        "huge value": (json.dumps({**line, "id": BIG}) + "\n").encode(),
    }


PROMPT = {"id": "q", "messages": [{"role": "user", "content": "Hi"}]}
JSONL_VARIANTS = jsonl_variants(PROMPT, seed=2)


def refused(tmp_path: Path, write: Callable[[Path], Path], *command: str) -> None:
    """Run ``biasaudit <command> FILE``: exit 2, the file named, no traceback, no run."""
    path = write(tmp_path)
    runs = tmp_path / "runs"
    result = CliRunner().invoke(cli, [*command, str(path), "--runs-dir", str(runs)])
    output = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert result.exit_code == 2, output
    assert result.exception is None or isinstance(result.exception, SystemExit), output
    assert "Traceback" not in output
    assert path.name in output, output
    assert not runs.exists() or not any(runs.iterdir())
    assert len(output) < 5_000  # a huge value is not echoed back whole


@pytest.mark.parametrize("kind", sorted(CSV_FILES))
@pytest.mark.parametrize("variant", sorted(csv_variants(CSV_FILES["ruted"])))
def test_score_files(tmp_path: Path, kind: str, variant: str) -> None:
    def write(folder: Path) -> Path:
        path = folder / f"{kind}-scores.csv"
        path.write_bytes(csv_variants(CSV_FILES[kind])[variant])
        return path

    refused(tmp_path, write, "score", kind)


@pytest.mark.parametrize("kind", sorted(CSV_FILES))
def test_a_directory_in_place_of_the_file(tmp_path: Path, kind: str) -> None:
    def write(folder: Path) -> Path:
        path = folder / "scores.csv"
        path.mkdir()
        return path

    refused(tmp_path, write, "score", kind)


@pytest.mark.parametrize("variant", sorted(SPEC_VARIANTS))
def test_spec_files(tmp_path: Path, variant: str) -> None:
    def write(folder: Path) -> Path:
        path = folder / "audit-spec.yaml"
        path.write_bytes(SPEC_VARIANTS[variant])
        return path

    refused(tmp_path, write, "run")


@pytest.mark.parametrize("variant", sorted(JSONL_VARIANTS))
def test_fanout_prompt_files(tmp_path: Path, variant: str) -> None:
    def write(folder: Path) -> Path:
        path = folder / "my-prompts.jsonl"
        path.write_bytes(JSONL_VARIANTS[variant])
        return path

    refused(tmp_path, write, "fanout", "--model", "sim/fair")


ITEM = {"id": "q", "prompt": "Which is best?", "options": ["A", "B", "C"]}
ITEM_VARIANTS = jsonl_variants(ITEM, seed=3)


@pytest.mark.parametrize("variant", sorted(ITEM_VARIANTS))
def test_grade_score_item_files(tmp_path: Path, variant: str) -> None:
    def write(folder: Path) -> Path:
        path = folder / "judge-items.jsonl"
        path.write_bytes(ITEM_VARIANTS[variant])
        return path

    refused(tmp_path, write, "run", "grade-score", "--model", "sim/fair", "--items")


SCENARIO = {"id": "q", "template": "Should {who} get the loan?"}
SCENARIO_VARIANTS = jsonl_variants(SCENARIO, seed=4)


@pytest.mark.parametrize("variant", sorted(SCENARIO_VARIANTS))
def test_decision_scenario_files(tmp_path: Path, variant: str) -> None:
    def write(folder: Path) -> Path:
        path = folder / "my-scenarios.jsonl"
        path.write_bytes(SCENARIO_VARIANTS[variant])
        return path

    refused(tmp_path, write, "run", "decisions", "--model", "sim/fair", "--scenarios")


YAML_VARIANTS = {
    "empty": b"",
    "latin-1": "key: r\xe9sum\xe9\n".encode("latin-1"),
    "NUL byte": b"key: a\0b\n",
    "random bytes": np.random.default_rng(4).bytes(4096),
    "open bracket": b"jobs: [a, b\n",
    "duplicate key": b"jobs: []\njobs: []\n",
    "huge": f"# {'y' * 2_000_000}\n".encode(),
}
TASK_FILES = {
    "names": (["run", "resume-screening", "--model", "sim/fair", "--names"],
              "name,group\nAnn Lee,W_F\nBo Chan,B_M\nCy Dee,W_M\nDi Eve,B_F\n"),
    "essays": (["run", "essay-grading", "--model", "sim/fair", "--essays"],
               "text,group\nA short essay.,W\nAnother essay.,B\n"),
    "occupations": (["run", "ruted", "--model", "sim/fair", "--occupations"],
                    "occupation,majority\nnurse,female\nplumber,male\n"),
}  # fmt: skip


@pytest.mark.parametrize("task", sorted(TASK_FILES))
@pytest.mark.parametrize("variant", sorted(csv_variants(CSV_FILES["ruted"])))
def test_task_data_files(tmp_path: Path, task: str, variant: str) -> None:
    command, base = TASK_FILES[task]

    def write(folder: Path) -> Path:
        path = folder / f"my-{task}.csv"
        path.write_bytes(csv_variants(base)[variant])
        return path

    refused(tmp_path, write, *command)


@pytest.mark.parametrize(
    "command",
    [["run", "resume-screening", "--model", "sim/fair", "--resumes"],
     ["run", "resume-screening", "--model", "sim/fair", "--dry-run", "--prices"]],
    ids=["resumes", "prices"],
)  # fmt: skip
@pytest.mark.parametrize("variant", sorted(YAML_VARIANTS))
def test_task_yaml_files(tmp_path: Path, command: list[str], variant: str) -> None:
    def write(folder: Path) -> Path:
        path = folder / "my-task-file.yaml"
        path.write_bytes(YAML_VARIANTS[variant])
        return path

    refused(tmp_path, write, *command)
