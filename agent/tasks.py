"""Celery tasks of the agent app: each takes ids, loads, and calls a service."""

from celery import shared_task

from agent import services
from agent.models import Database


@shared_task(acks_late=True, ignore_result=True)
def refresh_database(database_id: int) -> None:
    database = Database.objects.filter(pk=database_id).first()
    if database is not None:
        services.database_refresh(database=database)
