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
from contextlib import nullcontext
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
    """Send ``task_name`` once for each argument tuple after commit, all through one producer: on Redis one
    client and one round trip for all of them (kombu's publish batch), where a message each built a client of
    its own. ``robust`` and ``on_failure`` as in ``enqueue_on_commit``; ``on_failure`` is called once if any
    message may not have been sent (a batch that fails is not retried message by message)."""
    messages = [(args, {}) for args in arg_lists]
    transaction.on_commit(lambda: _send(task_name, messages, robust=robust, on_failure=on_failure))


def enqueue_now(task_name: str, *args: Any, robust: bool = False,
                on_failure: Callable[[Exception], None] | None = None, **kwargs: Any) -> bool:
    """Send ``task_name`` at once, for work whose rows are already committed (a sweep outside any transaction);
    whether the broker took it (see ``enqueue_on_commit`` for ``robust`` and ``on_failure``)."""
    return _send(task_name, [(args, kwargs)], robust=robust, on_failure=on_failure)


def _send(task_name: str, messages: list[tuple[tuple, dict[str, Any]]], *, robust: bool,
          on_failure: Callable[[Exception], None] | None) -> bool:
    """Publish each (args, kwargs) of ``messages`` as ``task_name``, through one producer; whether the broker
    took them all. The one path every message takes, with its one failure handling (``enqueue_on_commit``)."""
    if not messages:
        return True
    task = current_app.tasks[task_name]
    try:
        if current_app.conf.task_always_eager:  # run here and now (tests, some embedded setups): no broker
            for args, kwargs in messages:
                task.apply_async(args, kwargs=kwargs)
            return True
        with current_app.producer_or_acquire() as producer:
            batch = getattr(producer, "batch", None)  # kombu 5.7; without it each message is sent at once
            with batch() if batch is not None else nullcontext():
                declared: dict[str, Any] = {}
                for args, kwargs in messages:
                    # The reprs monitoring shows, given: Celery's own safe repr of a tuple of ids cost 15 % of
                    # a message's CPU (0.045 of 0.31 ms), paid by every session a run starts. The queue is
                    # declared by the first message only: the rest go to the same queue on the same connection,
                    # where kombu's check that it is declared already cost 0.04-0.08 ms a message.
                    task.apply_async(args, kwargs=kwargs, producer=producer, argsrepr=repr(args), kwargsrepr=repr(kwargs),
                                     **declared)
                    declared = {"declare": []}
    except Exception as exc:
        if not robust:
            raise
        what = f"{task_name}{messages[0][0]!r}" if len(messages) == 1 else f"{task_name} for {len(messages)} messages"
        logger.warning("could not publish %s (left for the recovery sweep): %s", what, exc)
        if on_failure is not None:
            on_failure(exc)
        return False
    return True
