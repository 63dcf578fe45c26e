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

A thread whose slot is not filled at once (a sibling thread is passing over the run, or its free slot waits
for a second one to make a batch) waits a moment on the run (``wait_for_pass``): a pass over that run in this
process (``passing``) hands it one of the sessions it starts before publishing the rest. When sessions end
together, most of them find a sibling passing; without this they went back to the pool and the sessions that
filled their slots were published to them.
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


@dataclass(eq=False)  # compared by identity: the lists of waiting threads hold them
class _Offer:
    remaining: int
    until: float | None
    stopping: Callable[[], bool]
    taken: collections.deque[int] = field(default_factory=collections.deque)  # committed, to run in order
    asked: bool = False  # a take is waiting for its pass to commit
    filling: int = 0  # inside ``filling_slot``: only a pass filling this thread's slot hands over
    handed: threading.Event = field(default_factory=threading.Event)  # set when a take commits

    def available(self) -> bool:
        return (self.remaining > 0 and not self.asked and not self.taken
                and (self.until is None or time.monotonic() < self.until) and not self.stopping())


_local = threading.local()
# Threads waiting for a pass over a run of this process to hand them a session (run id -> their offers, in the
# order they came). Guarded by ``_waiting_lock``, as is every offer's ``asked`` once it is in here.
_waiting: dict[int, list[_Offer]] = {}
_waiting_lock = threading.Lock()
# How long a thread handed a session by a pass waits for that pass to commit, once its own wait ran out.
_COMMIT_WAIT_S = 5.0


@contextlib.contextmanager
def passing(key: int) -> Iterator[None]:
    """Around the start of a pass's sessions over run ``key``: threads waiting on it are handed one each."""
    previous = getattr(_local, "passing", None)
    _local.passing = key
    try:
        yield
    finally:
        _local.passing = previous


def wait_for_pass(key: int, timeout: float) -> bool:
    """Wait at most ``timeout`` for a pass over run ``key`` in this process to hand this thread a session;
    whether it did (the thread runs it once its session task's current session returns).

    A thread that already has a session to run next does not wait; one without an open offer (an eager task,
    handover off, its limit reached) just waits."""
    offer: _Offer | None = getattr(_local, "offer", None)
    if offer is not None and offer.taken:
        return True
    if offer is None or not offer.available():
        time.sleep(timeout)
        return False
    offer.handed.clear()
    with _waiting_lock:
        _waiting.setdefault(key, []).append(offer)
    offer.handed.wait(timeout)
    with _waiting_lock:
        waiting = _waiting.get(key)
        if waiting is not None and offer in waiting:
            waiting.remove(offer)
            if not waiting:
                del _waiting[key]
        pending = offer.asked
    if pending:  # taken by a pass that has not committed yet: it is about to
        offer.handed.wait(_COMMIT_WAIT_S)
    return bool(offer.taken)


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
    """Of sessions about to be published: (those run by threads of this process once the transaction commits,
    else none; those still to publish). One for this thread under an open offer inside ``filling_slot``, then
    one for each thread waiting on the run being passed over (``passing``), in the order they came."""
    ids = list(session_ids)
    takers: list[_Offer] = []
    offer: _Offer | None = getattr(_local, "offer", None)
    if ids and offer is not None and offer.filling and offer.available():
        takers.append(offer)
    key = getattr(_local, "passing", None)
    with _waiting_lock:
        waiting = _waiting.get(key) if key is not None else None
        while waiting and len(takers) < len(ids):
            waiter = waiting.pop(0)
            if waiter.available():
                takers.append(waiter)
        if waiting is not None and not waiting:
            del _waiting[key]
        for taker in takers:
            taker.asked = True
            taker.remaining -= 1
    if not takers:
        return [], ids
    kept = ids[:len(takers)]

    def committed() -> None:
        for taker, pk in zip(takers, kept, strict=True):
            taker.asked = False
            taker.taken.append(pk)
            taker.handed.set()

    # A pass that rolls back never calls ``committed``: its sessions do not exist, and the takers' offers stay
    # closed for the rest of their chains (``asked``), so nothing is run or published for them.
    transaction.on_commit(committed)
    return kept, ids[len(takers):]


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
