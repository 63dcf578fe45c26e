"""A worker thread whose session has just finished runs its run's next session itself: handed over, not published.

Without it, every session of a run after the first wave cost a message: published by the dispatch pass that
filled the finished session's slot, received by the worker's consumer thread, handed to a free thread and
acknowledged, while the slot sat idle (bench-runs step 3: 0.1-0.2 s p50 a session, with 64 threads queueing
for one interpreter lock at each hop, and about 3 ms of the consumer thread's CPU a message).

The session task opens an offer on its thread (``run_chain``). The pass that fills its slot (``filling_slot``,
around the run's dispatch when the session ends) gives the thread one of the sessions it starts (``take``, called
where sessions are published), and the thread runs it once the pass has committed, then the one handed over
after that, and so on. Bounded: at most ``limit`` sessions after the task's own, none once the worker is
stopping, none after ``until`` (so a chain ends within a prefork child's soft time limit); past that, sessions
are published as before. A handed-over session is stored as unpublished (no ``queued_at``): if the worker dies
before claiming it, the next heartbeat's sweep publishes it (agent/services/leases.py), and a sweep that
publishes it meanwhile is harmless (the claim is atomic).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from django.db import transaction

logger = logging.getLogger(__name__)


@dataclass
class _Offer:
    remaining: int
    until: float | None
    stopping: Callable[[], bool]
    taken: collections.deque[int] = field(default_factory=collections.deque)  # committed, to run in order
    asked: bool = False  # a take is waiting for its pass to commit
    filling: int = 0  # inside ``filling_slot``: only a pass filling this thread's slot hands over

    def available(self) -> bool:
        return (self.remaining > 0 and not self.asked and not self.taken
                and (self.until is None or time.monotonic() < self.until) and not self.stopping())


_local = threading.local()


@contextlib.contextmanager
def filling_slot() -> Iterator[None]:
    """Around the dispatch that fills the slot of the session this thread has just finished: the sessions it
    starts may be handed over to this thread (not those published elsewhere in the session, e.g. its requeue)."""
    offer: _Offer | None = getattr(_local, "offer", None)
    if offer is None:
        yield
        return
    offer.filling += 1
    try:
        yield
    finally:
        offer.filling -= 1


def take(session_ids: list[int]) -> tuple[list[int], list[int]]:
    """Of sessions about to be published: (those this thread runs itself once the transaction commits: at most
    one, and only under an open offer inside ``filling_slot``, else none; those still to publish)."""
    offer: _Offer | None = getattr(_local, "offer", None)
    if not session_ids or offer is None or not offer.filling or not offer.available():
        return [], list(session_ids)
    kept, rest = session_ids[0], list(session_ids[1:])
    offer.asked = True
    offer.remaining -= 1

    def committed() -> None:
        offer.asked = False
        offer.taken.append(kept)

    # A pass that rolls back never calls ``committed``: its sessions do not exist, and the offer stays closed
    # for the rest of the chain (``asked``), so nothing is run or published for them.
    transaction.on_commit(committed)
    return [kept], rest


def run_chain(session_id: int, *, execute: Callable[[int], None], publish: Callable[[list[int]], None],
              limit: int, until: float | None = None, stopping: Callable[[], bool] = lambda: False) -> list[int]:
    """Run ``session_id``, then each session handed over to this thread meanwhile; the ids run after it.

    An exception of the first session is raised (the task retries it); one of a handed-over session ends the
    chain (``execute`` queued it again or left it to the sweeps). Sessions taken but not run (the worker
    stopping, an error) are published (``publish``) before this returns."""
    if limit <= 0:
        execute(session_id)
        return []
    offer = _Offer(remaining=limit, until=until, stopping=stopping)
    _local.offer = offer
    ran: list[int] = []
    try:
        execute(session_id)
        while offer.taken:
            next_id = offer.taken.popleft()
            if stopping():
                offer.taken.appendleft(next_id)
                break
            ran.append(next_id)
            try:
                execute(next_id)
            except Exception:
                # Not the task's own session, so not the task's retry: ``session_execute`` has queued it again
                # (a transient fault) or left it to the sweeps, as for any session. The chain ends here.
                logger.warning("handed-over session %s interrupted", next_id, exc_info=True)
                break
    finally:
        _local.offer = None
        leftover = list(offer.taken)
        if leftover:
            publish(leftover)
    return ran
