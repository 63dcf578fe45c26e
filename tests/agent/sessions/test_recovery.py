"""Nothing stays QUEUED or RUNNING by accident: lost messages are published again, a failed publish does not
reach the user, leases name their worker, a restarted worker takes its own back at once, and a transient
database fault leaves a session resumable, never FAILED, without redoing a stored turn."""

from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError

from agent.models import AgentSession, Turn
from agent.services import leases, sessions

pytestmark = pytest.mark.django_db

QUESTION = "How many singers do we have?"
COUNT_SQL = "SELECT count(*) FROM singer"


def test_a_failed_publish_leaves_the_session_queued_instead_of_failing_the_request(
        spider_database, replay_llm, monkeypatch, django_capture_on_commit_callbacks):
    from t2s_site.celery import app

    db = spider_database("concert_singer")
    replay_llm(["Thought: x\nAction: Done"])

    def broker_down(*args, **kwargs):
        raise KombuOperationalError("Error 111 connecting to 127.0.0.1:6399. Connection refused.")

    monkeypatch.setattr(app.tasks[leases.RUN_SESSION_TASK], "apply_async", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        session = sessions.session_create(database=db, question=QUESTION)
    session.refresh_from_db()
    # marked for the next heartbeat's sweep, not left for the lost-message sweep 300 s later
    assert session.status == AgentSession.Status.QUEUED and session.queued_at is None


def test_a_failed_publish_is_published_again_by_the_next_sweep_not_minutes_later(
        spider_database, replay_llm, monkeypatch, django_capture_on_commit_callbacks):
    from django.core.cache import cache

    from t2s_site.celery import app

    db = spider_database("concert_singer")
    replay_llm(["Thought: x\nAction: Done"])
    task = app.tasks[leases.RUN_SESSION_TASK]
    attempts, sent = [], []

    def broker_down(*args, **kwargs):
        attempts.append(args)
        raise KombuOperationalError("Error 111 connecting to 127.0.0.1:6399. Connection refused.")

    monkeypatch.setattr(task, "apply_async", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        created = [sessions.session_create(database=db, question=QUESTION) for _ in range(3)]
    assert len(attempts) == 3

    def next_sweep():
        cache.delete_many(["t2s:sweep-turn:running", "t2s:sweep-turn:queued"])  # the next heartbeat's turn
        with django_capture_on_commit_callbacks(execute=True):
            return leases.sweep()

    # the broker is still away: each sweep stops at its first failure instead of trying every session (each try
    # can wait out a connection timeout while the keeper's heartbeats wait)
    out = next_sweep()
    assert out["published_again"] == [] and len(attempts) - 3 <= 2
    assert AgentSession.objects.filter(queued_at__isnull=True).count() == 3
    monkeypatch.setattr(task, "apply_async", lambda args=None, kwargs=None, **options: sent.append(args[0]))
    out = next_sweep()  # the broker is back
    assert out["published_again"] == sent == [s.pk for s in created]
    assert not AgentSession.objects.filter(queued_at__isnull=True).exists()
    assert next_sweep()["published_again"] == [] and len(sent) == 3


def test_keepers_and_beats_recovery_task_take_turns_instead_of_repeating_each_others_sweep(
        spider_database, replay_llm, monkeypatch):
    from django.core.cache import cache

    from agent import tasks

    calls = []
    monkeypatch.setattr(leases, "recover_stale", lambda **kwargs: calls.append("running") or {})
    monkeypatch.setattr(leases, "republish_queued", lambda **kwargs: calls.append("queued") or [])
    cache.delete_many(["t2s:sweep-turn:running", "t2s:sweep-turn:queued"])
    leases.sweep()  # one worker's keeper
    leases.sweep()  # another worker's keeper in the same heartbeat
    tasks.recover_stale_sessions()  # Beat's safety net in the same minute
    assert calls == ["running", "queued"]
    cache.delete("t2s:sweep-turn:running")  # a heartbeat later: stale RUNNING sessions again, QUEUED not yet
    tasks.recover_stale_sessions()
    assert calls == ["running", "queued", "running"]


def test_sessions_queued_long_after_their_message_are_published_again(spider_database, replay_llm, monkeypatch):
    from t2s_site.celery import app

    db = spider_database("concert_singer")
    replay_llm(["Thought: x\nAction: Done"])
    old = sessions.session_create(database=db, question=QUESTION, enqueue=False)
    fresh = sessions.session_create(database=db, question=QUESTION, enqueue=False)
    AgentSession.objects.filter(pk=old.pk).update(queued_at=timezone.now() - timedelta(seconds=400))
    sent = []
    monkeypatch.setattr(app.tasks[leases.RUN_SESSION_TASK], "apply_async",
                        lambda args=None, kwargs=None, **options: sent.append(args[0]))
    assert leases.republish_queued(older_than_s=300) == [old.pk]
    assert sent == [old.pk]
    old.refresh_from_db()
    assert timezone.now() - old.queued_at < timedelta(seconds=5)  # not published again at the next sweep
    assert leases.republish_queued(older_than_s=300) == []
    assert fresh.pk not in leases.republish_queued(older_than_s=300)


def test_a_lease_names_its_worker_and_a_restarted_worker_requeues_its_own_at_once(spider_database, replay_llm,
                                                                                 monkeypatch):
    db = spider_database("concert_singer")
    replay_llm(["Thought: x\nAction: Done"])
    mine = sessions.session_create(database=db, question=QUESTION, enqueue=False)
    theirs = sessions.session_create(database=db, question=QUESTION, enqueue=False)
    now = timezone.now()  # both beat a moment ago: neither looks stale
    AgentSession.objects.filter(pk=mine.pk).update(status="running", lease="sessions@box#1", heartbeat_at=now)
    AgentSession.objects.filter(pk=theirs.pk).update(status="running", lease="sessions@other#2", heartbeat_at=now)
    monkeypatch.setattr(leases, "_identity", "sessions@box")
    assert leases.new_lease().startswith("sessions@box#")
    assert leases.reclaim_own() == [mine.pk]
    assert AgentSession.objects.get(pk=mine.pk).status == AgentSession.Status.QUEUED
    assert AgentSession.objects.get(pk=theirs.pk).status == AgentSession.Status.RUNNING


def test_the_keeper_beats_for_held_sessions_and_notices_a_request_to_stop_and_a_takeover(spider_database,
                                                                                         replay_llm):
    db = spider_database("concert_singer")
    replay_llm(["Thought: x\nAction: Done"])
    session = sessions.session_create(database=db, question=QUESTION, enqueue=False)
    past = timezone.now() - timedelta(minutes=5)
    AgentSession.objects.filter(pk=session.pk).update(status="running", lease="me#1", heartbeat_at=past)
    keeper = leases.LeaseKeeper()  # not started: beats are called here
    keeper.hold(session.pk, "me#1")
    keeper.beat()
    assert AgentSession.objects.get(pk=session.pk).heartbeat_at > past and not keeper.lost(session.pk)
    assert not keeper.cancelled(session.pk)
    sessions.session_cancel(session=session)  # a running session: asked to stop before its next round
    keeper.beat()
    assert keeper.cancelled(session.pk)
    AgentSession.objects.filter(pk=session.pk).update(lease="someone-else#2")
    keeper.beat()
    assert keeper.lost(session.pk)


def test_a_database_fault_mid_session_requeues_it_and_it_resumes_without_redoing_stored_turns(
        spider_database, replay_llm):
    db = spider_database("concert_singer")
    server = replay_llm([
        'Thought: one\nAction: SearchValue("Joe Sharp")',
        f'Thought: two\nAction: ExecuteSQL("{COUNT_SQL}")',  # answered, then the database drops: not stored
        f'Thought: two\nAction: ExecuteSQL("{COUNT_SQL}")',  # the call in flight, asked again
        "Thought: three\nAction: Done",
    ])
    turn_inserts = iter([False, True])  # the second turn's INSERT meets a database that went away

    def flaky_database(execute, sql, params, many, context):
        if sql.startswith(f'INSERT INTO "{Turn._meta.db_table}"') and next(turn_inserts, False):
            raise OperationalError("terminating connection due to administrator command")
        return execute(sql, params, many, context)

    session = sessions.session_create(database=db, question=QUESTION, enqueue=False)
    with connection.execute_wrapper(flaky_database), pytest.raises(sessions.SessionInterrupted):
        sessions.session_execute(session_id=session.pk)
    session.refresh_from_db()
    assert session.status == AgentSession.Status.QUEUED and session.lease == "" and not session.error
    assert [t.index for t in Turn.objects.for_session(session)] == [0]
    sessions.session_execute(session_id=session.pk)  # the retry
    session.refresh_from_db()
    assert session.status == AgentSession.Status.ANSWERED and session.final_sql == COUNT_SQL
    assert [(t.index, t.thought) for t in Turn.objects.for_session(session)] == [(0, "one"), (1, "two"), (2, "three")]
    assert len(server.chat_requests()) == 4  # the first call was not asked again; the lost one was


def test_stale_running_sessions_are_requeued_and_given_up_after_max_attempts(spider_database, replay_llm):
    db = spider_database("concert_singer")
    replay_llm(["Thought: x\nAction: Done"])
    dead = sessions.session_create(database=db, question=QUESTION, enqueue=False)
    worn = sessions.session_create(database=db, question=QUESTION, enqueue=False)
    past = timezone.now() - timedelta(seconds=30)
    AgentSession.objects.filter(pk=dead.pk).update(status="running", lease="w#1", heartbeat_at=past, attempts=1)
    AgentSession.objects.filter(pk=worn.pk).update(status="running", lease="w#2", heartbeat_at=past,
                                                   attempts=leases.MAX_ATTEMPTS)
    out = leases.recover_stale(stale_after_s=7)
    assert out == {"failed": 1, "resumed": [dead.pk]}
    assert AgentSession.objects.get(pk=worn.pk).status == AgentSession.Status.FAILED


def test_by_default_a_session_whose_message_the_broker_lost_is_published_again_within_30_seconds(
        spider_database, replay_llm, monkeypatch):
    from django.core.cache import cache

    from agent.conf import agent_settings
    from t2s_site.celery import app

    # Published at most this long ago, and looked at again at least this often.
    assert agent_settings.SESSION_QUEUED_STALE_AFTER_S + leases.queued_sweep_period() <= 30
    db = spider_database("concert_singer")
    replay_llm(["Thought: x\nAction: Done"])
    lost = sessions.session_create(database=db, question=QUESTION, enqueue=False)
    waiting = sessions.session_create(database=db, question=QUESTION, enqueue=False)
    AgentSession.objects.filter(pk=lost.pk).update(
        queued_at=timezone.now() - timedelta(seconds=agent_settings.SESSION_QUEUED_STALE_AFTER_S + 1))
    AgentSession.objects.filter(pk=waiting.pk).update(queued_at=timezone.now())
    sent = []
    monkeypatch.setattr(app.tasks[leases.RUN_SESSION_TASK], "apply_async",
                        lambda args=None, kwargs=None, **options: sent.append(args[0]))
    cache.delete_many(["t2s:sweep-turn:running", "t2s:sweep-turn:queued"])
    assert leases.sweep()["republished"] == [lost.pk] and sent == [lost.pk]
