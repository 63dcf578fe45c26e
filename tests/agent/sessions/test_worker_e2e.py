"""The whole path: session service -> broker -> real Celery worker -> replay LLM over HTTP -> tools -> stored turns."""

import time

import pytest

from agent.models import AgentSession, Turn
from agent.services import sessions
from tests.support.worker import WorkerProcess, purge_broker

pytestmark = pytest.mark.django_db(transaction=True)

COUNT_SQL = "SELECT count(*) FROM singer"


@pytest.fixture
def worker(tmp_path):
    purge_broker()
    process = WorkerProcess(tmp_path)
    yield process
    process.stop()


def wait_for(predicate, timeout=60, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_session_runs_on_the_worker_and_every_turn_is_stored(spider_database, replay_llm, worker):
    db = spider_database("concert_singer")
    replay_llm([f'Thought: count\nAction: ExecuteSQL("{COUNT_SQL}")', "Thought: ok\nAction: Done"])
    worker.start()
    session = sessions.session_create(database=db, question="How many singers are there?")
    wait_for(lambda: not AgentSession.objects.get(pk=session.pk).is_active, what="the session to finish")
    session.refresh_from_db()
    assert session.status == AgentSession.Status.ANSWERED, session.error
    assert session.final_sql == COUNT_SQL and session.result["rows"] == [[6]]
    assert [t.tool for t in Turn.objects.for_session(session)] == ["ExecuteSQL", "Done"]


def test_worker_killed_mid_session_then_restarted_resumes_from_stored_turns(spider_database, replay_llm, worker):
    db = spider_database("concert_singer")
    server = replay_llm([
        'Thought: find her\nAction: SearchValue("Joe Sharp")',
        # The worker dies while waiting for this answer: the server has served it, nobody stores it.
        {"text": f'Thought: lost\nAction: ExecuteSQL("{COUNT_SQL}")', "latency_ms": 4000},
        f'Thought: count\nAction: ExecuteSQL("{COUNT_SQL}")',
        "Thought: ok\nAction: Done",
    ])
    worker.start()
    session = sessions.session_create(database=db, question="How many singers are there?")
    wait_for(lambda: Turn.objects.filter(session=session).count() == 1, what="the first turn")
    wait_for(lambda: len(server.chat_requests()) == 2, what="the second LLM call")
    worker.kill()
    stored = Turn.objects.get(session=session, index=0)
    assert stored.tool == "SearchValue" and "Joe Sharp" in stored.observation
    assert AgentSession.objects.get(pk=session.pk).status == AgentSession.Status.RUNNING
    # Restarted under the same name, the worker requeues what its previous process held, without waiting
    # for the session to look stale.
    worker.start()
    wait_for(lambda: not AgentSession.objects.get(pk=session.pk).is_active, what="the resumed session to finish")
    session.refresh_from_db()
    turns = list(Turn.objects.for_session(session))
    assert [(t.index, t.thought) for t in turns] == [(0, "find her"), (1, "count"), (2, "ok")]
    assert session.status == AgentSession.Status.ANSWERED and session.final_sql == COUNT_SQL
    assert session.attempts == 2
    assert len(server.chat_requests()) == 4
