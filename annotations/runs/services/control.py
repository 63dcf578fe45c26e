"""Cancelling and resuming a run, and its progress."""

from __future__ import annotations

import logging
from typing import Any

from django.db.models import Count, Min, Q
from django.utils import timezone

from agent.services import audit
from agent.services import sessions as session_services
from annotations.labels.version import labels_changed
from annotations.runs.models import Run
from annotations.runs.services.dispatch import RETRYABLE_SESSION, UNFINISHED_SESSION, run_dispatch_queue

logger = logging.getLogger(__name__)

def run_cancel(*, run: Run) -> Run:
    Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(status=Run.Status.CANCELLED)
    for item in run.items.select_related("session").filter(session__status__in=UNFINISHED_SESSION):
        session_services.session_cancel(session=item.session)
    run.refresh_from_db()
    return run


def run_resume(*, run: Run) -> Run:
    """Start again only what is missing: questions never run, and those whose session failed or was cancelled."""
    retry = run.items.filter(predicted_sql="").filter(
        Q(session__isnull=True) | Q(session__status__in=RETRYABLE_SESSION))
    retried = retry.update(session=None, prediction_note="", eval_status="", ex=None)
    labels_changed()  # the retried questions are no longer failures (a blind queue no longer holds them)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, error="")
    run.refresh_from_db()
    audit.record(action=audit.Action.RUN_RESUME, target_type="run", target=run.name, target_id=run.pk,
                 details={"questions": retried})
    run_dispatch_queue(run=run)
    return run


def run_progress(*, run: Run) -> dict[str, Any]:
    """Done / total, and an ETA from the completion rate observed so far.

    The rate is the number of sessions finished since the run's first one started, over that time: it
    includes the real concurrency, queueing and LLM latency, which an estimate from session times and
    the configured concurrency does not (that one read 10x too low).
    """
    agg = run.items.aggregate(
        total=Count("id"),
        finished=Count("id", filter=~Q(predicted_sql="") | ~Q(prediction_note="")),
        active=Count("id", filter=Q(session__status__in=UNFINISHED_SESSION)),
        sessions_done=Count("id", filter=Q(session__finished_at__isnull=False)),
        first_start=Min("session__started_at"))
    remaining = agg["total"] - agg["finished"]
    eta = None
    if remaining and agg["sessions_done"] and agg["first_start"]:
        elapsed = (timezone.now() - agg["first_start"]).total_seconds()
        if elapsed > 0:
            eta = remaining / (agg["sessions_done"] / elapsed)
    agg["percent"] = round(100 * agg["finished"] / agg["total"]) if agg["total"] else 100
    agg["eta_s"] = eta
    return agg
