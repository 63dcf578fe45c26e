"""A threads-pool worker starts one SQLite query process per thread at start-up; its threads take them."""

import threading
from types import SimpleNamespace

import pytest

from agent import tasks
from agent.services import databases


@pytest.fixture
def spares():
    yield databases._spare_sandboxes
    with databases._spares_lock:
        left, databases._spare_sandboxes[:] = list(databases._spare_sandboxes), []
    for sandbox in left:
        sandbox.close()


def in_new_thread(fn):
    out = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join()
    return out[0]


def test_threads_take_the_started_query_processes_then_start_their_own(spares):
    assert databases.prestart_sandboxes(2) == 2
    assert databases.prestart_sandboxes(2) == 0  # spares already waiting count
    started = {s.pid for s in spares}
    assert len(started) == 2 and None not in started
    first, second, third = (in_new_thread(databases.thread_sandbox) for _ in range(3))
    try:
        assert {first.pid, second.pid} == started and not spares
        assert third.pid is None  # no spare left: started on its first query, as before
        assert in_new_thread(lambda: databases.thread_sandbox() is databases.thread_sandbox())
    finally:
        for sandbox in (first, second, third):
            sandbox.close()


class FakeThreadPool:
    __module__ = "celery.concurrency.thread"

    def __init__(self, limit):
        self.limit = limit


class FakePreforkPool:
    __module__ = "celery.concurrency.prefork"
    limit = 4


@pytest.mark.django_db
def test_a_threads_pool_worker_starts_a_query_process_per_thread_when_it_has_sqlite_targets(spares, demo_database):
    tasks._prestart_query_processes(sender=SimpleNamespace(pool=FakePreforkPool()))
    assert not spares  # prefork children would not inherit them usefully
    tasks._prestart_query_processes(sender=SimpleNamespace(pool=FakeThreadPool(3)))
    assert len(spares) == 3 and all(s.pid for s in spares)


@pytest.mark.django_db
def test_a_worker_without_sqlite_targets_starts_no_query_process(spares):
    tasks._prestart_query_processes(sender=SimpleNamespace(pool=FakeThreadPool(3)))
    assert not spares
