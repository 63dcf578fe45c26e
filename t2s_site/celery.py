"""The Celery app and its queues; tasks live in each Django app's ``tasks.py``.

Work is split by how long it runs, so a long evaluation or index build never
delays an agent session:

- ``sessions``: agent sessions (``agent.tasks.run_session``), minutes each, mostly waiting on the LLM;
- ``dispatch``: run dispatch polls and recovery sweeps, short and frequent;
- ``indexes``: tool index builds (``agent.tasks.refresh_database``);
- ``evaluation``: scoring a run against the gold queries;
- ``celery``: anything not routed above.

A worker started without ``-Q`` consumes all of them (``make run`` does that);
for scale-out, start one worker per queue (README, "Scale out").
"""

import os

from celery import Celery
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
    "annotations.tasks.revive_run_dispatchers": DISPATCH,
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
