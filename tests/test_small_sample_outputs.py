"""What issue 32 asked of the outputs: each group's own units, the conventions of every
``score`` command, the units an import's intervals resampled, p-values never 0."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.metrics import P_FLOOR, allocation_figures, floor_p, interval_p_value
from biasaudit.render.text import format_p


def run_of(out: str) -> Path:
    return Path(out.strip().splitlines()[-1].removeprefix("run: "))


def test_a_groups_units_are_its_own_not_the_fewer_of_it_and_its_reference(
    tmp_path: Path,
) -> None:
    """800 essays of one group against 120 of the reference: the group shows 800."""
    rng = np.random.default_rng(0)
    rows = [{"candidate": f"{g}{i}", "group": g, "score": float(rng.normal()),
             "item": f"{g}{i}"}
            for g, n in (("R", 120), ("G", 800)) for i in range(n)]  # fmt: skip
    path = tmp_path / "scores.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    result = CliRunner().invoke(
        cli, ["score", "allocation", str(path), "--reference-group", "R", "--runs-dir",
              str(tmp_path / "runs"), "--no-report", "--bootstrap", "100",
              "--gap-bootstrap", "40", "--rounds", "200"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    metrics = json.loads((run_of(result.stdout) / "metrics.json").read_text())
    assert metrics["groups"]["G"]["units"] == 800
    assert metrics["groups"]["G"]["units_reference"] == 120
    table = allocation_figures(
        pd.DataFrame(rows)["score"], pd.DataFrame(rows)["group"], reference="R",
        items=pd.DataFrame(rows)["item"], n_bootstrap=20, n_gap_bootstrap=20,
        n_permutations=20, n_omnibus=19, n_rounds=50, k_max=1,
    ).table  # fmt: skip
    assert set(table.loc[table["group"] == "G", "units"]) == {800}


TRIALS = "item,shown,slot\n" + "".join(
    f"q{i},A B C,{1 + (i % 2)}\nq{i},B C A,1\nq{i},C A B,{1 if i < 3 else ''}\n" for i in range(6)
)


def test_score_grade_score_follows_the_papers_conventions_when_asked(tmp_path: Path) -> None:
    (tmp_path / "trials.csv").write_text(TRIALS)
    found = {}
    for conventions in ("biasaudit", "paper"):
        result = CliRunner().invoke(
            cli, ["score", "grade-score", str(tmp_path / "trials.csv"), "--conventions",
                  conventions, "--runs-dir", str(tmp_path / "runs"), "--no-report"],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        found[conventions] = json.loads((run_of(result.stdout) / "metrics.json").read_text())
    assert found["biasaudit"]["items"] == 3 and found["biasaudit"]["partial"] == 3
    assert found["paper"]["conventions"] == "paper" and found["paper"]["items"] == 6


def test_score_ruted_follows_the_papers_conventions_when_asked(tmp_path: Path) -> None:
    shares = tmp_path / "shares.csv"
    shares.write_text(
        "occupation,context,p_male\nnurse,standard,0.2\ncarpenter,standard,0.8\n"
        "secretary,standard,0.3\nmechanic,standard,0.9\n"
    )
    found = {}
    for conventions in ("biasaudit", "paper"):
        result = CliRunner().invoke(
            cli, ["score", "ruted", str(shares), "--conventions", conventions, "--runs-dir",
                  str(tmp_path / "runs"), "--no-report"],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        found[conventions] = json.loads((run_of(result.stdout) / "metrics.json").read_text())
        assert "intervals: 95% " in result.stdout
    default, paper = found["biasaudit"], found["paper"]
    assert default["intervals_over"] == "occupations" and paper["intervals_over"] == "replicates"
    low, high = default["contexts"]["standard"]["skew_ci"]
    assert high - low > 0.5  # four occupations from -0.6 to +0.8: a wide interval
    low, high = paper["contexts"]["standard"]["skew_ci"]
    assert low == high  # shares read, occupations fixed: the paper's has no width


def test_a_listwise_import_without_items_says_its_intervals_leave_them_out(
    tmp_path: Path,
) -> None:
    rows = []
    rng = np.random.default_rng(1)
    for pool in range(12):
        for order in range(2):
            ranks = rng.permutation(4) + 1
            for slot, group in enumerate(("A", "B", "C", "D"), 1):
                rows.append({"pool": pool, "order": order, "candidate": group, "group": group,
                             "slot": slot, "rank": int(ranks[slot - 1]),
                             "name": f"{group}{pool % 6}"})  # fmt: skip
    path = tmp_path / "rankings.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    result = CliRunner().invoke(
        cli, ["score", "listwise", str(path), "--reference-group", "A", "--runs-dir",
              str(tmp_path / "runs"), "--no-report", "--bootstrap", "100"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "multiway-clustered over names x pools (Student t)" in result.stdout
    assert "no item (resume) column, so the items' own variance is not in them" in result.stdout
    metrics = json.loads((run_of(result.stdout) / "metrics.json").read_text())
    assert metrics["resampled"] == ["names", "pools"] and metrics["interval_units"] == 6


def test_no_p_value_is_ever_zero_and_the_floor_prints_as_such() -> None:
    assert floor_p(0.0) == P_FLOOR and floor_p(0.2) == 0.2
    assert interval_p_value(0.5, [0.5, 0.5]) == P_FLOOR
    assert interval_p_value(1.0, [0.999999, 1.000001]) == P_FLOOR  # underflows: floored
    assert format_p(P_FLOOR) == "< 1e-300" and format_p(0.0) == "< 1e-300"
    assert format_p(2.1e-12) == "2.1e-12" and format_p(0.034) == "0.034"
    assert format_p(None) == "-"


@pytest.mark.parametrize("units", [3, 8, 40])
def test_a_test_read_off_a_t_interval_agrees_with_it(units: int) -> None:
    from biasaudit.metrics import critical_value

    se = 0.1
    half = critical_value(0.95, units) * se
    assert interval_p_value(half, [0.0, 2 * half], units=units) == pytest.approx(0.05)
    assert interval_p_value(half * 1.01, [half * 0.01, half * 2.01], units=units) < 0.05
