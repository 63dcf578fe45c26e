"""R-VES, the reward-based valid efficiency score of BIRD mini-dev (``evaluation_ves.py``).

Per question: if the prediction is correct, time gold and prediction
``runs`` times, average the ratios gold_time / pred_time after dropping
outliers (outside mean +/- 3 standard deviations), and map the ratio to a
reward; the score is mean(sqrt(reward)) * 100 over the questions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# (lower bound of time ratio, reward), checked from the top.
_REWARDS = ((2.0, 1.25), (1.0, 1.0), (0.5, 0.75), (0.25, 0.5))


def drop_outliers(values: Sequence[float]) -> list[float]:
    """Keep values strictly within mean +/- 3 population standard deviations.

    When every value is equal the official filter keeps nothing and then
    divides by zero (the question scores 0); we keep them all instead.
    """
    if not values:
        return []
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    if std == 0:
        return list(values)
    return [v for v in values if mean - 3 * std < v < mean + 3 * std]


def time_ratio(gold_times: Sequence[float], pred_times: Sequence[float]) -> float:
    """Mean of gold/pred time ratios over paired runs, outliers dropped; 0 when there is nothing to time."""
    ratios = [g / p for g, p in zip(gold_times, pred_times, strict=True) if p > 0]
    kept = drop_outliers(ratios)
    return sum(kept) / len(kept) if kept else 0.0


def ves_reward(ratio: float) -> float:
    """The R-VES reward of one correct prediction; 0 for a ratio of 0 (wrong or untimed)."""
    if ratio <= 0:
        return 0.0
    for bound, reward in _REWARDS:
        if ratio >= bound:
            return reward
    return 0.25


def r_ves(rewards: Sequence[float]) -> float | None:
    """mean(sqrt(reward)) * 100 over the questions; None when there are none."""
    if not rewards:
        return None
    return sum(math.sqrt(r) * 100 for r in rewards) / len(rewards)
