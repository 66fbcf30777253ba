"""The one quantile rule (vidpipe/quantiles.py): nearest rank, None without data."""

from __future__ import annotations

import math

import pytest

from vidpipe.quantiles import bucket_quantile, quantile, quantile_of


def test_nearest_rank_over_sorted_values() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert quantile(values, 0.0) == 1.0
    assert quantile(values, 1.0) == 100.0
    assert quantile(values, 0.95) == 95.0  # rank round(0.95 * 99) = 94
    assert quantile(values, 0.5) in (50.0, 51.0)


def test_a_value_of_the_data_never_an_interpolation() -> None:
    assert quantile_of([0.010, 0.500], 0.95) in (0.010, 0.500)


def test_order_does_not_matter_and_empty_is_none() -> None:
    assert quantile_of([3.0, 1.0, 2.0], 0.5) == 2.0
    assert quantile([], 0.5) is None
    assert quantile_of(iter(()), 0.95) is None


def test_q_outside_0_1_is_clamped() -> None:
    assert quantile([1.0, 2.0], -1.0) == 1.0
    assert quantile([1.0, 2.0], 2.0) == 2.0


def test_bucket_quantile_between_two_snapshots() -> None:
    before = {0.05: 10.0, 0.1: 10.0, 0.2: 10.0, math.inf: 10.0}
    # 100 new observations: 50 <= 0.05, 40 in (0.05, 0.1], 8 in (0.1, 0.2], 2 above
    after = {0.05: 60.0, 0.1: 100.0, 0.2: 108.0, math.inf: 110.0}
    assert bucket_quantile(before, after, 0.5) == 0.05
    assert bucket_quantile(before, after, 0.9) == 0.1
    assert bucket_quantile(before, after, 0.95) == 0.2
    assert bucket_quantile(before, after, 1.0) == math.inf
    assert bucket_quantile(after, after, 0.95) is None


@pytest.mark.parametrize("q", [0.5, 0.95])
def test_bucket_quantile_without_before_counts_from_zero(q: float) -> None:
    assert bucket_quantile({}, {0.1: 4.0, math.inf: 4.0}, q) == 0.1
