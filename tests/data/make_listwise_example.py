"""Write listwise_example.csv: rankings of a simulated listwise audit (sim/biased: Black
male names lowered, the candidate shown first favoured), as another harness would
store them, for the README's ``biasaudit score listwise`` example.

    python tests/data/make_listwise_example.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd

from biasaudit.kinds.registry import run_spec
from biasaudit.spec import parse_spec

RACE = {"W": "White", "B": "Black", "A": "Asian", "H": "Hispanic"}


def main() -> None:
    with tempfile.TemporaryDirectory() as runs:
        spec = parse_spec(
            {"task": "resume-screening", "method": "listwise", "model": "sim/biased",
             "jobs": "software-engineer", "names_per_group": 12, "pools": 12, "runs_dir": runs}
        )  # fmt: skip
        shown = pd.read_csv(run_spec(spec, command=["make"]).run_dir / "shown.csv")
    rankings = pd.DataFrame(
        {"pool": shown["pool"].str.replace("software-engineer/", "", regex=False),
         "order": shown["answer"].str.extract(r"#(\d+)/")[0], "slot": shown["slot"],
         "candidate": shown["name"], "group": shown["group"],
         "rank": shown["rank"].map(lambda r: "" if pd.isna(r) else int(r)),
         "name": shown["name"], "item": shown["item"],
         "race": shown["group"].str[0].map(RACE),
         "sex": shown["group"].str[2].map({"M": "male", "F": "female"})}
    )  # fmt: skip
    rankings.to_csv(Path(__file__).with_name("listwise_example.csv"), index=False)


if __name__ == "__main__":
    main()
