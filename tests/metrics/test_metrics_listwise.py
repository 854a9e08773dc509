"""Listwise figures: selection rates, ΔDP, impact ratios, position bias and consistency,
checked against hand and independent computations, and their intervals' coverage by
simulation (names with their own effects, pools shown in a Latin square of orders)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from biasaudit.metrics import kendall_w, latin_square, listwise_figures

GROUPS = ("W_M", "W_F", "B_M", "B_F")
RACE = {"W_M": "White", "W_F": "White", "B_M": "Black", "B_F": "Black"}
SEX = {"W_M": "male", "W_F": "female", "B_M": "male", "B_F": "female"}


def simulate(
    seed: int,
    *,
    pools: int = 60,
    names: int = 12,
    resumes: int = 10,
    group_effect: dict[str, float] | None = None,
    slot_effect: float = 0.0,
    name_sd: float = 0.5,
    fresh_names: bool = False,
) -> pd.DataFrame:
    """Answers of a Plackett-Luce ranker (Gumbel utilities) to pools of one candidate
    per group, each pool shown in the Latin square's orders; utility = group effect +
    the name's own effect + the resume's + a bonus for slot 1."""
    rng = np.random.default_rng(seed)
    effect = group_effect or {}
    name_effects = {g: rng.normal(0, name_sd, names) for g in GROUPS}
    resume_effects = rng.normal(0, 0.3, resumes)
    orders = latin_square(len(GROUPS))
    rows = []
    answer = 0
    for pool in range(pools):
        picked = {g: int(rng.integers(names)) for g in GROUPS}
        if fresh_names:
            name_effects = {g: rng.normal(0, name_sd, names) for g in GROUPS}
        items = rng.choice(resumes, size=len(GROUPS), replace=False)
        for order in orders:
            utility = []
            for slot, index in enumerate(order, 1):
                group = GROUPS[index]
                value = effect.get(group, 0.0) + name_effects[group][picked[group]]
                value += resume_effects[items[index]] + (slot_effect if slot == 1 else 0.0)
                utility.append(value + rng.gumbel())
            ranks = np.empty(len(order), dtype=int)
            ranks[np.argsort(-np.array(utility))] = np.arange(1, len(order) + 1)
            for slot, index in enumerate(order, 1):
                group = GROUPS[index]
                rows.append(
                    {"answer": answer, "pool": pool, "group": group, "slot": slot,
                     "rank": float(ranks[slot - 1]), "subtask": "job",
                     "name": f"{group}-{picked[group]}", "item": f"r{items[index]}"}
                )  # fmt: skip
            answer += 1
    return pd.DataFrame(rows)


def true_top1(group_effect: dict[str, float], slot_effect: float, draws: int = 400_000) -> dict:
    """Each group's top-1 rate over fresh names and resumes (Monte Carlo)."""
    rng = np.random.default_rng(99)
    n = len(GROUPS)
    utility = np.array([[group_effect.get(g, 0.0) for g in GROUPS]] * draws)
    utility += rng.normal(0, 0.5, (draws, n)) + rng.normal(0, 0.3, (draws, n))
    slots = np.array([rng.permutation(n) for _ in range(2000)])[rng.integers(0, 2000, draws)]
    utility += np.where(slots == 0, slot_effect, 0.0) + rng.gumbel(size=(draws, n))
    winners = utility.argmax(axis=1)
    found = {g: float((winners == i).mean()) for i, g in enumerate(GROUPS)}
    reference = GROUPS.index("W_M")
    for i, g in enumerate(GROUPS):  # RABBI of ranks: P(above W_M) - P(below)
        found[f"rabbi {g}"] = float(np.sign(utility[:, i] - utility[:, reference]).mean())
    return found


def test_latin_square_puts_every_candidate_in_every_slot_once() -> None:
    for size in range(1, 9):
        square = np.array(latin_square(size))
        assert square.shape == (size, size)
        for axis in (0, 1):
            assert (np.sort(square, axis=axis) == np.arange(size).reshape(
                (1, size) if axis == 1 else (size, 1))).all()  # fmt: skip
    # Williams (even sizes): every ordered pair of neighbours appears exactly once.
    square = latin_square(4)
    pairs = {(row[i], row[i + 1]) for row in square for i in range(3)}
    assert len(pairs) == 12


def test_kendall_w_by_hand() -> None:
    assert kendall_w(np.array([[1, 2, 3], [1, 2, 3], [1, 2, 3]], float)) == pytest.approx(1.0)
    assert kendall_w(np.array([[1, 2, 3], [3, 2, 1]], float)) == pytest.approx(0.0)
    # Three raters, four objects: sums 4, 8, 9, 9 (mean 7.5): S = 12.25+0.25+2.25+2.25 = 17;
    # W = 12 * 17 / (9 * 60) = 0.3778.
    ranks = np.array([[1, 2, 3, 4], [2, 1, 4, 3], [1, 3, 2, 4]], float)
    # sums: 4, 6, 9, 11 -> deviations from 7.5: -3.5, -1.5, 1.5, 3.5: S = 29
    assert kendall_w(ranks) == pytest.approx(12 * 29 / (9 * 60))


