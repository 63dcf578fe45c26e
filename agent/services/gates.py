"""The gate every LLM call of a session passes (``agent.llm.gate``): the account's daily budget first."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from agent.llm import ChatModel, GatedChatModel, PlannedCall, PriceTable

from . import budgets


def session_gate(*, user, llm_snapshot: Mapping[str, Any]):
    """A gate for the calls of one session started by ``user`` (None: an operator's command, no budget)."""
    prices = PriceTable.from_dict(llm_snapshot.get("prices") or {})
    model = str(llm_snapshot.get("model") or "")

    @contextmanager
    def gate(call: PlannedCall) -> Iterator[None]:
        budgets.check_budget(user=user, call=call, prices=prices, model=model)
        yield

    return gate


def gated(llm: ChatModel, *, user, llm_snapshot: Mapping[str, Any]) -> GatedChatModel:
    return GatedChatModel(llm, session_gate(user=user, llm_snapshot=llm_snapshot))
