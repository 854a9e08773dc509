"""Holm's adjustment and the test read off a normal interval, checked against
independent computations, and the family-wise error rate they promise by simulation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from biasaudit.metrics import holm_adjust, interval_p_value


def holm_by_definition(p: list[float], alpha: float) -> list[bool]:
    """Holm (1979) as a procedure: reject the smallest while p_(i) <= alpha / (m - i + 1)."""
    order = sorted(range(len(p)), key=p.__getitem__)
    rejected = [False] * len(p)
    for rank, index in enumerate(order):
        if p[index] > alpha / (len(p) - rank):
            break
        rejected[index] = True
    return rejected


@pytest.mark.parametrize("seed", range(20))
def test_holm_adjusted_p_values_reject_exactly_as_the_procedure(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = list(rng.uniform(0, 0.2, size=int(rng.integers(1, 12))))
    adjusted = holm_adjust(p)
    for alpha in (0.01, 0.05, 0.1):
        assert [a is not None and a <= alpha for a in adjusted] == holm_by_definition(p, alpha)


def test_holm_keeps_untested_figures_out_of_the_family() -> None:
    assert holm_adjust([0.01, None, 0.04, 0.03]) == [0.03, None, 0.06, 0.06]
    assert holm_adjust([]) == []
    with pytest.raises(ValueError, match="p-values must lie in"):
        holm_adjust([1.5])


def test_the_p_value_of_a_normal_interval_is_scipys() -> None:
    z = stats.norm.ppf(0.975)
    for estimate, se in itertools.product((-0.3, 0.0, 0.05, 0.4), (0.01, 0.1, 0.3)):
        bounds = (estimate - z * se, estimate + z * se)
        expected = 2 * stats.norm.sf(abs(estimate) / se)
        assert interval_p_value(estimate, bounds) == pytest.approx(expected, rel=1e-9)
        assert interval_p_value(estimate, bounds, null=0.8) == pytest.approx(
            2 * stats.norm.sf(abs(estimate - 0.8) / se), rel=1e-9
        )
    # clipped on one side (a rate's interval at 0): the other half gives the SE
    assert interval_p_value(0.05, (0.0, 0.05 + z * 0.1)) == pytest.approx(
        2 * stats.norm.sf(0.5), rel=1e-9
    )
    assert interval_p_value(0.1, None) is None and interval_p_value(0.0, (0.0, 0.0)) == 1.0


def test_a_table_of_null_gaps_shows_a_false_flag_at_most_5_percent_of_the_time() -> None:
    # 7 groups x 5 k, gaps correlated across k (as ΔDP at k and k+1 are) and across
    # groups (the shared reference): unadjusted, most tables would show a flag.
    rng = np.random.default_rng(0)
    z = stats.norm.ppf(0.975)
    groups = 0.5 + 0.5 * np.eye(7)  # the shared reference
    ks = 0.7 ** np.abs(np.subtract.outer(np.arange(5), np.arange(5)))  # neighbouring k
    draws = rng.multivariate_normal(np.zeros(35), np.kron(groups, ks), size=4000)
    any_raw = any_holm = 0
    for gaps in draws:
        p = [interval_p_value(float(g), (float(g) - z, float(g) + z)) for g in gaps]
        any_raw += any(q is not None and q < 0.05 for q in p)
        any_holm += any(q is not None and q < 0.05 for q in holm_adjust(p))
    tables = len(draws)
    assert any_raw / tables > 0.3
    assert any_holm / tables <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / tables)


def test_a_difference_of_rounding_alone_is_no_finding() -> None:
    """A planted constant computed in another order (0.6 and 0.6 - 2e-16) with intervals
    of no width: compare called it a change with p = 1e-300 in a quarter of null pairs."""
    from biasaudit.metrics import interval_p_value, normal_test

    before, after = 0.6, 0.6 - 2.220446049250313e-16
    test = normal_test("order_gap", "explicit", before, [before, before], after,
                       [after - 1e-16, after + 1e-16], 0.95)  # fmt: skip
    assert test is not None and test.p_value == 1.0
    assert interval_p_value(2e-17, [2e-17, 2e-17]) == 1.0
    assert interval_p_value(0.8 + 1e-16, [0.8, 0.8], null=0.8) == 1.0
    # a real difference with no spread is still exact
    assert interval_p_value(0.01, [0.01, 0.01]) < 1e-10
    moved = normal_test("p_yes", None, 0.5, [0.49, 0.51], 0.6, [0.59, 0.61], 0.95)
    assert moved is not None and moved.p_value < 1e-6