def small() -> pd.DataFrame:
    """Two pools of three, each shown in two orders; the fourth answer ranks only its top."""
    rows = [
        # answer, pool, group, slot, rank, name
        (0, "p", "A", 1, 1, "a1"), (0, "p", "B", 2, 2, "b1"), (0, "p", "C", 3, 3, "c1"),
        (1, "p", "B", 1, 2, "b1"), (1, "p", "C", 2, 3, "c1"), (1, "p", "A", 3, 1, "a1"),
        (2, "q", "A", 1, 2, "a2"), (2, "q", "B", 2, 1, "b2"), (2, "q", "C", 3, 3, "c2"),
        (3, "q", "C", 1, 1, "c2"), (3, "q", "A", 2, math.nan, "a2"),
        (3, "q", "B", 3, math.nan, "b2"),
        (4, "q", "A", 1, math.nan, "a2"), (4, "q", "B", 2, math.nan, "b2"),
        (4, "q", "C", 3, math.nan, "c2"),
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["answer", "pool", "group", "slot", "rank", "name"])


def test_small_answers_by_hand() -> None:
    found = listwise_figures(small(), reference="A", k_max=2, replicates=50, permutations=0)
    rates = found.rates.set_index(["group", "k"])
    # k = 1 over the four ranked answers: A first in answers 0, 1; B in 2; C in 3.
    assert rates.loc[("A", 1), "rate"] == pytest.approx(2 / 4)
    assert rates.loc[("B", 1), "rate"] == pytest.approx(1 / 4)
    assert rates.loc[("C", 1), "rate"] == pytest.approx(1 / 4)
    # k = 2 over the three answers that ranked two or more: A and B are in the top 2 of
    # answers 0, 1 and 2; C never.
    assert rates.loc[("A", 2), "rate"] == pytest.approx(1.0)
    assert rates.loc[("B", 2), "rate"] == pytest.approx(1.0)
    assert rates.loc[("C", 2), "rate"] == pytest.approx(0.0)
    assert rates.loc[("C", 2), "n"] == 3
    gaps = found.gaps.set_index(["group", "k"])
    assert gaps.loc[("B", 1), "dp_gap"] == pytest.approx(-0.25)
    assert gaps.loc[("C", 2), "dp_gap"] == pytest.approx(0 - 1.0)
    # First choices by slot: answers 0 slot 1, 1 slot 3, 2 slot 2, 3 slot 1.
    slots = found.slots.set_index("slot")["rate"]
    assert list(slots) == pytest.approx([0.5, 0.25, 0.25])
    entropy = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)) / math.log(3)
    assert found.slot_entropy == pytest.approx(entropy)
    assert found.answers == 5 and found.ranked == 4
    # Pool p: both answers put A first (change 0) and agree fully (W = 1); pool q: tops B
    # and C differ (change 1), only one full ranking (no W).
    assert found.top_change == pytest.approx(0.5) and found.top_change_pools == 2
    assert found.concordance == pytest.approx(1.0) and found.concordance_pools == 1


def test_rates_match_an_independent_computation() -> None:
    shown = simulate(3, pools=30, group_effect={"B_M": -0.6})
    found = listwise_figures(shown, reference="W_M", k_max=3, replicates=100, permutations=0)
    for k in (1, 2, 3):
        expected = (shown["rank"] <= k).groupby(shown["group"]).mean()
        got = found.rates[found.rates["k"] == k].set_index("group")["rate"]
        assert got.to_dict() == pytest.approx(expected.to_dict())
        gaps = found.gaps[found.gaps["k"] == k].set_index("group")["dp_gap"]
        for group, gap in gaps.items():
            assert gap == pytest.approx(expected[group] - expected["W_M"])
        names = shown.groupby("group")["name"].nunique()
        units = found.rates[found.rates["k"] == k].set_index("group")["units"]
        assert units.to_dict() == names.to_dict()
        sizes = found.gaps[found.gaps["k"] == k].set_index("group")
        assert (sizes["n_reference"] == (shown["group"] == "W_M").sum()).all()


