"""Run dispatch: a finished session fills its slot at once, the run's concurrency is never exceeded however many
sessions end together, a dispatch pass costs the same at any run size, beat's poll starts what a finished session
could not, resume re-runs every failed question, and the evaluation is queued as its own task."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent.models import AgentSession, Database, DatabaseGrant, LLMEndpoint
from agent.services import sessions
from annotations.runs import services
from annotations.runs.models import Run
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


def test_a_launch_above_one_batch_fills_every_slot_committing_batch_by_batch(make_dataset, replay_llm,
                                                                           django_capture_on_commit_callbacks):
    """A run launched at concurrency 40 starts all 40 sessions in one dispatch, in batches of START_BATCH each
    published when its own transaction commits: the first questions start before the last are set up."""
    dataset = make_dataset(50)
    replay_llm(replay_script(1))
    run = services.run_create_agent(dataset=dataset, name="wide", max_concurrency=40, zero_shot=True)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert services.run_dispatch(run=run) is True
    assert len(queued()) == 40 and run.items.filter(session__isnull=False).count() == 40
    batches = -(-40 // services.dispatch.START_BATCH)
    assert len(callbacks) == batches  # one publish per committed batch, not one at the end


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


def _finish(pk: int) -> None:
    AgentSession.objects.filter(pk=pk).update(status="answered", final_sql="SELECT 1", finished_at=timezone.now())


def _in_flight(run) -> int:
    return AgentSession.objects.filter(run_items__run=run, status__in=["queued", "running"]).count()


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


def test_sessions_started_together_are_each_published_and_a_failed_publish_leaves_each_for_the_sweep(
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

    monkeypatch.setattr(task, "apply_async", lambda args, kwargs=None, **options: sent.append(args))
    created = create(3)
    assert sent == [(s.pk,) for s in created]  # a message each, once the sessions are committed

    def second_fails(args, kwargs=None, **options):
        sent.append(args)
        if len(sent) == 5:
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


def test_a_runs_sessions_use_the_endpoint_it_was_launched_with_not_the_workers_environment(
        make_dataset, replay_llm, settings):
    dataset = make_dataset(3)
    server = replay_llm(replay_script(3))
    LLMEndpoint.objects.filter(is_default=True).update(is_default=False)
    saved = LLMEndpoint.objects.create(name="launched", base_url=server.url, model="replay-model", is_default=True,
                                       max_concurrency=3)
    run = services.run_create_agent(dataset=dataset, name="endpoint", max_concurrency=1, zero_shot=True)
    settings.T2S = {**settings.T2S, "LLM_MODEL": "another-model"}  # what a worker's environment may say
    services.run_dispatch(run=run)
    first = AgentSession.objects.get()
    assert first.llm_endpoint == saved and first.config["llm"]["model"] == "replay-model"
    saved.delete()  # gone: the next sessions get a copy of the snapshot, same endpoint name and model
    _finish(first.pk)
    services.run_session_finished(session_id=first.pk)
    second = AgentSession.objects.exclude(pk=first.pk).get()
    assert second.llm_endpoint is None and second.config["llm"]["endpoint"] == "launched"
    assert second.config["llm"]["model"] == "replay-model" and second.config["llm"]["base_url"] == server.url


def test_questions_on_a_database_still_being_indexed_wait_and_beats_poll_starts_them_once_it_is_ready(
        make_dataset, replay_llm):
    dataset = make_dataset(3)
    replay_llm(replay_script(3))
    database = dataset.questions.first().database
    Database.objects.filter(pk=database.pk).update(index_status=Database.IndexStatus.BUILDING)
    run = services.run_create_agent(dataset=dataset, name="indexing", max_concurrency=2, zero_shot=True)
    assert services.run_dispatch(run=run) is True  # waits, neither failed nor scored
    assert AgentSession.objects.count() == 0 and not run.items.exclude(prediction_note="").exists()
    Database.objects.filter(pk=database.pk).update(index_status=Database.IndexStatus.READY)
    assert services.runs_poll() == [run.pk]  # nothing else would start them: no session of the run ended yet
    assert _in_flight(run) == 2


def test_a_cancelled_run_is_not_dispatched_by_the_poll(make_dataset, replay_llm):
    dataset = make_dataset(3)
    replay_llm(replay_script(3))
    run = services.run_create_agent(dataset=dataset, name="cancelled", max_concurrency=2, zero_shot=True)
    services.run_cancel(run=run)
    assert services.runs_poll() == [] and services.run_dispatch(run=run) is False
    assert AgentSession.objects.count() == 0


def test_resume_reruns_every_llm_error_even_one_that_kept_a_prediction_and_every_failed_or_missing_question(
        make_dataset, replay_llm):
    from tests.support.run_dataset import question

    dataset = make_dataset(4)
    q = [question(i) for i in range(4)]
    server = replay_llm({"scripts": {
        q[0][0]: [f'Thought: a\nAction: ExecuteSQL("{q[0][1]}")', "Thought: ok\nAction: Done"],
        # ran a query, then the provider failed for good: its query is kept as the prediction, yet it is re-run
        q[1][0]: [f'Thought: b\nAction: ExecuteSQL("{q[1][1]}")', {"fault": "http", "status": 400},
                  f'Thought: b\nAction: ExecuteSQL("{q[1][1]}")', "Thought: ok\nAction: Done"],
        q[2][0]: [{"fault": "http", "status": 400}, f'Thought: c\nAction: ExecuteSQL("{q[2][1]}")',
                  "Thought: ok\nAction: Done"],
        q[3][0]: [f'Thought: d\nAction: ExecuteSQL("{q[3][1]}")', "Thought: ok\nAction: Done"],
    }})
    run = services.run_create_agent(dataset=dataset, name="resumable", max_concurrency=4, zero_shot=True)
    services.run_dispatch(run=run)
    last = AgentSession.objects.get(question=q[3][0])
    sessions.session_cancel(session=last)  # the fourth never ran: cancelled while queued
    for session in AgentSession.objects.exclude(pk=last.pk):
        sessions.session_execute(session_id=session.pk)
    assert dict(AgentSession.objects.values_list("question", "status")) == {
        q[0][0]: "answered", q[1][0]: "llm_error", q[2][0]: "llm_error", q[3][0]: "cancelled"}
    assert AgentSession.objects.get(question=q[1][0]).final_sql == q[1][1]
    calls = len(server.chat_requests())
    services.run_resume(run=run)
    services.run_dispatch(run=run)
    rerun = AgentSession.objects.filter(status="queued")
    assert sorted(rerun.values_list("question", flat=True)) == sorted([q[1][0], q[2][0], q[3][0]])
    for pk in list(rerun.values_list("pk", flat=True)):
        sessions.session_execute(session_id=pk)
    run.refresh_from_db()
    assert run.status == Run.Status.EVALUATING and len(server.chat_requests()) == calls + 6
    assert sorted(run.items.values_list("predicted_sql", flat=True)) == sorted(sql for _, sql in q)
