"""The Celery app and its queues; tasks live in each Django app's ``tasks.py``.

Work is split by how long it runs, so a long evaluation or index build never
delays an agent session:

- ``sessions``: agent sessions (``agent.tasks.run_session``), minutes each, mostly waiting on the LLM;
- ``dispatch``: run dispatch passes and polls, recovery sweeps: short and frequent;
- ``indexes``: tool index builds (``agent.tasks.refresh_database``);
- ``evaluation``: scoring a run against the gold queries;
- ``celery``: anything not routed above.

A worker started without ``-Q`` consumes all of them (``make run`` does that);
for scale-out, start one worker per queue (README, "Scale out").
"""

import os

from celery import Celery, signals
from django.db import close_old_connections, connections
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "t2s_site.settings")

SESSIONS = "sessions"
DISPATCH = "dispatch"
INDEXES = "indexes"
EVALUATION = "evaluation"
DEFAULT = "celery"
QUEUES = (SESSIONS, DISPATCH, INDEXES, EVALUATION, DEFAULT)

ROUTES = {
    "agent.tasks.run_session": SESSIONS,
    "agent.tasks.recover_stale_sessions": DISPATCH,
    "agent.tasks.refresh_database": INDEXES,
    "annotations.tasks.dispatch_run": DISPATCH,
    "annotations.tasks.poll_runs": DISPATCH,
    "annotations.tasks.evaluate_run": EVALUATION,
}

app = Celery("t2s_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Each queue on its own direct exchange and routing key: bound to one shared key, a message routed to one
# queue would be copied into all of them.
app.conf.task_queues = [Queue(name, Exchange(name, type="direct"), routing_key=name) for name in QUEUES]
app.conf.task_default_queue = DEFAULT
app.conf.task_routes = {task: {"queue": queue} for task, queue in ROUTES.items()}
app.autodiscover_tasks()


@signals.worker_init.connect
def keep_worker_db_connections(**kwargs) -> None:
    """A worker's connections live ``WORKER_DB_CONN_MAX_AGE`` seconds, each checked before its first use in a task.

    Set on the connections' settings before any task thread (or prefork child) opens one; the web processes'
    own ``DB_CONN_MAX_AGE`` is left alone.
    """
    from django.conf import settings

    age = settings.WORKER_DB_CONN_MAX_AGE
    if age:
        for alias in connections:
            connections.settings[alias].update(CONN_MAX_AGE=age, CONN_HEALTH_CHECKS=True)


# What Django does around a request, around each task: the task's thread (thread pool, prefork child, solo)
# closes its own connection when it is past its age, left in a transaction or broken by an error (a database
# restart), so the next query opens a new one. Eager tasks run inside their caller's transaction: not here.
@signals.task_prerun.connect
@signals.task_postrun.connect
def _close_old_db_connections(sender=None, **kwargs) -> None:
    if sender is not None and getattr(sender.request, "is_eager", False):
        return
    close_old_connections()


@app.on_after_finalize.connect
def _poll_runs(sender, **kwargs) -> None:
    """Beat's poll of the running runs (annotations/runs/services/dispatch.py), every ``DISPATCH_POLL_S``: the
    safety net behind finished sessions, which dispatch their run at once. A poll nobody took before the next
    one is dropped (expires)."""
    from annotations.conf import annotations_settings

    period = float(annotations_settings.DISPATCH_POLL_S)
    sender.add_periodic_task(period, sender.signature("annotations.tasks.poll_runs"), name="poll-runs",
                             expires=period)
