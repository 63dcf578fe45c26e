"""A worker's thread keeps its app-database connection from one task to the next, and drops a broken one.

Tasks run here through Celery's own tracer (the worker's, not eager) in one thread, with the Django fixup's
task handlers connected as a worker connects them and the worker's connection settings applied.
"""

from __future__ import annotations

import threading

import psycopg
import pytest
from celery import signals
from celery.app.trace import build_tracer
from celery.fixups.django import DjangoWorkerFixup
from django.db import connection, connections, transaction

from t2s_site.celery import app, keep_worker_db_connections
from tests.conftest import only_on_postgres_app_database
from tests.support.worker import _database_url

pytestmark = pytest.mark.django_db(transaction=True)


@app.task(name="tests.t2s_site.connection_probe", ignore_result=True)
def connection_probe(seen: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    seen.append(connection.connection)
    if connection.vendor == "postgresql":
        backends.append(connection.connection.info.backend_pid)


backends: list[int] = []  # the PostgreSQL backends the probes ran on


@pytest.fixture
def worker_tasks(monkeypatch):
    """Run tasks as the worker's thread pool does; returns ``run(*calls)``, each call a function's arguments."""
    for key in ("CONN_MAX_AGE", "CONN_HEALTH_CHECKS"):
        monkeypatch.setitem(connections.settings["default"], key, connections.settings["default"][key])
    keep_worker_db_connections()
    fixup = DjangoWorkerFixup(app)
    signals.task_prerun.connect(fixup.on_task_prerun)
    signals.task_postrun.connect(fixup.on_task_postrun)
    trace = build_tracer(connection_probe.name, connection_probe, app=app, eager=False)

    def run(*steps):
        failures = []

        def thread() -> None:
            try:
                for step in steps:
                    step(trace)
            except BaseException as exc:  # reported to the test
                failures.append(exc)
            finally:
                connection.close()

        worker = threading.Thread(target=thread)
        worker.start()
        worker.join(30)
        assert not failures, failures

    yield run
    signals.task_prerun.disconnect(fixup.on_task_prerun)
    signals.task_postrun.disconnect(fixup.on_task_postrun)


def probe(seen: list):
    return lambda trace: trace("task-id", (seen,), {}, {"id": "task-id"})


def test_a_worker_thread_keeps_its_connection_across_tasks(worker_tasks):
    seen: list = []
    worker_tasks(probe(seen), probe(seen))
    assert len(seen) == 2 and seen[0] is not None
    assert seen[1] is seen[0]  # the same driver connection: no new one opened for the second task


def test_a_connection_broken_between_tasks_is_replaced_not_reused(worker_tasks):
    only_on_postgres_app_database("a SQLite file cannot be taken away from its connection")
    seen: list = []

    def terminate(trace) -> None:  # as a database restart does, while the thread waits for its next task
        with psycopg.connect(_database_url().replace("postgres://", "postgresql://", 1), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [backends[-1]])

    worker_tasks(probe(seen), terminate, probe(seen))
    assert len(seen) == 2 and seen[1] is not seen[0]  # the second task ran, on a new connection


def test_an_eager_task_leaves_its_callers_transaction_alone():
    seen: list = []
    with transaction.atomic():
        connection_probe.apply(args=(seen,))
        with connection.cursor() as cursor:  # still usable: the task's handlers did not close it
            cursor.execute("SELECT 1")
    assert seen == [connection.connection]
