"""Celery tasks of the agent app: each takes ids, loads, and calls a service."""

import logging

from celery import shared_task
from celery.signals import worker_ready

from agent import services
from agent.models import Database
from agent.services import databases, leases, sessions

logger = logging.getLogger(__name__)


@shared_task(acks_late=True, ignore_result=True)
def refresh_database(database_id: int, force: bool = False) -> None:
    database = Database.objects.filter(pk=database_id).first()
    if database is not None:
        services.database_refresh(database=database, force=force)


# acks_late + idempotent service: a re-delivered session resumes from its stored turns. A transient fault
# (database or broker away) comes back here as SessionInterrupted: retried with backoff; if even the retry
# cannot be published, the session stays QUEUED (or RUNNING without heartbeat) and a sweep picks it up.
@shared_task(acks_late=True, ignore_result=True, reject_on_worker_lost=True,
             autoretry_for=(sessions.SessionInterrupted,), retry_backoff=1, retry_backoff_max=30, retry_jitter=True,
             max_retries=6)
def run_session(session_id: int) -> None:
    sessions.session_execute(session_id=session_id)


# Beat's safety net for when no worker's keeper sweeps: it takes the same turns as the keepers, so a minute in
# which a keeper already swept costs it nothing.
@shared_task(ignore_result=True)
def recover_stale_sessions() -> None:
    leases.sweep()


# A threads-pool worker runs its sessions' SQLite queries in one query process per thread: started here for
# every thread rather than by each thread's first session, when a run's first sessions all arrive at once.
THREAD_POOLS = ("celery.concurrency.thread",)


@worker_ready.connect
def prestart_query_processes(sender=None, **kwargs) -> None:
    pool = getattr(sender, "pool", None)
    if pool is None or type(pool).__module__ not in THREAD_POOLS:
        return  # prefork children start their own after the fork; solo runs one session at a time
    if Database.objects.filter(engine=Database.Engine.SQLITE).exists():
        started = databases.prestart_sandboxes(int(getattr(pool, "limit", 0) or 0))
        logger.info("started %d SQLite query processes for the worker's threads", started)


@worker_ready.connect
def _recover_on_start(sender=None, **kwargs) -> None:
    # Leases carry the worker's name: what this name still holds died with its previous process, so it is
    # requeued at once; then this worker's lease keeper beats for its sessions and sweeps for everyone's.
    if sender is not None and getattr(sender, "hostname", None):
        leases.set_worker_identity(sender.hostname)
    try:
        leases.reclaim_own()
        sessions.sessions_recover_stale()
    finally:
        leases.keeper().sweeping = True


@worker_ready.connect
def _import_llm_sdk(**kwargs) -> None:
    # The LLM client imports the openai SDK lazily (seconds of CPU); a worker pays it at start, not in a session.
    import openai  # noqa: F401
