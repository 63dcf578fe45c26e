"""The query watchdog: a cancel sent as a query ends must never outlive the query's block (it would land on the
connection's next query: 'current transaction is aborted')."""

import threading
import time

from agent.sql.watchdog import Watchdog


def test_a_disarmed_callback_never_runs():
    dog, called = Watchdog(), threading.Event()
    token = dog.arm(time.monotonic() + 0.2, called.set)
    dog.disarm(token)
    assert not called.wait(0.5)


def test_disarm_waits_for_a_callback_already_running():
    dog, started, finished = Watchdog(), threading.Event(), threading.Event()

    def slow_cancel():
        started.set()
        time.sleep(0.3)
        finished.set()

    token = dog.arm(time.monotonic(), slow_cancel)
    assert started.wait(5)
    dog.disarm(token)
    assert finished.is_set()  # disarm returned only once the cancel had been sent


def test_a_failing_callback_does_not_stop_the_watchdog():
    dog, called = Watchdog(), threading.Event()
    token = dog.arm(time.monotonic(), lambda: 1 / 0)
    dog.disarm(token)  # returns, whether the failing callback ran yet or not
    dog.arm(time.monotonic(), called.set)
    assert called.wait(5)
