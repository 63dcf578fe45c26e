"""A worker thread whose run session finished runs the run's next session itself (agent/services/handover.py):
no message for it, the run still ends with every question answered, and nothing is lost when the chain stops."""

from __future__ import annotations

import pytest

from agent.models import AgentSession, DatabaseGrant, LLMEndpoint
from agent.services import handover, leases, sessions
from annotations.runs import services
from annotations.runs.models import Run
from annotations.runs.services import dispatch
from tests.conftest import group_of_testers
from tests.support.run_dataset import replay_script, write_dataset

# Transactions commit for real: a session is handed over once the pass that started it has committed.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run_of(tmp_path, replay_llm, monkeypatch):
    """A run of ``n`` questions launched at ``concurrency``; the session messages it publishes are recorded
    (in ``published``) instead of sent."""
    published: list[int] = []
    monkeypatch.setattr(leases, "enqueue_many_on_commit",
                        lambda task, arg_lists, **kwargs: published.extend(args[0] for args in arg_lists))

    def launch(n: int, concurrency: int) -> Run:
        dataset = services.dataset_import(kind="jsonl", path=write_dataset(tmp_path / "d", n), name="handover",
                                          build_indexes=True)
        for database_id in set(dataset.questions.exclude(database=None).values_list("database_id", flat=True)):
            DatabaseGrant.objects.get_or_create(database_id=database_id, group=group_of_testers())
        server = replay_llm(replay_script(n))
        if concurrency > 8:  # the environment's endpoint allows 8 at once
            LLMEndpoint.objects.create(name="wide", base_url=server.url, model="replay-model", is_default=True,
                                       max_concurrency=concurrency)
        run = services.run_create_agent(dataset=dataset, name="handover", max_concurrency=concurrency,
                                        zero_shot=True)
        services.run_dispatch(run=run)
        return run

    launch.published = published
    return launch


def execute(pk: int) -> None:
    sessions.session_execute(session_id=pk)


def test_a_finished_sessions_thread_runs_the_runs_next_questions_without_a_message(run_of):
    run = run_of(6, concurrency=2)
    first = list(run_of.published)
    assert len(first) == 2
    ran = handover.run_chain(first[0], execute=execute, publish=leases.publish_handed_back, limit=32)
    # Each finished session's pass started the next question and gave it to this thread: 4 waiting, 4 run here.
    assert len(ran) == 4
    assert run_of.published == first  # no message beyond the launch's
    handover.run_chain(first[1], execute=execute, publish=leases.publish_handed_back, limit=32)
    run.refresh_from_db()
    assert run.status == Run.Status.EVALUATING
    assert all(item.predicted_sql for item in run.items.all())
    assert set(AgentSession.objects.values_list("status", flat=True)) == {"answered"}


def test_the_chain_stops_at_its_limit_and_the_next_session_is_published(run_of):
    run_of(6, concurrency=2)
    first = list(run_of.published)
    ran = handover.run_chain(first[0], execute=execute, publish=leases.publish_handed_back, limit=2)
    assert len(ran) == 2
    # The third pass found the offer used up: its session went out as a message, marked published.
    assert len(run_of.published) == 3
    assert AgentSession.objects.get(pk=run_of.published[-1]).queued_at is not None


def test_a_stopping_worker_publishes_what_was_handed_over_instead_of_running_it(run_of):
    run_of(4, concurrency=1)
    (first,) = run_of.published
    stop = {"now": False}

    def execute_then_stop(pk: int) -> None:
        execute(pk)
        stop["now"] = True  # warm shutdown began while this session ran (after its pass handed one over)

    ran = handover.run_chain(first, execute=execute_then_stop, publish=leases.publish_handed_back, limit=32,
                             stopping=lambda: stop["now"])
    assert ran == []
    handed, = run_of.published[1:]
    session = AgentSession.objects.get(pk=handed)
    assert session.status == "queued" and session.queued_at is not None  # its own message now


def test_a_handed_over_session_that_is_interrupted_is_queued_again_once_and_the_chain_ends(run_of):
    run_of(4, concurrency=1)
    (first,) = run_of.published
    calls = []

    def interrupted_after_first(pk: int) -> None:
        calls.append(pk)
        if len(calls) == 2:  # a transient fault as session_execute meets it: requeued (published), then raised
            lease = sessions._claim(pk)
            assert leases.requeue(session_id=pk, lease=lease)
            raise sessions.SessionInterrupted(f"session {pk}: the database went away")
        execute(pk)

    ran = handover.run_chain(first, execute=interrupted_after_first, publish=leases.publish_handed_back, limit=32)
    assert len(ran) == 1 and len(calls) == 2
    assert run_of.published[1:] == ran  # once, by its requeue: a message of its own, not kept by this thread
    assert AgentSession.objects.get(pk=ran[0]).status == "queued"


