"""One verdict per figure: every surface of a run says the same "beyond noise" as the
verdict its metrics.json stores (issue: a run printed "within noise" where its
metrics.json and its Local Law 144 summary said "beyond noise")."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from biasaudit.cli import cli


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def _run_dir(out: str) -> Path:
    return Path(out.rstrip("\n").splitlines()[-1].removeprefix("run: "))


def _marked_rows(text: str, pattern: str) -> set[tuple[str, str]]:
    """(category, value) of the impact-table rows of ``text`` marked beyond noise."""
    return {(m.group(1), m.group(2)) for m in re.finditer(pattern, text)}


def test_an_allocation_run_says_the_same_on_every_surface(tmp_path: Path) -> None:
    out = _invoke(
        "run", "resume-screening", "--model", "sim/biased", "--jobs", "software-engineer",
        "--names-per-group", "10", "--runs-dir", str(tmp_path / "runs"),
    )  # fmt: skip
    run_dir = _run_dir(out)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    k = metrics["headline_k"]
    stored = {(r["category"], r["value"]) for r in metrics["impact"]
              if r["k"] == k and r["beyond_noise"]}  # fmt: skip
    assert ("group", "B_M") in stored  # the planted bias, found
    assert all(r["family"] and r["p_adjusted"] is not None for r in metrics["impact"])
    row = r"^(race|sex|group)\s+(\S+)\s.*\] +beyond noise \*$"
    assert _marked_rows(out, "(?m)" + row) == stored  # the terminal, piped
    _invoke("report", str(run_dir), "--format", "both")
    markdown = (run_dir / "report.md").read_text()
    html = (run_dir / "report.html").read_text()
    cell = (
        r"\| (race|sex|group) \| \[?([^\s\]|]+)(?:\]\(<[^>]*>\))? \|"
        r"[^\n]*\| beyond noise \* \|"
    )  # a group's cell links to its evidence
    assert _marked_rows(markdown, cell) == stored
    html_cell = (
        r"<td>(race|sex|group)</td><td>(?:<a [^>]*>)?([^<]+)(?:</a>)?</td>"
        r"(?:(?!</tr>).)*beyond noise \*"
    )
    assert _marked_rows(html, html_cell) == stored
    _invoke("export", str(run_dir), "-o", str(tmp_path / "figures.csv"))
    figures = pd.read_csv(tmp_path / "figures.csv")
    impact = figures[(figures["figure"] == "impact_ratio") & (figures["k"] == k)]
    assert {(r.unit_type, r.unit) for r in impact.itertuples() if r.beyond_noise is True} == stored
    _check_group_verdicts(out, metrics, figures)
    _invoke("ll144", str(run_dir), "--out", str(tmp_path / "ll144"))
    summary = pd.read_csv(tmp_path / "ll144" / "summary.csv")
    assert int(summary["beyond_noise"].sum()) == len(stored)
    text = (tmp_path / "ll144" / "summary.md").read_text()
    assert "the run's own verdict" in text and "pool" in text and "tied" in text


def _check_group_verdicts(out: str, metrics: dict, figures: pd.DataFrame) -> None:
    """RABBI, ΔDP and ΔEO: the terminal's marks and the export's ``beyond_noise`` are
    the verdicts metrics.json stores, one per figure, each with its family and test."""
    verdicts = metrics["verdicts"]
    assert {v["figure"] for v in verdicts} == {"rabbi", "dp_gap", "eo_gap"}
    assert all(v["family"] and v["test"] in ("permutation", "interval") for v in verdicts)
    flagged = {(v["figure"], v["unit"], v["k"]) for v in verdicts if v["beyond_noise"]}
    assert ("rabbi", "B_M", 0) in flagged and any(f[0] == "eo_gap" for f in flagged)
    assert all(f[1] == "B_M" for f in flagged)  # the planted group alone
    lines = out.splitlines()
    for figure, title in (("dp_gap", "ΔDP:"), ("eo_gap", "ΔEO:")):
        start = next(i for i, line in enumerate(lines) if line.startswith(title)) + 2
        for line in lines[start : start + len(metrics["groups"])]:
            group = line.split()[0]
            marked = len(re.findall(r"\] \*", line))
            assert marked == sum(1 for f in flagged if f[:2] == (figure, group)), line
    rabbi_rows = [line for line in lines if re.match(r"^[A-Z]_[A-Z] ", line)][: len(
        metrics["groups"])]  # fmt: skip
    for line in rabbi_rows:
        assert ("] *" in line) == (("rabbi", line.split()[0], 0) in flagged), line
    exported = figures[figures["figure"].isin(["rabbi", "dp_gap", "eo_gap"])
                       & figures["subtask"].isna()]  # fmt: skip
    assert exported["beyond_noise"].notna().all()
    assert {(r.figure, r.unit, 0 if pd.isna(r.k) else int(r.k))
            for r in exported.itertuples() if r.beyond_noise is True} == flagged  # fmt: skip


def test_a_decisions_run_says_the_same_on_every_surface(tmp_path: Path) -> None:
    out = _invoke(
        "run", "decisions", "--model", "sim/biased", "--scenario-limit", "6", "--fills",
        "explicit", "--runs-dir", str(tmp_path / "runs"),
    )  # fmt: skip
    run_dir = _run_dir(out)
    scores = json.loads((run_dir / "metrics.json").read_text())["fills"]["explicit"]["scores"]
    stored = {s["level"] for s in scores if s["beyond_noise"]}
    assert "black" in stored and "female" not in stored
    assert all(s["family"] == f"the {len(scores)} discrimination scores of the run"
               for s in scores)  # fmt: skip
    starred = {
        m.group(1).removeprefix("race: ").removeprefix("gender: ").replace("age (", "")
        .removesuffix(")")
        for m in re.finditer(r"(?m)^(\S.*?)\s{2,}\S.*\] \*$", out)
    }  # fmt: skip
    assert starred == stored
    _invoke("export", str(run_dir), "-o", str(tmp_path / "figures.csv"))
    figures = pd.read_csv(tmp_path / "figures.csv")
    exported = figures[figures["figure"] == "discrimination"]
    assert {r.unit for r in exported.itertuples() if r.beyond_noise is True} == stored


def _stored_and_exported(run_dir: Path, tmp_path: Path) -> tuple[set, set]:
    """The figures metrics.json stores as beyond noise, and those the export marks so."""
    metrics = json.loads((run_dir / "metrics.json").read_text())
    stored = {(v["figure"], v["unit"], v["k"]) for v in metrics["verdicts"] if v["beyond_noise"]}
    assert all(v["family"] and v["test"] == "interval" for v in metrics["verdicts"])
    _invoke("export", str(run_dir), "-o", str(tmp_path / "figures.csv"))
    figures = pd.read_csv(tmp_path / "figures.csv")
    names = {v["figure"] for v in metrics["verdicts"]}
    tested = figures[figures["figure"].isin(names) & figures["subtask"].isna()]
    exported = {(r.figure, r.unit, 0 if pd.isna(r.k) else int(r.k))
                for r in tested.itertuples() if r.beyond_noise is True}  # fmt: skip
    return stored, exported


def test_a_listwise_run_says_the_same_on_every_surface(tmp_path: Path) -> None:
    out = _invoke(
        "run", "resume-screening", "--model", "sim/biased", "--method", "listwise",
        "--jobs", "software-engineer", "--names-per-group", "20",
        "--runs-dir", str(tmp_path / "runs"),
    )  # fmt: skip
    stored, exported = _stored_and_exported(_run_dir(out), tmp_path)
    assert stored == exported and ("rabbi_of_ranks", "B_M", 0) in stored
    rows = [line for line in out.splitlines() if line.startswith("B_M ")]
    marked = sum(line.count("] *") for line in rows)
    assert marked == sum(1 for figure in stored if figure[1] == "B_M")


def test_a_ruted_run_says_the_same_on_every_surface(tmp_path: Path) -> None:
    out = _invoke("run", "ruted", "--model", "sim/biased", "--runs-dir", str(tmp_path / "runs"))
    run_dir = _run_dir(out)
    stored, exported = _stored_and_exported(run_dir, tmp_path)
    assert stored == exported and ("stereotype", "standard", 0) in stored
    contexts = json.loads((run_dir / "metrics.json").read_text())["contexts"]
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()[:1] and
            line.split()[0] in contexts}  # fmt: skip
    marked = {(context, line.count("] *")) for context, line in rows.items()}
    assert marked == {(c, sum(1 for _, u, _ in stored if u == c)) for c in contexts}
    _invoke("report", str(run_dir), "--format", "both")
    for name, row in (
        ("report.md", r"^\| {c} \|.*$"),
        ("report.html", r"<tr><td>{c}</td>.*?</tr>"),
    ):
        text = (run_dir / name).read_text()
        for context in contexts:
            line = re.search(row.format(c=context), text, re.MULTILINE).group(0)
            assert line.count("] *") == sum(1 for _, u, _ in stored if u == context), line


def test_a_grade_score_run_says_the_same_on_every_surface(tmp_path: Path) -> None:
    out = _invoke("run", "grade-score", "--items", "demo", "--model", "sim/biased",
                  "--runs-dir", str(tmp_path / "runs"))  # fmt: skip
    run_dir = _run_dir(out)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    stored = {v["unit"] for v in metrics["verdicts"] if v["beyond_noise"]}
    assert stored == {"1"} and metrics["slot_p"] == min(
        v["p_adjusted"] for v in metrics["verdicts"]
    )
    assert all(v["test"] == "exact binomial" and "Bonferroni" in v["family"]
               for v in metrics["verdicts"])  # fmt: skip
    line = next(line for line in out.splitlines() if line.startswith("slot chosen"))
    assert set(re.findall(r"(\d): [\d.]+% \[[^]]+\] \*", line)) == stored
    _invoke("export", str(run_dir), "-o", str(tmp_path / "figures.csv"))
    figures = pd.read_csv(tmp_path / "figures.csv", dtype={"unit": str})
    slots = figures[figures["figure"] == "slot_share"]
    assert {str(r.unit) for r in slots.itertuples() if r.beyond_noise is True} == stored
    for name, row in (("report.md", r"^\| \[(\d)\].*\] \* \|$"),
                      ("report.html", r">(\d)</a></td>(?:(?!</tr>).)*\] \*</td></tr>")):  # fmt: skip
        text = (run_dir / name).read_text()
        assert set(re.findall(row, text, re.MULTILINE)) == stored, name


def test_a_slot_verdict_agrees_with_its_interval_by_construction() -> None:
    import numpy as np

    from biasaudit.kinds.grade_score.metrics_file import slot_verdicts
    from biasaudit.metrics import position_intervals

    rng = np.random.default_rng(5)
    for _ in range(200):
        k = int(rng.integers(2, 6))
        counts = rng.multinomial(int(rng.integers(4, 120)), rng.dirichlet(np.ones(k) * 3))
        intervals, slot_p = position_intervals(counts, confidence=0.95)
        verdicts = slot_verdicts(counts.tolist())
        assert slot_p == min(v.p_adjusted for v in verdicts)
        for (low, high), verdict in zip(intervals, verdicts, strict=True):
            assert verdict.beyond_noise == (not low <= 1 / k <= high), (counts, verdict)
