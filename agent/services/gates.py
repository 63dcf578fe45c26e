"""The gate every LLM call of a session passes (``agent.llm.gate``): the account's daily budget, then one of
the endpoint's concurrency slots, held until the call returns (``agent/services/llm_slots.py``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from agent.llm import ChatModel, GatedChatModel, PlannedCall, PriceTable
from agent.models import LLMEndpoint

from . import budgets, llm_slots


def endpoint_concurrency(name: str) -> int:
    """The endpoint record's ``max_concurrency`` now (an edit applies to the next call), else the field default."""
    limit = LLMEndpoint.objects.filter(name=name).values_list("max_concurrency", flat=True).first()
    return int(limit or LLMEndpoint._meta.get_field("max_concurrency").default)


def session_gate(*, user, llm_snapshot: Mapping[str, Any]):
    """A gate for the calls of one session started by ``user`` (None: an operator's command, no budget)."""
    prices = PriceTable.from_dict(llm_snapshot.get("prices") or {})
    model = str(llm_snapshot.get("model") or "")
    endpoint = str(llm_snapshot.get("endpoint") or "environment")

    @contextmanager
    def gate(call: PlannedCall) -> Iterator[None]:
        budgets.check_budget(user=user, call=call, prices=prices, model=model)
        with llm_slots.slot(endpoint, endpoint_concurrency(endpoint)):
            yield

    return gate


def gated(llm: ChatModel, *, user, llm_snapshot: Mapping[str, Any]) -> GatedChatModel:
    return GatedChatModel(llm, session_gate(user=user, llm_snapshot=llm_snapshot))
