"""A sixth kind, written outside biasaudit (tests/toy_kind: eight files on the kind
contract, and a study), installed as pip leaves a package (its ``.dist-info`` with an
entry point of ``biasaudit.kinds``) and run end to end in a fresh interpreter: run,
report, replay, study, tasks. It touches no file of biasaudit. A package whose kind
cannot be loaded is named and left out; every other command still works."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

TOY = Path(__file__).parent / "toy_kind" / "toy_kind"


def _install(site: Path, name: str, entries: str, package: Path | None = None) -> None:
    if package is not None:
        shutil.copytree(package, site / package.name, ignore=shutil.ignore_patterns("__pycache__"))
    info = site / f"{name}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[biasaudit.kinds]\n{entries}\n")


def _biasaudit(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run([sys.executable, "-m", "biasaudit", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_a_kind_from_another_package_runs_end_to_end(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install(site, "toy-kind", "toy = toy_kind.kind", TOY)
    listed = _biasaudit(site, tmp_path, "tasks")
    assert listed.returncode == 0 and "toy-yesno" in listed.stdout, listed.stderr
    runs = []
    for model in ("sim/biased", "sim/fair"):
        ran = _biasaudit(site, tmp_path, "run", "toy-yesno", "--model", model, "--questions", "6")
        assert ran.returncode == 0, ran.stderr[-2000:]
        assert "yes share" in ran.stdout and ran.stdout.splitlines()[-1].startswith("run: ")
        runs.append(tmp_path / ran.stdout.splitlines()[-1].removeprefix("run: "))
    run_dir = runs[0]
    assert json.loads((run_dir / "manifest.json").read_text())["kind"] == "toy"
    assert {"report.html", "report.md", "metrics.json", "prompts.jsonl.gz"} <= {
        p.name for p in run_dir.iterdir()}  # fmt: skip
    replayed = _biasaudit(site, tmp_path, "replay", str(run_dir))
    assert replayed.returncode == 0, replayed.stderr[-2000:]
    studied = _biasaudit(site, tmp_path, "study", *map(str, runs), "--no-report")
    assert studied.returncode == 0 and studied.stdout.count("yes share") == 2, studied.stderr
    dry = _biasaudit(site, tmp_path, "run", "toy-yesno", "--model", "sim/fair", "--dry-run")
    assert dry.returncode == 0 and "8 requests, 6 in the cache" in dry.stdout, dry.stderr


def test_a_kind_that_cannot_be_loaded_is_named_and_left_out(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install(site, "broken-kind", "broken = no_such_module_anywhere.kind")
    listed = _biasaudit(site, tmp_path, "tasks")
    assert listed.returncode == 0 and "resume-screening" in listed.stdout
    assert "the installed kind 'broken' could not be loaded" in listed.stderr
    ran = _biasaudit(site, tmp_path, "run", "grade-score", "--items", "demo", "--model",
                     "sim/biased", "--no-report")  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]


def test_a_kind_that_takes_a_built_in_task_name_is_left_out(tmp_path: Path) -> None:
    """A package's kind whose task is named like a built-in one ('decisions') would mix
    its spec into that task's: it is named and left out, the built-in task unchanged."""
    site = tmp_path / "site"
    clash = tmp_path / "clash_kind"
    shutil.copytree(TOY, clash, ignore=shutil.ignore_patterns("__pycache__"))
    for path in clash.glob("*.py"):
        text = path.read_text().replace("toy_kind", "clash_kind")
        path.write_text(text.replace('"toy-yesno"', '"decisions"'))
    _install(site, "clash-kind", "clash = clash_kind.kind", clash)
    listed = _biasaudit(site, tmp_path, "tasks")
    assert listed.returncode == 0 and "'decisions' is already taken" in listed.stderr
    helped = _biasaudit(site, tmp_path, "run", "decisions", "--help")
    assert helped.returncode == 0 and "--scenarios" in helped.stdout


def test_the_toy_kind_needs_only_the_public_kit() -> None:
    """A kind from another package imports biasaudit's kit and statistics, nothing
    private: the contract it follows is public (``biasaudit.kinds.kit``)."""
    import ast

    allowed = {"biasaudit.kinds.kit", "biasaudit.metrics"}
    for path in TOY.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        used = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module and node.module.startswith("biasaudit")}  # fmt: skip
        assert used <= allowed, (path.name, used - allowed)
