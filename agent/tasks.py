"""Celery tasks of the agent app: each takes ids, loads, and calls a service."""

from celery import shared_task
from celery.signals import worker_ready

from agent import services
from agent.models import Database
from agent.services import sessions


@shared_task(acks_late=True, ignore_result=True)
def refresh_database(database_id: int, force: bool = False) -> None:
    database = Database.objects.filter(pk=database_id).first()
    if database is not None:
        services.database_refresh(database=database, force=force)


# acks_late + idempotent service: a re-delivered session resumes from its stored turns.
@shared_task(acks_late=True, ignore_result=True, reject_on_worker_lost=True)
def run_session(session_id: int) -> None:
    sessions.session_execute(session_id=session_id)


@shared_task(ignore_result=True)
def recover_stale_sessions() -> None:
    sessions.sessions_recover_stale()


@worker_ready.connect
def _recover_on_start(sender=None, **kwargs) -> None:
    # A worker that starts after a crash picks up what the dead one left running.
    recover_stale_sessions.delay()
