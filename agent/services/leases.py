"""Leases of running sessions: which worker holds each one, its heartbeat, and the sweeps that requeue
what a dead worker or a lost broker message left behind.

A lease is ``"<worker identity>#<random>"``. The identity is the Celery worker's node name
(``sessions@host``), so a worker restarted under the same name knows its own leases and requeues them at
once (``reclaim_own``); outside a worker (``ask --inline``, tests) it is ``host:pid``. One thread per
process (``LeaseKeeper``) touches the heartbeat of every session the process runs, in one UPDATE every
``SESSION_HEARTBEAT_S``, and notices a lease taken over by another worker. In a Celery worker the same
thread also sweeps: RUNNING sessions silent for ``SESSION_STALE_AFTER_S`` (about three heartbeats) are
requeued, and QUEUED ones whose message is older than ``SESSION_QUEUED_STALE_AFTER_S`` are published
again (a broker restart without persistence loses messages; a duplicate delivery is a no-op, the claim
is atomic). Other apps add their own clean-up to that sweep through ``agent.signals.sweep``.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
import uuid
from datetime import timedelta

from django.core.cache import cache
from django.db import DatabaseError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from agent import signals
from agent.conf import agent_settings
from agent.models import AgentSession

from .jobs import enqueue_many_on_commit, enqueue_now

logger = logging.getLogger(__name__)

RUN_SESSION_TASK = "agent.tasks.run_session"
MAX_ATTEMPTS = 5  # deliveries of one session (dead workers, transient faults) before it is failed

_identity = f"{socket.gethostname()}:{os.getpid()}"


def worker_identity() -> str:
    return _identity


def set_worker_identity(name: str) -> None:
    """Called when a Celery worker is ready, with its node name."""
    global _identity
    _identity = name


def new_lease() -> str:
    return f"{_identity}#{uuid.uuid4().hex[:16]}"


def publish(session_id: int) -> None:
    """Queue the session's task after commit; a broker that is down leaves it QUEUED for the sweep, marked
    (no ``queued_at``) so that the next heartbeat's sweep publishes it again, not the lost-message sweep minutes
    later (``SESSION_QUEUED_STALE_AFTER_S``)."""
    publish_many([session_id])


def publish_many(session_ids: list[int]) -> None:
    """``publish`` for several sessions, after commit; if publishing fails, every one of them is marked for the
    sweep (one sent twice runs once: the claim is atomic)."""
    ids = list(session_ids)
    if ids:
        enqueue_many_on_commit(RUN_SESSION_TASK, [(pk,) for pk in ids], robust=True,
                               on_failure=lambda _exc: _mark_unpublished(*ids))


def _mark_unpublished(*session_ids: int) -> None:
    try:
        AgentSession.objects.filter(pk__in=session_ids, status=AgentSession.Status.QUEUED).update(queued_at=None)
    except DatabaseError as exc:  # the database is away too: the lost-message sweep still finds them
        logger.warning("could not mark sessions %s for publishing again: %s", list(session_ids), exc)


def republish_failed(*, limit: int = 100) -> list[int]:
    """QUEUED sessions whose publish failed (``publish`` left them without ``queued_at``): publish them again,
    stopping at the first that fails again (the broker is still away: the next sweep tries, rather than this one
    waiting out a connection timeout per session while the keeper's heartbeats wait). Outside a transaction."""
    unpublished = AgentSession.objects.filter(status=AgentSession.Status.QUEUED, queued_at__isnull=True)
    published = []
    for pk in list(unpublished.order_by("pk").values_list("pk", flat=True)[:limit]):
        if not unpublished.filter(pk=pk).update(queued_at=timezone.now()):
            continue  # another sweep took it
        if not enqueue_now(RUN_SESSION_TASK, pk, robust=True, on_failure=lambda _exc, pk=pk: _mark_unpublished(pk)):
            break
        published.append(pk)
    return published


def requeue(*, session_id: int, lease: str) -> bool:
    """Put a RUNNING session held under ``lease`` back in the queue (it resumes after its stored turns)."""
    with transaction.atomic():
        moved = AgentSession.objects.filter(pk=session_id, status=AgentSession.Status.RUNNING, lease=lease).update(
            status=AgentSession.Status.QUEUED, lease="", queued_at=timezone.now())
        if moved:
            publish(session_id)
    return bool(moved)


def recover_stale(*, stale_after_s: float | None = None, max_attempts: int = MAX_ATTEMPTS,
                  exclude: frozenset[int] = frozenset()) -> dict:
    """RUNNING sessions whose worker stopped beating: requeue them, or fail them after too many attempts."""
    if stale_after_s is None:
        stale_after_s = agent_settings.SESSION_STALE_AFTER_S
    cutoff = timezone.now() - timedelta(seconds=stale_after_s)
    dead = AgentSession.objects.filter(status=AgentSession.Status.RUNNING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)).exclude(pk__in=exclude)
    failed = dead.filter(attempts__gte=max_attempts).update(
        status=AgentSession.Status.FAILED, finished_at=timezone.now(),
        error=f"The worker running this session stopped {max_attempts} times; giving up.")
    resumed = [pk for pk, lease in dead.filter(attempts__lt=max_attempts).values_list("pk", "lease")
               if requeue(session_id=pk, lease=lease)]
    return {"failed": failed, "resumed": resumed}


