from __future__ import annotations

import math

import pytest

from annotations.evaluation.ves import drop_outliers, r_ves, time_ratio, ves_reward


@pytest.mark.parametrize(
    ("ratio", "reward"),
    [(0, 0.0), (5.0, 1.25), (2.0, 1.25), (1.99, 1.0), (1.0, 1.0), (0.5, 0.75), (0.25, 0.5), (0.2, 0.25)],
)
def test_reward_buckets(ratio, reward):
    assert ves_reward(ratio) == reward


def test_outliers_beyond_three_sigma_are_dropped():
    values = [1.0] * 20 + [100.0]
    assert drop_outliers(values) == [1.0] * 20
    assert drop_outliers([1.0, 1.1, 0.9]) == [1.0, 1.1, 0.9]


def test_equal_ratios_are_kept_where_the_official_filter_keeps_none():
    assert drop_outliers([2.0, 2.0, 2.0]) == [2.0, 2.0, 2.0]
    assert drop_outliers([]) == []


def test_time_ratio_is_gold_over_prediction():
    assert time_ratio([2.0, 2.0, 2.0], [1.0, 1.0, 1.0]) == 2.0
    assert time_ratio([1.0], [0.0]) == 0.0


def test_r_ves_is_mean_square_root_reward_in_percent():
    assert r_ves([1.0, 0.25]) == pytest.approx(75.0)
    assert r_ves([1.25]) == pytest.approx(100 * math.sqrt(1.25))
    assert r_ves([0.0, 0.0]) == 0.0
    assert r_ves([]) is None
