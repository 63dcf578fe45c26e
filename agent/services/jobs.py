"""Queue Celery work by task name once the current transaction commits.

Services enqueue through here instead of importing a ``tasks`` module: tasks
call services, so services importing tasks back would be a cycle. Each
app's ``AppConfig.ready`` imports its tasks, so every process knows them;
an unknown name fails loudly when sent. The queue a task goes to is decided
by the routes in ``t2s_site/celery.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import current_app
from django.db import transaction

logger = logging.getLogger(__name__)


def enqueue_on_commit(task_name: str, *args: Any, robust: bool = False,
                      on_failure: Callable[[Exception], None] | None = None, **kwargs: Any) -> None:
    """Send ``task_name`` after commit (at once outside a transaction), never inside an open one.

    ``robust``: a broker that refuses the message is logged, not raised to the caller; for work a sweep
    publishes again (sessions left QUEUED, runs left RUNNING), so a user's request does not fail with it.
    ``on_failure(exc)`` is then called, e.g. to mark the work for the sweep's next look.
    """
    transaction.on_commit(lambda: _send(task_name, [(args, kwargs)], robust=robust, on_failure=on_failure))


def enqueue_many_on_commit(task_name: str, arg_lists: list[tuple], *, robust: bool = False,
                           on_failure: Callable[[Exception], None] | None = None) -> None:
    """Send ``task_name`` once for each argument tuple after commit; ``robust`` and ``on_failure`` as in
    ``enqueue_on_commit`` (``on_failure`` is called once, at the first message the broker refuses)."""
    messages = [(args, {}) for args in arg_lists]
    transaction.on_commit(lambda: _send(task_name, messages, robust=robust, on_failure=on_failure))


def enqueue_now(task_name: str, *args: Any, robust: bool = False,
                on_failure: Callable[[Exception], None] | None = None, **kwargs: Any) -> bool:
    """Send ``task_name`` at once, for work whose rows are already committed (a sweep outside any transaction);
    whether the broker took it (see ``enqueue_on_commit`` for ``robust`` and ``on_failure``)."""
    return _send(task_name, [(args, kwargs)], robust=robust, on_failure=on_failure)


def _send(task_name: str, messages: list[tuple[tuple, dict[str, Any]]], *, robust: bool,
          on_failure: Callable[[Exception], None] | None) -> bool:
    """``apply_async`` for each (args, kwargs) of ``messages``; whether the broker took them all. The one path
    every message takes, with its one failure handling (``enqueue_on_commit``)."""
    task = current_app.tasks[task_name]
    try:
        for args, kwargs in messages:
            task.apply_async(args, kwargs)
    except Exception as exc:
        if not robust:
            raise
        what = f"{task_name}{messages[0][0]!r}" if len(messages) == 1 else f"{task_name} for {len(messages)} messages"
        logger.warning("could not publish %s (left for the recovery sweep): %s", what, exc)
        if on_failure is not None:
            on_failure(exc)
        return False
    return True
