"""Queue Celery work by task name once the current transaction commits.

Services enqueue through here instead of importing a ``tasks`` module: tasks
call services, so services importing tasks back would be a cycle. Each
app's ``AppConfig.ready`` imports its tasks, so every process knows them;
an unknown name fails loudly when sent. The queue a task goes to is decided
by the routes in ``t2s_site/celery.py``.
"""

from __future__ import annotations

from typing import Any

from celery import current_app
from django.db import transaction


def enqueue_on_commit(task_name: str, *args: Any, **kwargs: Any) -> None:
    """Send ``task_name`` after commit (at once outside a transaction), never inside an open one."""

    def send() -> None:
        current_app.tasks[task_name].delay(*args, **kwargs)

    transaction.on_commit(send)
