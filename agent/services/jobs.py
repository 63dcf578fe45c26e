"""Queue Celery work by task name once the current transaction commits.

Services enqueue through here instead of importing a ``tasks`` module: tasks
call services, so services importing tasks back would be a cycle. Each
app's ``AppConfig.ready`` imports its tasks, so every process knows them;
an unknown name fails loudly when sent. The queue a task goes to is decided
by the routes in ``t2s_site/celery.py``.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import current_app
from django.db import transaction

logger = logging.getLogger(__name__)


def enqueue_on_commit(task_name: str, *args: Any, robust: bool = False, **kwargs: Any) -> None:
    """Send ``task_name`` after commit (at once outside a transaction), never inside an open one.

    ``robust``: a broker that refuses the message is logged, not raised to the caller; for work a sweep
    publishes again (sessions left QUEUED, runs left RUNNING), so a user's request does not fail with it.
    """

    def send() -> None:
        try:
            current_app.tasks[task_name].delay(*args, **kwargs)
        except Exception as exc:
            if not robust:
                raise
            logger.warning("could not publish %s%r (left for the recovery sweep): %s", task_name, args, exc)

    transaction.on_commit(send)
