"""JSON Schemas of the spec file and every run file: generated from the models, shipped
in the package unchanged, and checked against real specs and real runs of each kind;
``schema_version``: older run files keep reading, newer ones are refused by name."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.kinds.registry import run_spec
from biasaudit.kinds.schemas import SCHEMA_NAMES, json_schema, shipped_schema
from biasaudit.spec import parse_spec

OWN_TASK = Path(__file__).parent.parent / "docs" / "how-to" / "your-own-task.md"
FAST: dict[str, dict[str, Any]] = {
    "allocation": {"task": "resume-screening", "names_per_group": 3, "pools": 5,
                   "jobs": "software-engineer"},
    "grade-score": {"task": "grade-score", "items": "demo"},
    "ruted": {"task": "ruted", "contexts": "standard"},
    "listwise": {"task": "resume-screening", "method": "listwise", "names_per_group": 3,
                 "pools": 4, "jobs": "software-engineer", "bootstrap": 200},
}  # fmt: skip


def validator(name: str) -> jsonschema.protocols.Validator:
    schema = json_schema(name)
    checker = jsonschema.validators.validator_for(schema)
    checker.check_schema(schema)
    return checker(schema)


@pytest.mark.parametrize("name", list(SCHEMA_NAMES))
def test_the_shipped_schemas_are_what_the_models_generate(name: str) -> None:
    """If this fails, a model changed: run `biasaudit schema --write
    src/biasaudit/data/schemas`, and raise its schema_version if a run file's shape did."""
    shipped = json.loads(shipped_schema(name).read_text(encoding="utf-8"))
    assert shipped == json_schema(name)


def test_the_readme_spec_validates_and_a_typo_does_not() -> None:
    text = OWN_TASK.read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(task: allocation\n.*?)```", text, re.S)
    assert block is not None
    spec = yaml.safe_load(block.group(1))
    check = validator("spec")
    check.validate(spec)
    check.validate({"task": "resume-screening", "method": "listwise", "model": "sim/fair"})
    assert not check.is_valid({**spec, "refrence_group": "W_M"})
    assert not check.is_valid({**spec, "bootstrap": "many"})
    assert not check.is_valid({"task": "ruted", "k_max": 3})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    found = {}
    for kind, fields in FAST.items():
        folder = tmp_path_factory.mktemp(kind)
        spec = parse_spec({"model": "sim/biased", "runs_dir": str(folder), **fields})
        finished = run_spec(spec, command=["test"])
        assert finished.kind == kind
        found[kind] = finished.run_dir
    return found


@pytest.mark.parametrize("kind", list(FAST))
def test_every_run_file_of_every_kind_validates(runs: dict[str, Path], kind: str) -> None:
    run_dir = runs[kind]
    validator("manifest").validate(json.loads((run_dir / "manifest.json").read_text()))
    validator(f"metrics-{kind}").validate(json.loads((run_dir / "metrics.json").read_text()))
    lines = (run_dir / "responses.jsonl").read_text().splitlines()
    check = validator("responses")
    for line in lines:
        check.validate(json.loads(line))
    assert lines


def test_the_schema_command_lists_prints_and_names_a_wrong_name(tmp_path: Path) -> None:
    runner = CliRunner()
    listed = runner.invoke(cli, ["schema"])
    assert listed.exit_code == 0 and "metrics-listwise" in listed.stdout
    printed = runner.invoke(cli, ["schema", "manifest"])
    assert printed.exit_code == 0 and json.loads(printed.stdout) == json_schema("manifest")
    wrong = runner.invoke(cli, ["schema", "manifests"])
    assert wrong.exit_code == 2 and "no schema 'manifests'; the schemas are: spec" in wrong.stderr
    written = runner.invoke(cli, ["schema", "--write", str(tmp_path / "schemas")])
    assert written.exit_code == 0
    assert sorted(p.stem for p in (tmp_path / "schemas").iterdir()) == sorted(SCHEMA_NAMES)


def test_a_run_of_schema_version_1_still_reads_and_a_newer_one_is_refused(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """Version 2 only added fields: a version 1 run (without them) reads as before. A
    file from a newer biasaudit is refused by name, not misread."""
    run_dir = runs["listwise"]
    older = tmp_path / "older"
    older.mkdir()
    for name in ("manifest.json", "metrics.json"):
        data = json.loads((run_dir / name).read_text())
        data["schema_version"] = 1
        data.pop("impact_by_subtask", None)
        data.pop("subtask_tests", None)
        (older / name).write_text(json.dumps(data))
    result = CliRunner().invoke(cli, ["report", str(older), "--format", "md"])
    assert result.exit_code == 0, result.output
    newer = tmp_path / "newer"
    newer.mkdir()
    for name in ("manifest.json", "metrics.json"):
        data = json.loads((run_dir / name).read_text())
        data["schema_version"] = 99 if name == "metrics.json" else 2
        (newer / name).write_text(json.dumps(data))
    result = CliRunner().invoke(cli, ["report", str(newer)])
    assert result.exit_code == 2
    assert (
        f"{newer / 'metrics.json'} was written by a newer biasaudit (schema_version 99; "
        "this one reads up to 5): upgrade biasaudit to read it"
    ) in result.stderr


def test_writing_schemas_where_it_cannot_is_named(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    result = CliRunner().invoke(cli, ["schema", "--write", str(tmp_path / "a-file" / "x")])
    assert result.exit_code == 2 and "cannot write there" in result.stderr
