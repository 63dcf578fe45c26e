"""A session whose LLM provider goes away waits for it instead of failing, and its page says so meanwhile."""

import threading
import time

import pytest

from agent.models import AgentSession, LLMEndpoint
from agent.services import sessions
from tests.support.replay_server import ReplayServer

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = ['Thought: count\nAction: ExecuteSQL("SELECT count(*) FROM artist")', "Thought: ok\nAction: Done"]


def poll(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_a_session_waits_out_its_provider_and_shows_it_is_waiting(user_client, demo_database):
    with ReplayServer(SCRIPT) as server:
        LLMEndpoint.objects.create(name="flaky", base_url=server.url, model="replay-model", max_retries=0,
                                   is_default=True, api_key_env="OPENAI_API_KEY")
        created = user_client.post("/api/sessions/", {"database": "chinook", "question": "How many artists?"},
                                   content_type="application/json")
        assert created.status_code == 201, created.content
        session = AgentSession.objects.get(pk=created.json()["id"])
        server.go_down()
        worker = threading.Thread(target=sessions.session_execute, kwargs={"session_id": session.pk})
        worker.start()
        try:
            poll(lambda: AgentSession.objects.filter(pk=session.pk, waiting_for_llm_since__isnull=False).exists())
            page = user_client.get(session.get_absolute_url()).content.decode()
            assert "waiting for the LLM provider" in page
            assert user_client.get(f"/api/sessions/{session.pk}/").json()["waiting_for_llm_since"]
        finally:
            server.come_back()
            worker.join(60)
    session.refresh_from_db()
    assert session.status == AgentSession.Status.ANSWERED and session.waiting_for_llm_since is None
    assert "waiting for the LLM provider" not in user_client.get(session.get_absolute_url()).content.decode()
