from __future__ import annotations

import pytest

from agent.llm import Price, PriceTable

TABLE = PriceTable.from_mapping({
    "gpt-4o": Price(2.5, 10.0),
    "gpt-4o-mini": {"input_per_mtok": 0.15, "output_per_mtok": 0.6},
    "local": (0, 0),
})


def test_cost_per_million_tokens() -> None:
    assert TABLE.cost("gpt-4o", 1_000_000, 100_000) == pytest.approx(2.5 + 1.0)


def test_dated_snapshot_uses_its_base_model_price() -> None:
    assert TABLE.price_for("gpt-4o-2024-05-13") == Price(2.5, 10.0)
    assert TABLE.price_for("gpt-4o-mini-2024-07-18") == Price(0.15, 0.6)


def test_prefix_of_another_model_is_not_its_price() -> None:
    table = PriceTable.from_mapping({"gpt-4o": (2.5, 10.0)})
    assert table.price_for("gpt-4o-mini") is None


def test_unknown_model_costs_none_and_a_free_model_costs_zero() -> None:
    assert TABLE.cost("mystery", 10, 10) is None
    assert TABLE.cost("local", 10, 10) == 0.0


def test_round_trip_through_dict() -> None:
    assert PriceTable.from_dict(TABLE.to_dict()) == TABLE