def republish_queued(*, older_than_s: float | None = None) -> list[int]:
    """QUEUED sessions whose message was published long ago (lost with a broker): publish them again, stopping at
    the first that fails (left marked for ``republish_failed``). Outside a transaction."""
    if older_than_s is None:
        older_than_s = agent_settings.SESSION_QUEUED_STALE_AFTER_S
    now = timezone.now()
    stale = AgentSession.objects.filter(status=AgentSession.Status.QUEUED).filter(
        Q(queued_at__lt=now - timedelta(seconds=older_than_s)) | Q(queued_at__isnull=True))
    ids = list(stale.values_list("pk", flat=True)[:1000])
    for pk in ids:
        if not AgentSession.objects.filter(pk=pk, status=AgentSession.Status.QUEUED).update(queued_at=now):
            continue
        if not enqueue_now(RUN_SESSION_TASK, pk, robust=True, on_failure=lambda _exc, pk=pk: _mark_unpublished(pk)):
            break  # the broker is away: the next heartbeat's sweep tries again (republish_failed)
    return ids


def sweep_turn(name: str, period_s: float) -> bool:
    """Whether this process runs sweep ``name`` now: the first of the workers' keepers and Beat's task to ask
    in each ``period_s`` does, the others skip it (they would read the same rows and find the work done). A cache
    that cannot answer never stops recovery: then everyone sweeps, as without the turn."""
    try:
        return bool(cache.add(f"t2s:sweep-turn:{name}", _identity, timeout=max(1, math.ceil(period_s))))
    except Exception as exc:
        logger.warning("sweep turn %s: %s", name, exc)
        return True


def queued_sweep_period() -> float:
    """How often QUEUED sessions are looked at: a quarter of the time after which they count as lost."""
    return max(float(agent_settings.SESSION_HEARTBEAT_S), float(agent_settings.SESSION_QUEUED_STALE_AFTER_S) / 4)


def sweep(*, exclude: frozenset[int] = frozenset()) -> dict:
    """The recovery sweeps whose turn it is (``sweep_turn``): stale RUNNING sessions and failed publishes every
    heartbeat, lost QUEUED ones (and the ``agent.signals.sweep`` receivers) every ``queued_sweep_period``. Every worker's keeper calls it each
    beat and Beat's ``recover_stale_sessions`` every minute; one of them does each sweep."""
    out: dict = {}
    if sweep_turn("running", float(agent_settings.SESSION_HEARTBEAT_S)):
        out.update(recover_stale(exclude=exclude))
        out["published_again"] = republish_failed()
    if sweep_turn("queued", queued_sweep_period()):
        out["republished"] = republish_queued()
        signals.sweep.send_robust(sender=AgentSession)
    return out


def reclaim_own() -> list[int]:
    """At a worker's start: sessions still RUNNING under its own identity died with its previous process."""
    mine = AgentSession.objects.filter(status=AgentSession.Status.RUNNING, lease__startswith=f"{_identity}#")
    return [pk for pk, lease in mine.values_list("pk", "lease") if requeue(session_id=pk, lease=lease)]


class LeaseKeeper(threading.Thread):
    """The process's heartbeat for every session it runs (noticing takeovers and requests to stop), and (in a
    worker) the recovery sweeps."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="lease-keeper")
        self._lock = threading.Lock()
        self._held: dict[int, str] = {}
        self._lost: set[int] = set()
        self._cancelled: set[int] = set()  # asked to stop (``session_cancel``), as read at the last beat
        self.sweeping = False

    def hold(self, session_id: int, lease: str) -> None:
        with self._lock:
            self._held[session_id] = lease
            self._lost.discard(session_id)
            self._cancelled.discard(session_id)

    def release(self, session_id: int) -> None:
        with self._lock:
            self._held.pop(session_id, None)
            self._lost.discard(session_id)
            self._cancelled.discard(session_id)

    def lost(self, session_id: int) -> bool:
        with self._lock:
            return session_id in self._lost

    def cancelled(self, session_id: int) -> bool:
        """Whether the session was asked to stop, as of the last beat (a session reads it between its rounds
        without a query of its own)."""
        with self._lock:
            return session_id in self._cancelled

    def run(self) -> None:
        while True:
            time.sleep(float(agent_settings.SESSION_HEARTBEAT_S))
            try:
                self.beat()
                if self.sweeping:
                    self.sweep()
            except DatabaseError as exc:  # the database is away: try again next beat on a new connection
                logger.warning("lease keeper: %s", exc)
                connection.close()
            except Exception:
                logger.exception("lease keeper")

    def beat(self) -> None:
        with self._lock:
            held = dict(self._held)
        if not held:
            return
        rows = AgentSession.objects.filter(pk__in=held).values_list("pk", "lease", "cancel_requested")
        current = {pk: lease for pk, lease, _ in rows}
        alive = [pk for pk, lease in held.items() if current.get(pk) == lease]
        # Lost only when another lease is stored: a row this connection cannot see yet is not a takeover.
        lost = {pk for pk, lease in held.items() if current.get(pk) not in (None, lease)}
        if alive:
            AgentSession.objects.filter(pk__in=alive).update(heartbeat_at=timezone.now())
        with self._lock:
            self._lost |= {pk for pk in lost if pk in self._held}
            self._cancelled |= {pk for pk, _, cancel in rows if cancel and pk in self._held}

    def sweep(self) -> None:
        with self._lock:
            mine = frozenset(self._held)
        sweep(exclude=mine)


_keeper: LeaseKeeper | None = None
_keeper_lock = threading.Lock()


def keeper() -> LeaseKeeper:
    """This process's keeper, started on first use."""
    global _keeper
    with _keeper_lock:
        if _keeper is None or not _keeper.is_alive():
            _keeper = LeaseKeeper()
            _keeper.start()
        return _keeper
