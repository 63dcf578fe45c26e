"""A threads-pool worker starts one SQLite query process per thread at start-up; its threads take them."""

import threading
from types import SimpleNamespace

import pytest

from agent import tasks
from agent.services import databases


def in_new_thread(fn):
    out = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join()
    return out[0]


def take_sandboxes(count: int) -> list:
    """The query processes ``count`` new threads get (a started spare, or one that starts on its first query)."""
    return [in_new_thread(databases.thread_sandbox) for _ in range(count)]


def close(sandboxes) -> None:
    for sandbox in sandboxes:
        sandbox.close()


@pytest.fixture
def no_spares():
    """No started query process waits for a thread, before and after the test (new threads take them)."""

    def drain() -> None:
        while True:
            sandbox = in_new_thread(databases.thread_sandbox)
            sandbox.close()
            if sandbox.pid is None:  # a fresh one: no spare was left
                return

    drain()
    yield
    drain()


def test_threads_take_the_started_query_processes_then_start_their_own(no_spares):
    assert databases.prestart_sandboxes(2) == 2
    assert databases.prestart_sandboxes(2) == 0  # spares already waiting count
    first, second, third = taken = take_sandboxes(3)
    try:
        assert first.pid and second.pid and first.pid != second.pid
        assert third.pid is None  # no spare left: started on its first query, as before
        assert in_new_thread(lambda: databases.thread_sandbox() is databases.thread_sandbox())
    finally:
        close(taken)


class FakeThreadPool:
    __module__ = "celery.concurrency.thread"

    def __init__(self, limit):
        self.limit = limit


class FakePreforkPool:
    __module__ = "celery.concurrency.prefork"
    limit = 4


@pytest.mark.django_db
def test_a_threads_pool_worker_starts_a_query_process_per_thread_when_it_has_sqlite_targets(no_spares,
                                                                                           demo_database):
    tasks.prestart_query_processes(sender=SimpleNamespace(pool=FakePreforkPool()))
    taken = take_sandboxes(1)
    assert taken[0].pid is None  # prefork children would not inherit them usefully
    tasks.prestart_query_processes(sender=SimpleNamespace(pool=FakeThreadPool(3)))
    taken += take_sandboxes(4)
    try:
        assert [bool(s.pid) for s in taken[1:]] == [True, True, True, False]  # one per thread, started
    finally:
        close(taken)


@pytest.mark.django_db
def test_a_worker_without_sqlite_targets_starts_no_query_process(no_spares):
    tasks.prestart_query_processes(sender=SimpleNamespace(pool=FakeThreadPool(3)))
    taken = take_sandboxes(1)
    close(taken)
    assert taken[0].pid is None