def test_impact_ratios_by_hand_for_race_sex_and_intersections() -> None:
    shown = simulate(4, pools=40, group_effect={"B_F": -0.8, "B_M": -0.3})
    found = listwise_figures(
        shown, reference="W_M", k_max=1, categories={"race": RACE, "sex": SEX},
        replicates=200, permutations=0,
    )  # fmt: skip
    top = shown[shown["rank"] == 1]
    for category, mapping in (("race", RACE), ("sex", SEX), ("group", {g: g for g in GROUPS})):
        values = shown["group"].map(mapping)
        rates = (shown["rank"] == 1).groupby(values).mean()
        table = found.impact[found.impact["category"] == category].set_index("value")
        for value, rate in rates.items():
            assert table.loc[value, "rate"] == pytest.approx(rate)
            assert table.loc[value, "ratio"] == pytest.approx(rate / rates.max())
            assert table.loc[value, "flagged"] == (rate / rates.max() < 0.8)
            low, high = table.loc[value, "low"], table.loc[value, "high"]
            assert low <= table.loc[value, "ratio"] + 1e-9 and high <= 1.0 + 1e-9
            assert table.loc[value, "beyond_noise"] == (high < 0.8)
    assert len(top) == shown["answer"].nunique()


def test_a_planted_group_and_position_bias_are_found_and_nothing_where_none() -> None:
    biased = listwise_figures(
        simulate(5, pools=80, group_effect={"B_M": -1.0}, slot_effect=1.0),
        reference="W_M", k_max=1, replicates=300, permutations=200,
    )  # fmt: skip
    gap = biased.gaps.set_index("group").loc["B_M"]
    assert gap["high"] < 0
    assert biased.omnibus_p is not None and biased.omnibus_p < 0.01
    first = biased.slots.set_index("slot").loc[1]
    assert first["low"] > 0.25 and biased.slot_test is not None and biased.slot_test.p < 0.001
    fair = listwise_figures(
        simulate(6, pools=80), reference="W_M", k_max=1, replicates=300, permutations=200
    )
    assert all(row.low <= 0 <= row.high for row in fair.gaps.itertuples())
    assert fair.slot_entropy_ci is not None and fair.slot_entropy_ci[1] >= 0.99


def test_intervals_cover_the_planted_values(full_size: bool) -> None:
    """A group's top-1 rate, its ΔDP, its impact ratio and its RABBI of ranks, over 120
    simulated audits of 40 pools with names of their own effect and a position bias
    (``--calibration``; the suite runs 40 and checks only for under-coverage)."""
    effect = {"B_M": -0.5, "W_F": 0.2}
    truth = true_top1(effect, 0.4)
    top1 = {g: truth[g] for g in GROUPS}
    targets = {
        "rate": truth["B_M"],
        "dp_gap": truth["B_M"] - truth["W_M"],
        "ratio": truth["B_M"] / max(top1.values()),
        "rabbi": truth["rabbi B_M"],
    }
    covered = dict.fromkeys(targets, 0)
    trials = 120 if full_size else 40
    for seed in range(trials):
        found = listwise_figures(
            simulate(1000 + seed, pools=40, group_effect=effect, slot_effect=0.4),
            reference="W_M", k_max=1, replicates=300, permutations=0,
        )  # fmt: skip
        impact = found.impact[found.impact["category"] == "group"].set_index("value")
        ranks = found.ranks.set_index("group").loc["B_M"]
        rows = {
            "rate": found.rates.set_index("group").loc["B_M"],
            "dp_gap": found.gaps.set_index("group").loc["B_M"],
            "ratio": impact.loc["B_M"],
            "rabbi": pd.Series({"low": ranks["rabbi_low"], "high": ranks["rabbi_high"]}),
        }
        for figure, row in rows.items():
            covered[figure] += bool(row["low"] <= targets[figure] <= row["high"])
    shares = {figure: count / trials for figure, count in covered.items()}
    low, high = (0.88, 0.995) if full_size else (0.8, 1.0)
    assert all(low <= share <= high for share in shares.values()), shares


def test_first_choices_read_as_chances_count_as_those_chances() -> None:
    """With ``p_first`` (each candidate's chance of being put first, from logprobs), a
    group's top-1 rate is its mean chance and a slot's share the mean chance there."""
    shown = simulate(8, pools=30, group_effect={"B_M": -0.8}, slot_effect=0.7)
    utility = shown["group"].map({"B_M": -0.8}).fillna(0.0) + (shown["slot"] == 1) * 0.7
    weight = np.exp(utility)
    shown["p_first"] = weight / weight.groupby(shown["answer"]).transform("sum")
    found = listwise_figures(
        shown.drop(columns=["rank"]).assign(rank=np.nan), reference="W_M", k_max=3,
        replicates=200, permutations=50,
    )  # fmt: skip
    assert set(found.rates["k"]) == {1}  # chances of the first place say nothing of the rest
    expected = shown.groupby("group")["p_first"].mean()
    got = found.rates.set_index("group")["rate"]
    assert got.to_dict() == pytest.approx(expected.to_dict())
    slots = found.slots.set_index("slot")["rate"]
    assert slots.to_dict() == pytest.approx(shown.groupby("slot")["p_first"].mean().to_dict())
    assert found.concordance is None and found.top_change is None
    assert found.gaps.set_index("group").loc["B_M", "high"] < 0


