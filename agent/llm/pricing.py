"""Per-model prices, so each completion's cost can be computed from its token usage."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_SNAPSHOT_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|\d{4})$")


@dataclass(frozen=True)
class Price:
    """US dollars per one million tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1_000_000


@dataclass(frozen=True)
class PriceTable:
    """Model name -> Price. Lookup is exact, then without a trailing date snapshot suffix.

    The suffix rule lets ``gpt-4o`` price ``gpt-4o-2024-05-13``, the name the API
    echoes back, without letting ``gpt-4o`` price ``gpt-4o-mini``. An unknown
    model has cost None, never 0: a missing price must not look like a free run.
    """

    prices: tuple[tuple[str, Price], ...] = ()

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Price | Mapping[str, float] | Iterable[float]]) -> PriceTable:
        entries = []
        for model, value in mapping.items():
            if isinstance(value, Price):
                price = value
            elif isinstance(value, Mapping):
                price = Price(float(value["input_per_mtok"]), float(value["output_per_mtok"]))
            else:
                inp, out = value
                price = Price(float(inp), float(out))
            entries.append((model, price))
        return cls(tuple(entries))

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {m: {"input_per_mtok": p.input_per_mtok, "output_per_mtok": p.output_per_mtok}
                for m, p in self.prices}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PriceTable:
        return cls.from_mapping(d)

    def price_for(self, model: str) -> Price | None:
        table = dict(self.prices)
        if model in table:
            return table[model]
        base = _SNAPSHOT_SUFFIX.sub("", model)
        return table.get(base)

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        price = self.price_for(model)
        return None if price is None else price.cost(prompt_tokens, completion_tokens)
