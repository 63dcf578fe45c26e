"""Run dispatch: a finished session fills its slot at once, a dispatch pass costs the same at any run size,
the evaluation is queued as its own task, and the ETA comes from the observed completion rate."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent.models import AgentSession, DatabaseGrant, LLMEndpoint
from agent.services import handover, sessions
from annotations.runs import services
from annotations.runs.models import Run
from annotations.runs.services import dispatch
from tests.conftest import group_of_testers
from tests.support.run_dataset import replay_script, write_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def make_dataset(tmp_path):
    def make(n: int, name: str = "built"):
        path = write_dataset(tmp_path / name, n)
        dataset = services.dataset_import(kind="jsonl", path=path, name=name, build_indexes=True)
        for database_id in set(dataset.questions.exclude(database=None).values_list("database_id", flat=True)):
            DatabaseGrant.objects.get_or_create(database_id=database_id, group=group_of_testers())
        return dataset
    return make


def queued() -> list[int]:
    return list(AgentSession.objects.filter(status="queued").order_by("pk").values_list("pk", flat=True))


def test_a_finished_session_starts_the_next_question_at_once_and_the_last_queues_the_evaluation(
        make_dataset, replay_llm, django_capture_on_commit_callbacks):
    dataset = make_dataset(4)
    replay_llm(replay_script(4))
    run = services.run_create_agent(dataset=dataset, name="chain", max_concurrency=2, zero_shot=True)
    assert services.run_dispatch(run=run) is True
    assert len(queued()) == 2
    executed = 0
    # Only the workers run from here on: no dispatch poll. Each finished session starts the next question.
    while queued():
        for pk in queued():
            sessions.session_execute(session_id=pk)
            executed += 1
        assert AgentSession.objects.filter(status__in=["queued", "running"]).count() <= 2
    assert executed == 4
    run.refresh_from_db()
    # The last one queued the evaluation as its own task; nothing was scored inside a session's task.
    assert run.status == Run.Status.EVALUATING and run.evaluated_at is None
    assert all(i.predicted_sql for i in run.items.all())
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.run_evaluate_queue(run=run)
    assert len(callbacks) == 1
    services.run_evaluate(run=run)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE and run.totals["correct"] == 4


def _dispatch_queries(run) -> int:
    with CaptureQueriesContext(connection) as ctx:
        services.run_dispatch(run=run)
    return len(ctx.captured_queries)


def test_a_dispatch_pass_costs_the_same_for_a_run_of_10_or_300_questions(make_dataset, replay_llm):
    replay_llm(replay_script(1))
    counts = []
    for n in (10, 300):
        dataset = make_dataset(n, name=f"size{n}")
        run = services.run_create_agent(dataset=dataset, name=f"r{n}", max_concurrency=3, zero_shot=True)
        services.run_dispatch(run=run)  # starts 3
        # Two of them finish: the next pass collects them and starts two more.
        for pk in queued()[:2]:
            AgentSession.objects.filter(pk=pk).update(status="answered", final_sql="SELECT 1",
                                                      finished_at=timezone.now())
        counts.append(_dispatch_queries(run))
        AgentSession.objects.filter(status__in=["queued", "running"]).update(status="cancelled")
    assert counts[0] == counts[1]


def test_the_eta_follows_the_observed_completion_rate(make_dataset, replay_llm):
    dataset = make_dataset(10)
    replay_llm(replay_script(1))
    run = services.run_create_agent(dataset=dataset, name="eta", max_concurrency=8, zero_shot=True)
    services.run_dispatch(run=run)
    now = timezone.now()
    # 2 of 10 done in the 60 s since the first session started: 8 left at 2 per minute is about 240 s.
    for k, pk in enumerate(queued()):
        values = {"started_at": now - timedelta(seconds=60)}
        if k < 2:
            values.update(status="answered", final_sql="SELECT 1", finished_at=now)
        AgentSession.objects.filter(pk=pk).update(**values)
    services.run_dispatch(run=run)
    progress = services.run_progress(run=run)
    assert progress["finished"] == 2 and progress["total"] == 10
    assert 230 <= progress["eta_s"] <= 250


def _finish(pk: int) -> None:
    AgentSession.objects.filter(pk=pk).update(status="answered", final_sql="SELECT 1", finished_at=timezone.now())


def _in_flight(run) -> int:
    return AgentSession.objects.filter(run_items__run=run, status__in=["queued", "running"]).count()


def _launched_at_16(dataset, replay_llm, name: str):
    """A run of ``dataset`` launched at concurrency 16 (an endpoint that allows it): the run and its first 16
    sessions, queued."""
    server = replay_llm(replay_script(1))
    LLMEndpoint.objects.create(name="wide", base_url=server.url, model="replay-model", is_default=True,
                               max_concurrency=16)
    run = services.run_create_agent(dataset=dataset, name=name, max_concurrency=16, zero_shot=True)
    services.run_dispatch(run=run)
    first = queued()
    assert len(first) == 16
    return run, first


def test_a_finished_session_waits_for_a_batch_of_free_slots_and_the_run_still_ends_without_a_poll(
        make_dataset, replay_llm, monkeypatch):
    # At concurrency 16 a finished session's pass runs once 4 slots are free (dispatch.DISPATCH_BATCH_SHARE):
    # the first to finish waits a moment, three more end meanwhile and the last one's pass fills all four.
    assert dispatch.DISPATCH_BATCH_MAX == 4 and 16 // dispatch.DISPATCH_BATCH_SHARE == 4
    run, first = _launched_at_16(make_dataset(24), replay_llm, "batch")
    waits = []

    def others_finish(run_id, seconds):
        waits.append((run_id, seconds))
        assert AgentSession.objects.count() == 16  # nothing started yet for the lone free slot
        for pk in first[1:4]:
            _finish(pk)
        services.run_session_finished(session_id=first[3])  # as its own thread would, during the wait
        return False  # no session handed to this thread (it has no session task's offer here)

    monkeypatch.setattr(handover, "wait_for_pass", others_finish)
    _finish(first[0])
    services.run_session_finished(session_id=first[0])
    assert waits == [(run.pk, dispatch.DISPATCH_BATCH_WAIT_S)]  # the fourth, with a batch, did not wait
    assert AgentSession.objects.count() == 20 and run.items.filter(predicted_sql="SELECT 1").count() == 4
    monkeypatch.setattr(handover, "wait_for_pass", lambda run_id, seconds: False)
    assert _in_flight(run) == 16
    # The rest finish one by one, with no poll: the last one's pass collects everything and queues the scoring.
    while queued():
        for pk in queued():
            _finish(pk)
            services.run_session_finished(session_id=pk)
            assert _in_flight(run) <= 16
    run.refresh_from_db()
    assert run.status == Run.Status.EVALUATING
    assert run.items.filter(predicted_sql="SELECT 1").count() == 24


postgres_only = pytest.mark.skipif(connection.vendor != "postgresql",
                                   reason="skipping a locked run needs SELECT ... SKIP LOCKED (PostgreSQL)")


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_session_that_finishes_during_another_pass_skips_its_own_and_that_pass_fills_its_slot(
        make_dataset, replay_llm, monkeypatch):
    import threading

    dataset = make_dataset(6)
    replay_llm(replay_script(1))
    run = services.run_create_agent(dataset=dataset, name="skip", max_concurrency=2, zero_shot=True)
    services.run_dispatch(run=run)
    s0, s1 = queued()
    entered, release = threading.Event(), threading.Event()
    original = dispatch._start_sessions
    calls = []

    def paused(run_, items, *args):
        calls.append(len(items))
        if len(calls) == 1:  # the holder's first pass stops here, the run's row locked
            entered.set()
            assert release.wait(30)
        return original(run_, items, *args)

    monkeypatch.setattr(dispatch, "_start_sessions", paused)
    _finish(s0)

    def holder():
        try:
            services.run_dispatch(run=run)  # the poll's pass: collects s0, starts one
        finally:
            connection.close()

    thread = threading.Thread(target=holder)
    thread.start()
    assert entered.wait(30)
    _finish(s1)
    done = threading.Event()
    # The finished session as in another worker process: it does not see this process's passes, only the row lock.
    monkeypatch.setattr(dispatch, "_passing", {})
    threading.Thread(target=lambda: (services.run_session_finished(session_id=s1), connection.close(),
                                     done.set())).start()
    # The finished session does not queue up behind the holder's lock: it returns, having done nothing.
    assert done.wait(10)
    assert not run.items.filter(session_id=s1).exclude(predicted_sql="").exists()
    monkeypatch.undo()  # the holder's own process again
    monkeypatch.setattr(dispatch, "_start_sessions", paused)
    release.set()
    thread.join(30)
    # The holder looked again after its commit: s1 is collected and its slot filled.
    assert run.items.get(session_id=s1).predicted_sql == "SELECT 1"
    assert AgentSession.objects.count() == 4 and _in_flight(run) == 2
    assert calls == [1, 1]


@pytest.mark.parametrize("started_here", [True, False], ids=["started-by-this-process", "started-elsewhere"])
def test_a_session_finishing_while_a_thread_of_its_worker_passes_over_the_run_leaves_it_to_that_pass(
        make_dataset, replay_llm, monkeypatch, started_here):
    # Started here, it first waits for that pass to hand its thread a session (none here: no session task).
    waits = []
    monkeypatch.setattr(handover, "wait_for_pass", lambda run_id, seconds: waits.append(run_id) or False)
    dataset = make_dataset(6)
    replay_llm(replay_script(1))
    run = services.run_create_agent(dataset=dataset, name="sibling", max_concurrency=2, zero_shot=True)
    services.run_dispatch(run=run)
    s0, s1 = queued()
    original = dispatch._start_sessions
    calls, finisher_queries = [], []

    def during_the_pass(run_, items, *args):
        calls.append(len(items))
        if len(calls) == 1:  # s1 ends while this pass holds the run (a sibling thread would, at this moment)
            _finish(s1)
            if not started_here:  # another worker process started it (or this one restarted since)
                dispatch._started_runs.pop(s1, None)
            with CaptureQueriesContext(connection) as ctx:
                services.run_session_finished(session_id=s1)
            finisher_queries.extend(q["sql"] for q in ctx.captured_queries)
        return original(run_, items, *args)

    monkeypatch.setattr(dispatch, "_start_sessions", during_the_pass)
    _finish(s0)
    services.run_dispatch(run=run)
    # It only counted its run's finished sessions, waiting between counts for the holder to hand its thread a
    # session (here the holder is paused, so it gave up after DISPATCH_SKIPPED_TRIES, with no count after the
    # last wait): no transaction, no lock, no pass.
    tries = dispatch.DISPATCH_SKIPPED_TRIES
    assert len(finisher_queries) == tries and all("FOR UPDATE" not in sql for sql in finisher_queries)
    assert all(sql.startswith("WITH r AS") for sql in finisher_queries)
    assert waits == [run.pk] * (tries + 1 if started_here else tries)
    # The holder looked again after its pass: s1 is collected and its slot filled.
    assert run.items.get(session_id=s1).predicted_sql == "SELECT 1"
    assert AgentSession.objects.count() == 4 and _in_flight(run) == 2
    assert calls == [1, 1]
    assert dispatch._passing == {}


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_sessions_finishing_at_once_in_many_threads_never_exceed_the_concurrency_and_the_run_ends(
        make_dataset, replay_llm):
    import threading
    import time

    n, concurrency = 40, 4
    dataset = make_dataset(n)
    replay_llm(replay_script(1))
    run = services.run_create_agent(dataset=dataset, name="storm", max_concurrency=concurrency, zero_shot=True)
    services.run_dispatch(run=run)
    taken: set[int] = set()
    lock = threading.Lock()
    peak, errors = [0], []
    stop = threading.Event()

    def finisher():
        try:
            deadline = time.monotonic() + 120
            while not stop.is_set() and time.monotonic() < deadline:
                with lock:
                    pk = next((p for p in queued() if p not in taken), None)
                    if pk is not None:
                        taken.add(pk)
                if pk is None:
                    if Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).exists():
                        time.sleep(0.01)
                        continue
                    return
                _finish(pk)
                services.run_session_finished(session_id=pk)  # no poll anywhere in this test
        except Exception as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    def monitor():
        while not stop.is_set():
            peak[0] = max(peak[0], _in_flight(run))
            time.sleep(0.002)
        connection.close()

    threads = [threading.Thread(target=finisher) for _ in range(6)]
    watcher = threading.Thread(target=monitor)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(150)
    stop.set()
    watcher.join(10)
    assert not errors
    assert peak[0] <= concurrency
    run.refresh_from_db()
    assert run.status == Run.Status.EVALUATING
    assert AgentSession.objects.count() == n
    assert run.items.filter(predicted_sql="SELECT 1").count() == n


def test_sessions_started_together_are_each_checked_and_a_refused_one_is_noted_on_its_item(
        make_dataset, replay_llm, django_capture_on_commit_callbacks):
    from agent.models import Database

    dataset = make_dataset(3)
    replay_llm(replay_script(3))
    run = services.run_create_agent(dataset=dataset, name="refused", max_concurrency=3, zero_shot=True)
    database = dataset.questions.first().database
    specs = [sessions.SessionSpec(database=database, question=" Which one?\x00 "),
             sessions.SessionSpec(database=database, question=""),
             sessions.SessionSpec(database=database, question="x" * (sessions.MAX_QUESTION_CHARS + 1))]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        out = sessions.session_create_many(specs=specs, strategy="interactive_t2s",
                                           endpoint=sessions.default_llm_endpoint(), zero_shot=True)
    assert isinstance(out[0], AgentSession) and out[0].pk and out[0].status == "queued"
    assert AgentSession.objects.get(pk=out[0].pk).question == "Which one?\ufffd"  # cleaned as a save would
    assert out[1].message_dict == {"question": ["Write a question."]}
    assert "question" in out[2].message_dict
    assert len(callbacks) == 1  # only the stored session is published
    # A database that broke after the launch: its questions are not run, with the reason, and the run ends.
    Database.objects.filter(pk=database.pk).update(status=Database.Status.ERROR)
    assert services.run_dispatch(run=run) is False
    notes = set(run.items.values_list("prediction_note", flat=True))
    assert notes == {f"not run: {database.name} is not ready (Error)."}
    run.refresh_from_db()
    assert run.status == Run.Status.EVALUATING


def test_sessions_started_together_are_stored_as_one_started_alone_is_each_under_its_own_id(make_dataset, replay_llm,
                                                                                            user):
    dataset = make_dataset(1)
    replay_llm(replay_script(1))
    database = dataset.questions.first().database
    endpoint = sessions.default_llm_endpoint()
    questions = ["First?", "Second, with 'quotes' and \\ and é?", "First?", "Fourth?"]
    many = sessions.session_create_many(
        specs=[sessions.SessionSpec(database=database, question=q, evidence=f"e{k}", question_key=f"key{k}")
               for k, q in enumerate(questions)],
        strategy="interactive_t2s", endpoint=endpoint, zero_shot=True, billed_to=user)
    alone = sessions.session_create(database=database, question="Fourth?", evidence="e3", zero_shot=True,
                                    endpoint=endpoint, billed_to=user, enqueue=False)
    alone.refresh_from_db()
    assert len({s.pk for s in many}) == 4
    for k, (session, question) in enumerate(zip(many, questions, strict=True)):
        stored = AgentSession.objects.get(pk=session.pk)  # the returned object names its own row
        assert (stored.question, stored.evidence, stored.config["question_key"]) == (question, f"e{k}", f"key{k}")
        assert stored.created_at is not None and abs(stored.created_at - alone.created_at) < timedelta(seconds=60)
    stored = AgentSession.objects.get(pk=many[3].pk)
    differ = {f.attname for f in AgentSession._meta.concrete_fields
              if getattr(stored, f.attname) != getattr(alone, f.attname)}
    assert differ <= {"id", "created_at", "queued_at", "config"}
    assert {**stored.config, "question_key": None} == {**alone.config, "question_key": None}
    assert stored.result is None and AgentSession.objects.filter(pk=stored.pk, result__isnull=True).exists()


def test_sessions_started_together_are_published_through_one_producer_and_a_failed_batch_leaves_each_for_the_sweep(
        make_dataset, replay_llm, monkeypatch, django_capture_on_commit_callbacks):
    from celery import current_app
    from kombu.exceptions import OperationalError as KombuOperationalError

    from agent.services import leases

    dataset = make_dataset(1)
    replay_llm(replay_script(1))
    database = dataset.questions.first().database
    task = current_app.tasks[leases.RUN_SESSION_TASK]
    sent = []

    def create(n: int):
        with django_capture_on_commit_callbacks(execute=True):
            return sessions.session_create_many(
                specs=[sessions.SessionSpec(database=database, question=f"Q{k}?") for k in range(n)],
                strategy="interactive_t2s", endpoint=sessions.default_llm_endpoint(), zero_shot=True)

    monkeypatch.setattr(task, "apply_async",
                        lambda args, producer=None, **options: sent.append((args, producer, options)))
    created = create(3)
    assert [args for args, _, _ in sent] == [(s.pk,) for s in created]
    assert sent[0][1] is not None and all(producer is sent[0][1] for _, producer, _ in sent)  # one producer
    # What a monitor (flower, celery events) shows of each message: the session's id, as Celery would show it.
    assert [options["argsrepr"] for _, _, options in sent] == [f"({s.pk},)" for s in created]

    calls = []

    def second_fails(args, producer=None, **options):
        calls.append(args)
        if len(calls) == 2:
            raise KombuOperationalError("Error 111 connecting to 127.0.0.1:6399. Connection refused.")

    monkeypatch.setattr(task, "apply_async", second_fails)
    created = create(3)  # the caller is not failed by the broker
    # Every session of the batch is marked for the next sweep (one sent already runs once all the same).
    assert set(AgentSession.objects.filter(queued_at__isnull=True).values_list("pk", flat=True)) == \
        {s.pk for s in created}
    assert all(s.status == "queued" for s in AgentSession.objects.filter(pk__in=[s.pk for s in created]))


def test_a_runs_sessions_get_the_endpoint_record_as_saved_or_a_copy_of_the_snapshot_once_it_is_gone(db):
    from decimal import Decimal

    saved = LLMEndpoint.objects.create(name="priced", base_url="http://127.0.0.1:9/v1", model="m1",
                                       input_price_per_mtok=Decimal("0.1500"), output_price_per_mtok=Decimal("0.6"),
                                       max_concurrency=3, timeout_s=12.5, max_retries=1, max_tokens=256,
                                       allowed_models=["m2", "m3"])
    snapshot = sessions.llm_snapshot(saved)
    read = sessions.endpoint_from_snapshot(snapshot)
    orm = LLMEndpoint.objects.get(pk=saved.pk)
    assert read.pk == saved.pk
    for field in LLMEndpoint._meta.concrete_fields:  # each column as the ORM reads it, types included
        assert getattr(read, field.attname) == getattr(orm, field.attname), field.name
        assert type(getattr(read, field.attname)) is type(getattr(orm, field.attname)), field.name
    LLMEndpoint.objects.filter(pk=saved.pk).update(model="other")  # not the model the run was launched with
    copy = sessions.endpoint_from_snapshot(snapshot)
    assert copy.pk is None and copy.model == "m1" and copy.input_price_per_mtok == 0.15
    saved.delete()
    assert sessions.endpoint_from_snapshot(snapshot).pk is None


def test_a_pass_reads_the_endpoint_record_with_the_runs_lock_as_the_orm_reads_it(make_dataset, replay_llm):
    from decimal import Decimal

    dataset = make_dataset(1)
    server = replay_llm(replay_script(1))
    LLMEndpoint.objects.filter(is_default=True).update(is_default=False)
    saved = LLMEndpoint.objects.create(name="priced", base_url=server.url, model="replay-model", is_default=True,
                                       input_price_per_mtok=Decimal("0.1500"), max_concurrency=3, timeout_s=12.5,
                                       allowed_models=["m2"])
    run = services.run_create_agent(dataset=dataset, name="endpoint", zero_shot=True)
    with transaction.atomic():
        _, _, record = dispatch._locked_run(run.pk, skip_locked=False)
    read, orm = sessions.endpoint_from_snapshot(run.config["llm"], record=record), LLMEndpoint.objects.get(pk=saved.pk)
    for field in LLMEndpoint._meta.concrete_fields:  # each column as the ORM reads it, types included
        assert getattr(read, field.attname) == getattr(orm, field.attname), field.name
        assert type(getattr(read, field.attname)) is type(getattr(orm, field.attname)), field.name
    saved.delete()
    with transaction.atomic():
        _, _, record = dispatch._locked_run(run.pk, skip_locked=False)
    assert set(record) == {None}  # no record of that name: a copy of the snapshot
    copy = sessions.endpoint_from_snapshot(run.config["llm"], record=record)
    assert copy.pk is None and (copy.name, copy.model, copy.timeout_s) == ("priced", "replay-model", 12.5)


def test_a_lone_free_slot_is_filled_after_a_bounded_wait_when_no_second_session_ends(
        make_dataset, replay_llm, monkeypatch):
    # The last session of a wave of an LLM-bound run: the next to end may be a whole session away.
    run, first = _launched_at_16(make_dataset(20), replay_llm, "lone")
    waits = []
    monkeypatch.setattr(handover, "wait_for_pass", lambda run_id, seconds: waits.append(seconds) or False)
    _finish(first[0])
    services.run_session_finished(session_id=first[0])
    assert waits == [dispatch.DISPATCH_BATCH_WAIT_S] and dispatch.DISPATCH_BATCH_WAIT_S <= 0.1
    assert AgentSession.objects.count() == 17 and _in_flight(run) == 16
    assert run.items.get(session_id=first[0]).predicted_sql == "SELECT 1"


def test_the_last_question_starts_as_soon_as_one_slot_is_free_not_when_a_batch_is(make_dataset, replay_llm):
    # At concurrency 16 a pass waits for 2 free slots, but one question is left.
    run, first = _launched_at_16(make_dataset(17), replay_llm, "last")
    _finish(first[0])
    services.run_session_finished(session_id=first[0])
    assert AgentSession.objects.count() == 17 and _in_flight(run) == 16
    assert run.items.get(session_id=first[0]).predicted_sql == "SELECT 1"
    # Nothing is left to start: the next finished sessions wait for a batch again (the last one ends the run).
    _finish(first[1])
    services.run_session_finished(session_id=first[1])
    assert run.items.get(session_id=first[1]).predicted_sql == ""
    for pk in queued():
        _finish(pk)
        services.run_session_finished(session_id=pk)
    run.refresh_from_db()
    assert run.status == Run.Status.EVALUATING and run.items.filter(predicted_sql="SELECT 1").count() == 17
