"""The gate every LLM call of a session passes (``agent.llm.gate``), at each HTTP attempt: the account's daily
budget, then one of the endpoint's concurrency slots, held until the attempt returns
(``agent/services/llm_slots.py``)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from agent.conf import agent_settings
from agent.llm import ChatModel, GatedChatModel, PlannedCall, PriceTable
from agent.models import LLMEndpoint

from . import budgets, llm_slots


def endpoint_concurrency(name: str) -> int:
    """The endpoint record's ``max_concurrency`` now (an edit applies to the next call); the endpoint set by
    environment variables, which has no record, takes ``LLM_MAX_CONCURRENCY``."""
    found = LLMEndpoint.objects.filter(name=name).values_list("max_concurrency", flat=True).first()
    if found is None:
        return max(1, int(agent_settings.LLM_MAX_CONCURRENCY))
    return int(found or LLMEndpoint._meta.get_field("max_concurrency").default)


def session_gate(*, user, llm_snapshot: Mapping[str, Any], deadline: float | None = None):
    """A gate for the calls of one session billed to ``user`` (None: an operator's command, no budget).
    ``deadline`` (``time.monotonic()``): the session's wall-clock limit, which also bounds a wait for a slot."""
    prices = PriceTable.from_dict(llm_snapshot.get("prices") or {})
    model = str(llm_snapshot.get("model") or "")
    endpoint = str(llm_snapshot.get("endpoint") or "environment")

    @contextmanager
    def gate(call: PlannedCall) -> Iterator[None]:
        budgets.check_budget(user=user, call=call, prices=prices, model=model)
        wait_s = None if deadline is None else max(0.0, min(float(agent_settings.LLM_SLOT_WAIT_S),
                                                            deadline - time.monotonic()))
        with llm_slots.slot(endpoint, endpoint_concurrency(endpoint), wait_s=wait_s):
            yield

    return gate


def gated(llm: ChatModel, *, user, llm_snapshot: Mapping[str, Any], deadline: float | None = None) -> GatedChatModel:
    return GatedChatModel(llm, session_gate(user=user, llm_snapshot=llm_snapshot, deadline=deadline))
