"""The gate hook: every strategy passes each LLM call through it, and a refused call ends the run with its
message, the turns before it kept."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from agent.llm import CallRefused, GatedChatModel, LLMClient, LLMSettings, PlannedCall
from agent.strategies import STRATEGIES, SessionContext, Status, TurnRecord, create_strategy
from tests.support.replay_server import ReplayServer

STEP = 'Thought: count them\nAction: ExecuteSQL("SELECT count(*) FROM singer")\n```sql\nSELECT count(*) FROM singer\n```'


class AllowFirst:
    """Lets ``allowed`` calls through, refuses the next; records what each call planned."""

    def __init__(self, allowed: int) -> None:
        self.allowed = allowed
        self.planned: list[PlannedCall] = []
        self.held = 0

    @contextmanager
    def __call__(self, call: PlannedCall):
        self.planned.append(call)
        if len(self.planned) > self.allowed:
            raise CallRefused("Daily budget reached: test")
        self.held += 1
        try:
            yield
        finally:
            self.held -= 1


def client_for(server: ReplayServer) -> LLMClient:
    return LLMClient(LLMSettings(base_url=server.url, api_key="k", model="replay-model", timeout_s=5.0,
                                 max_retries=0, max_tokens=77))


def test_gated_model_gives_the_gate_the_messages_and_the_token_ceiling() -> None:
    gate = AllowFirst(1)
    with ReplayServer(["hello"]) as server:
        llm = GatedChatModel(client_for(server), gate)
        assert llm.complete([{"role": "user", "content": "hi"}]).text == "hello"
        with pytest.raises(CallRefused, match="Daily budget reached"):
            llm.complete([{"role": "user", "content": "again"}], max_tokens=5)
        assert len(server.chat_requests()) == 1  # the refused call never left the process
    assert gate.planned[0].max_tokens == 77 and gate.planned[1].max_tokens == 5
    assert gate.held == 0 and llm.settings.model == "replay-model"


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_strategy_stops_at_a_refused_call_and_keeps_its_turns(name, tools) -> None:
    gate = AllowFirst(1)
    stored: list[TurnRecord] = []
    with ReplayServer({"default": [STEP] * 20}) as server:
        strategy = create_strategy(name, {})
        ctx = SessionContext(question="How many singers are there?", schema=tools.schema)
        outcome = strategy.run(ctx, tools=tools, llm=GatedChatModel(client_for(server), gate),
                               on_turn=stored.append)
        requests = server.chat_requests()
    assert len(requests) == 1 and len(gate.planned) == 2
    assert outcome.status == Status.LLM_ERROR and outcome.error == "Daily budget reached: test"
    llm_turns = [t for t in stored if t.messages]
    assert llm_turns[0].completion is not None
    assert llm_turns[-1].completion is None and llm_turns[-1].error == "Daily budget reached: test"
