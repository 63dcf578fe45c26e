"""An endpoint's own timeout and retries, the true latency of a failed call, and a session time limit that
cuts a call in flight."""

import pytest

from agent.models import AgentSession, LLMEndpoint, Turn
from agent.services import sessions

pytestmark = pytest.mark.django_db

QUESTION = "How many singers do we have?"


def endpoint_for(server, **fields) -> LLMEndpoint:
    return LLMEndpoint.objects.create(name="replay", base_url=server.url, model="replay-model", api_key_env="",
                                      is_default=True, **fields)


def test_the_endpoints_timeout_and_retries_apply_and_a_failed_turn_stores_what_its_attempts_took(
        spider_database, replay_llm):
    db = spider_database("concert_singer")
    server = replay_llm([{"fault": "timeout", "delay_ms": 1500}] * 3)
    endpoint_for(server, timeout_s=0.4, max_retries=1)
    session = sessions.session_create(database=db, question=QUESTION, enqueue=False)
    assert session.config["llm"]["timeout_s"] == 0.4 and session.config["llm"]["max_retries"] == 1
    sessions.session_execute(session_id=session.pk)
    session.refresh_from_db()
    turn = Turn.objects.get(session=session)
    assert session.status == AgentSession.Status.LLM_ERROR
    assert turn.llm_attempts == 2 and len(server.chat_requests()) == 2  # one retry, as the endpoint says
    assert "timed out" in turn.error
    # Two attempts of 0.4 s each were waited for: the turn says so instead of 0.
    assert turn.llm_latency_ms >= 800 and session.llm_latency_ms == turn.llm_latency_ms


def test_the_session_time_limit_interrupts_a_call_in_flight(spider_database, replay_llm, settings):
    db = spider_database("concert_singer")
    server = replay_llm([{"text": "Thought: slow\nAction: Done", "latency_ms": 8000}])
    endpoint_for(server, timeout_s=60, max_retries=3)
    settings.T2S = {**settings.T2S, "SESSION_MAX_SECONDS": 1}
    session = sessions.session_create(database=db, question=QUESTION, enqueue=False)
    sessions.session_execute(session_id=session.pk)
    session.refresh_from_db()
    turn = Turn.objects.get(session=session)
    assert session.status == AgentSession.Status.FAILED and "time limit" in session.error
    assert turn.completion is None and turn.llm_attempts == 1  # cut, not retried past the limit
    assert session.elapsed_ms < 8000  # it did not wait for the answer
