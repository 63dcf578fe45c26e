"""One daemon thread that calls a function at a deadline (e.g. cancel a running PostgreSQL query).

    token = WATCHDOG.arm(time.monotonic() + 10, conn.cancel_safe)
    try:
        ...  # the query
    finally:
        WATCHDOG.disarm(token)

A disarmed callback never runs; an armed one runs at most once, in the
watchdog's thread, so it must be safe to call from another thread. A callback
never outlives its block: ``disarm`` waits while it is running (a cancel sent
as the query ended must not land on the connection's next query).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable


class Watchdog:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._callbacks: dict[int, Callable[[], object]] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None
        self._running: int | None = None  # the token whose callback is being called

    def arm(self, deadline: float, callback: Callable[[], object]) -> int:
        """Call ``callback`` at ``deadline`` (a time.monotonic() reading) unless disarmed first."""
        with self._cond:
            token = next(self._ids)
            self._callbacks[token] = callback
            heapq.heappush(self._heap, (deadline, token))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, daemon=True, name="t2s-query-watchdog")
                self._thread.start()
            self._cond.notify()
            return token

    def disarm(self, token: int) -> None:
        """The callback will not run; if it is running now, return once it has."""
        with self._cond:
            self._callbacks.pop(token, None)
            while self._running == token:
                self._cond.wait()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][1] not in self._callbacks:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, token = self._heap[0]
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                heapq.heappop(self._heap)
                callback = self._callbacks.pop(token, None)
                self._running = token if callback is not None else None
            if callback is not None:
                try:
                    callback()
                except Exception:  # noqa: BLE001 - a failed cancel must not kill the watchdog
                    pass
                finally:
                    with self._cond:
                        self._running = None
                        self._cond.notify_all()


WATCHDOG = Watchdog()