def test_mean_rank_and_rabbi_of_ranks_match_an_independent_computation() -> None:
    shown = simulate(9, pools=30, group_effect={"B_M": -0.8})
    found = listwise_figures(shown, reference="W_M", k_max=1, replicates=200, permutations=0)
    ranks = found.ranks.set_index("group")
    mean = shown.groupby("group")["rank"].mean()
    reference = shown[shown["group"] == "W_M"].set_index("answer")["rank"]
    for group in GROUPS:
        assert ranks.loc[group, "mean_rank"] == pytest.approx(mean[group])
        assert (
            ranks.loc[group, "mean_rank_low"] <= mean[group] <= ranks.loc[group, "mean_rank_high"]
        )
        if group == "W_M":
            assert math.isnan(ranks.loc[group, "rabbi"])
            continue
        own = shown[shown["group"] == group].set_index("answer")["rank"]
        above = (own < reference[own.index]).mean() - (own > reference[own.index]).mean()
        assert ranks.loc[group, "rabbi"] == pytest.approx(above)
    assert ranks.loc["B_M", "rabbi_high"] < 0 and ranks.loc["B_M", "mean_rank"] > 2.5


def test_the_group_effect_with_position_held_fixed_removes_a_design_that_favours_one() -> None:
    """No group effect, a strong first-slot bonus, and a design that always shows B_F
    first: its plain top-1 rate carries the slot's bonus; held at each slot, it does not."""
    rng = np.random.default_rng(4)
    rows = []
    for answer in range(400):
        others = list(rng.permutation(["W_M", "W_F", "B_M"]))
        order = ["B_F", *others] if answer % 2 == 0 else [*others, "B_F"]
        utility = [2.0 if slot == 0 else 0.0 for slot in range(4)] + rng.gumbel(size=4)
        ranks = np.empty(4)
        ranks[np.argsort(-np.array(utility))] = np.arange(1, 5)
        for slot, group in enumerate(order):
            rows.append(
                {"answer": answer, "pool": answer // 4, "group": group, "slot": slot + 1,
                 "rank": ranks[slot], "name": f"{group}-{rng.integers(8)}"}
            )  # fmt: skip
    shown = pd.DataFrame(rows)
    found = listwise_figures(shown, reference="W_M", k_max=1, replicates=300, permutations=0)
    plain = found.gaps.set_index("group").loc["B_F"]
    fixed = found.fixed.set_index("group").loc["B_F"]
    assert plain["low"] > 0  # shown first in half the answers: favoured
    assert fixed["gap_low"] <= 0 <= fixed["gap_high"]
    by_slot = (
        shown[shown["group"] == "B_F"].groupby("slot")["rank"].apply(lambda r: (r == 1).mean())
    )
    assert fixed["rate"] == pytest.approx(by_slot.mean())


def test_each_subtask_has_its_own_impact_ratios_and_test() -> None:
    """Two jobs, a bias planted in one: each job's impact ratios and omnibus test come
    from its own answers (rates as a group-by of that job's rows), so the bias shows in
    its job only; a file with one job has no per-subtask figures."""
    biased = simulate(21, pools=60, group_effect={"B_F": -1.2})
    fair = simulate(22, pools=60)
    fair["answer"] += biased["answer"].max() + 1
    fair["pool"] += biased["pool"].max() + 1
    biased["subtask"], fair["subtask"] = "nurse", "welder"
    shown = pd.concat([biased, fair], ignore_index=True)
    found = listwise_figures(
        shown, reference="W_M", k_max=1, categories={"race": RACE, "sex": SEX},
        replicates=300, permutations=300,
    )  # fmt: skip
    table = found.by_subtask.set_index(["subtask", "category", "value"])
    for job, rows in shown.groupby("subtask"):
        rates = (rows["rank"] == 1).groupby(rows["group"]).mean()
        for group, rate in rates.items():
            assert table.loc[(job, "group", group), "rate"] == pytest.approx(rate)
            assert table.loc[(job, "group", group), "ratio"] == pytest.approx(rate / rates.max())
    beyond = found.by_subtask[found.by_subtask["beyond_noise"]]
    assert ("nurse", "B_F") in set(zip(beyond["subtask"], beyond["value"], strict=True))
    assert not (beyond["subtask"] == "welder").any()
    tests = found.subtask_tests.set_index("subtask")
    assert tests.loc["nurse", "omnibus_p"] < 0.01 and tests.loc["welder", "omnibus_p"] > 0.05
    assert list(tests["answers"]) == [biased["answer"].nunique(), fair["answer"].nunique()]
    one = listwise_figures(biased, reference="W_M", k_max=1, replicates=100, permutations=0)
    assert one.by_subtask.empty and one.subtask_tests.empty
