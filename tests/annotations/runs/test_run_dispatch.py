"""Run dispatch: a finished session fills its slot at once, a dispatch pass costs the same at any run size,
the evaluation is queued as its own task, and the ETA comes from the observed completion rate."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent.models import AgentSession, DatabaseGrant
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