def test_a_handed_over_session_left_unclaimed_is_marked_for_the_next_sweep(run_of):
    # Handed over but its worker died before claiming it: stored without queued_at, as a failed publish is, so
    # the next heartbeat's sweep publishes it (not the lost-message sweep minutes later).
    run_of(3, concurrency=1)
    (first,) = run_of.published

    class WorkerDied(BaseException):
        pass

    def die_on_handover(pk: int) -> None:
        if pk != first:
            raise WorkerDied
        execute(pk)

    with pytest.raises(WorkerDied):
        handover.run_chain(first, execute=die_on_handover, publish=lambda ids: None, limit=32)
    orphan = AgentSession.objects.exclude(pk=first).get()
    assert orphan.status == "queued" and orphan.queued_at is None
    assert leases.republish_failed() == [orphan.pk]


def test_a_requeued_session_is_published_never_kept_by_its_own_thread(run_of, monkeypatch):
    # Only the pass filling a finished session's slot hands over; a session's own requeue (a transient fault)
    # publishes it for another delivery, as before.
    run_of(2, concurrency=1)
    (first,) = run_of.published

    def requeue_instead(pk: int) -> None:
        lease = sessions._claim(pk)
        assert leases.requeue(session_id=pk, lease=lease)

    assert handover.run_chain(first, execute=requeue_instead, publish=leases.publish_handed_back, limit=32) == []
    assert run_of.published == [first, first]


def test_outside_a_chain_every_session_is_published(run_of):
    run_of(3, concurrency=1)
    (first,) = run_of.published
    execute(first)  # as a caller without an offer (``ask --inline``, an eager task)
    assert len(run_of.published) == 2


def test_a_thread_waiting_for_a_batch_is_handed_a_session_by_the_pass_that_fills_it(run_of, monkeypatch):
    import threading
    import time

    from django.db import connection

    from tests.annotations.runs.test_run_dispatch import _finish

    # Concurrency 16: a pass waits for 4 free slots. The first to finish waits on the run (long enough here for
    # the test to finish three more); the fourth's pass starts four sessions and hands one to the waiting thread.
    monkeypatch.setattr(dispatch, "DISPATCH_BATCH_WAIT_S", 30)
    run = run_of(24, concurrency=16)
    first = list(run_of.published)
    handed: list[int] = []

    def finish_then_run_handed(pk: int) -> None:
        if pk == first[0]:
            _finish(pk)
            services.run_session_finished(session_id=pk)
        else:
            handed.append(pk)

    def waiter() -> None:
        try:
            handover.run_chain(first[0], execute=finish_then_run_handed, publish=leases.publish_handed_back,
                               limit=32)
        finally:
            connection.close()

    thread = threading.Thread(target=waiter)
    started = time.monotonic()
    thread.start()
    while run.pk not in handover._waiting:
        assert thread.is_alive() and time.monotonic() - started < 20
        time.sleep(0.01)
    for pk in first[1:4]:
        _finish(pk)
    services.run_session_finished(session_id=first[3])  # a batch: this pass starts four sessions
    thread.join(20)
    assert not thread.is_alive() and time.monotonic() - started < 20  # woken by the pass, not by its wait
    new = list(AgentSession.objects.filter(run_items__run=run).exclude(pk__in=first).values_list("pk", flat=True))
    assert len(new) == 4 and len(handed) == 1 and handed[0] in new
    # Three went out as messages; the handed one did not, and is stored unpublished (the sweep's if it is lost).
    assert sorted(run_of.published[16:]) == sorted(set(new) - set(handed))
    assert AgentSession.objects.get(pk=handed[0]).queued_at is None
    assert handover._waiting == {}


def test_a_thread_already_handed_a_session_does_not_wait_for_another_pass():
    import time

    # E.g. its own pass handed it one, then its next pass was skipped for another worker holding the run.
    handover._local.offer = handover._Offer(remaining=3, until=None, stopping=lambda: False)
    handover._local.offer.taken.append(7)
    try:
        started = time.monotonic()
        assert handover.wait_for_pass(1, 30) is True
        assert time.monotonic() - started < 1 and handover._waiting == {}
    finally:
        handover._local.offer = None
