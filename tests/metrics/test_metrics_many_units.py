"""allocation_figures with many units: little bootstraps and the permutation law's moments.

From ``LITTLE_FROM`` units of a one-way design (every candidate its own unit)
the intervals come from a bag of little bootstraps and the tests of RABBI and
δ from the exact mean and variance of their permutation distribution. Both
are checked against independent computations: the standard errors against
the closed forms for independent candidates (Welch's for δ; DeLong's
placement values for RABBI = 2·AUC - 1) and against the whole bootstrap on
the same data; the p-values against SciPy's Mann-Whitney test (normal law,
ties corrected) and against random relabellings done here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from biasaudit.metrics import _unit_scores as units_module, allocation_figures
from biasaudit.metrics._small_samples import critical_value


def candidates(n: int, seed: int, shift: float = 0.0, subtasks: int = 1) -> pd.DataFrame:
    """``n`` candidates, two groups, scores on a 0-10 scale in steps of 0.5 (many ties)."""
    rng = np.random.default_rng(seed)
    group = np.where(rng.random(n) < 0.5, "B", "W")
    raw = rng.normal(5.0, 2.0, n) + np.where(group == "B", shift, 0.0)
    return pd.DataFrame(
        {
            "score": np.clip(np.round(raw * 2) / 2, 0, 10),
            "group": group,
            "subtask": rng.integers(0, subtasks, n).astype(str),
        }
    )


def sides(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The scores of the group (B) and of the reference (W)."""
    return (
        frame.loc[frame.group == "B", "score"].to_numpy(),
        frame.loc[frame.group == "W", "score"].to_numpy(),
    )


def figures(frame: pd.DataFrame, **options: object) -> pd.DataFrame:
    found = allocation_figures(
        frame["score"], frame["group"], reference="W", subtasks=frame["subtask"],
        selection=False, n_bootstrap=1000, n_permutations=400, seed=3, **options,  # type: ignore[arg-type]
    )  # fmt: skip
    return found.table


def headline(table: pd.DataFrame, figure: str) -> pd.Series:
    rows = table[(table.figure == figure) & (table.scope == "all") & table.subtask.isna()]
    assert len(rows) == 1
    return rows.iloc[0]


def standard_error(row: pd.Series) -> float:
    """The standard error an interval was built from (estimate ± t·SE, unclipped)."""
    return float(row["high"] - row["low"]) / 2 / critical_value(0.95, int(row["units"]))


def delong_rabbi_se(a: np.ndarray, b: np.ndarray) -> float:
    """SE of 2·AUC - 1 from placement values (DeLong, DeLong & Clarke-Pearson 1988)."""
    b_sorted = np.sort(b)
    a_sorted = np.sort(a)
    v10 = (np.searchsorted(b_sorted, a, "left") + np.searchsorted(b_sorted, a, "right")) / (
        2 * b.size
    )
    v01 = 1 - (np.searchsorted(a_sorted, b, "left") + np.searchsorted(a_sorted, b, "right")) / (
        2 * a.size
    )
    variance = np.var(v10, ddof=1) / a.size + np.var(v01, ddof=1) / b.size
    return float(2 * np.sqrt(variance))


@pytest.fixture
def little_from_3000(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(units_module, "LITTLE_FROM", 3_000)


@pytest.mark.usefixtures("little_from_3000")
def test_little_bootstrap_errors_match_the_closed_forms_and_the_whole_bootstrap() -> None:
    frame = candidates(8_000, seed=1, shift=0.3)
    table = figures(frame)
    a, b = sides(frame)
    welch = float(np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size))
    assert standard_error(headline(table, "avg_gap")) == pytest.approx(welch, rel=0.12)
    assert standard_error(headline(table, "rabbi")) == pytest.approx(
        delong_rabbi_se(a, b), rel=0.12
    )
    units_module.LITTLE_FROM = 10**9  # type: ignore[misc]  # the whole bootstrap
    whole = figures(frame)
    # JSD and EMD have no closed form here: against the whole bootstrap. A plug-in JSD
    # is biased upwards in the subsets, so its error errs wide (by ~20% at this size).
    bounds = {"rabbi": (0.85, 1.15), "avg_gap": (0.85, 1.15), "jsd": (0.85, 1.4),
              "emd": (0.8, 1.2)}  # fmt: skip
    for figure, (low, high) in bounds.items():
        ratio = standard_error(headline(table, figure)) / standard_error(headline(whole, figure))
        assert low < ratio < high, (figure, ratio)
        assert headline(table, figure)["estimate"] == headline(whole, figure)["estimate"]


@pytest.mark.usefixtures("little_from_3000")
def test_little_bootstrap_headline_pools_subtasks() -> None:
    frame = candidates(9_000, seed=2, subtasks=3)
    table = figures(frame)
    per_subtask = table[(table.figure == "avg_gap") & (table.scope == "all")
                        & table.subtask.notna()]  # fmt: skip
    assert len(per_subtask) == 3
    ses = np.array([standard_error(row) for _, row in per_subtask.iterrows()])
    sizes = per_subtask["n"].to_numpy(dtype=float)
    # Independent subtasks: the weighted mean's SE from theirs.
    expected = float(np.sqrt(np.sum((sizes / sizes.sum()) ** 2 * ses**2)))
    assert standard_error(headline(table, "avg_gap")) == pytest.approx(expected, rel=0.15)


@pytest.mark.usefixtures("little_from_3000")
def test_moment_p_values_match_mann_whitney_and_relabellings() -> None:
    frame = candidates(6_000, seed=4, shift=0.08)
    table = figures(frame)
    a, b = sides(frame)
    expected = scipy.stats.mannwhitneyu(a, b, use_continuity=False, method="asymptotic").pvalue
    assert headline(table, "rabbi")["p"] == pytest.approx(expected, rel=1e-6)
    # δ: against random relabellings of the candidates.
    rng = np.random.default_rng(0)
    scores = frame["score"].to_numpy()
    labels = (frame["group"] == "B").to_numpy()
    observed = scores[labels].mean() - scores[~labels].mean()
    relabelled = np.array([rng.permutation(labels) for _ in range(2_000)])
    gaps = (relabelled @ scores) / labels.sum() - ((~relabelled) @ scores) / (~labels).sum()
    permuted_p = float(np.mean(np.abs(gaps) >= abs(observed)))
    found = headline(table, "avg_gap")["p"]
    assert abs(found - permuted_p) < 4 * np.sqrt(permuted_p * (1 - permuted_p) / 2_000) + 0.005


@pytest.mark.usefixtures("little_from_3000")
def test_many_units_are_reproducible_and_keep_the_small_sample_rules() -> None:
    frame = candidates(5_000, seed=5, shift=0.2, subtasks=2)
    first, second = figures(frame), figures(frame)
    pd.testing.assert_frame_equal(first, second)
    assert (first["low"].notna()).all() and (first["p"].notna() | first.figure.isin(
        ["jsd", "emd"])).all()  # fmt: skip


def test_below_the_threshold_nothing_changes() -> None:
    """Whole bootstraps and random relabellings below LITTLE_FROM units: the same
    figures as an explicit relabelling count would give (p > 0 with its +1)."""
    frame = candidates(600, seed=6, shift=0.0)
    table = figures(frame)
    p = headline(table, "rabbi")["p"]
    assert p >= 1 / 401  # random relabellings, the observed counted once more
    assert units_module.LITTLE_FROM == 20_000
