"""Each kind of work has its own queue, so a long evaluation or index build never holds up a session."""

from __future__ import annotations

import pytest

from t2s_site.celery import QUEUES, app


@pytest.mark.parametrize(("task", "queue"), [
    ("agent.tasks.run_session", "sessions"),
    ("agent.tasks.recover_stale_sessions", "dispatch"),
    ("agent.tasks.refresh_database", "indexes"),
    ("annotations.tasks.dispatch_run", "dispatch"),
    ("annotations.tasks.poll_runs", "dispatch"),
    ("annotations.tasks.evaluate_run", "evaluation"),
])
def test_each_task_is_routed_to_its_queue(task: str, queue: str) -> None:
    app.loader.import_default_modules()
    assert task in app.tasks
    assert app.amqp.router.route({}, task)["queue"].name == queue


def test_unrouted_work_goes_to_the_default_queue_and_a_plain_worker_consumes_every_queue() -> None:
    assert app.amqp.router.route({}, "some.other.task")["queue"].name == "celery"
    # A worker without -Q consumes app.amqp.queues: all five, which is what `make run` starts.
    assert set(app.amqp.queues) == set(QUEUES) == {"sessions", "dispatch", "indexes", "evaluation", "celery"}


def test_a_routed_message_reaches_its_queue_only() -> None:
    # Queues bound to one shared exchange and key would each get a copy of every message.
    bindings = {(q.exchange.name, q.routing_key) for q in app.amqp.queues.values()}
    assert len(bindings) == len(QUEUES)
    route = app.amqp.router.route({}, "agent.tasks.run_session")
    assert (route["queue"].exchange.name, route["queue"].routing_key) == ("sessions", "sessions")


def test_beat_polls_running_runs_and_no_dispatch_message_is_held_unacknowledged() -> None:
    from annotations.conf import annotations_settings

    app.loader.import_default_modules()
    app.finalize()
    poll = app.conf.beat_schedule["poll-runs"]
    assert poll["task"] == "annotations.tasks.poll_runs"
    assert poll["schedule"] == float(annotations_settings.DISPATCH_POLL_S) == poll["options"]["expires"]
    # Acknowledged on receipt: a broker restart finds no dispatch message unacknowledged in a worker (kombu fails
    # to restore one there), and a lost one is made up for by the next poll.
    for name in ("annotations.tasks.poll_runs", "annotations.tasks.dispatch_run"):
        assert app.tasks[name].acks_late is False
