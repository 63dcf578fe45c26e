"""Cancelling and resuming a run, and its progress."""

from __future__ import annotations

import heapq
import logging
import math
import random
from datetime import datetime
from statistics import NormalDist
from typing import Any

from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from agent.models import AgentSession, Turn
from agent.services import audit
from agent.services import sessions as session_services
from annotations.labels.version import labels_changed
from annotations.runs.models import Run
from annotations.runs.services.dispatch import (
    DEFAULT_RUN_CONCURRENCY,
    RETRYABLE_SESSION,
    UNFINISHED_SESSION,
    run_dispatch_queue,
)

logger = logging.getLogger(__name__)

def run_cancel(*, run: Run) -> Run:
    Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(status=Run.Status.CANCELLED)
    for item in run.items.select_related("session").filter(session__status__in=UNFINISHED_SESSION):
        session_services.session_cancel(session=item.session)
    run.refresh_from_db()
    return run


def run_resume(*, run: Run) -> Run:
    """Start again what is missing: questions never run, and every one whose session failed, was cancelled or
    ended in an LLM error (even one that kept a prediction from a query it ran before failing)."""
    retry = run.items.filter(Q(session__status__in=RETRYABLE_SESSION) | Q(session__isnull=True, predicted_sql="", question__database__isnull=False))
    retried = retry.update(session=None, predicted_sql="", prediction_note="", eval_status="", ex=None, soft_f1=None,
                           error="", gold_rows=None, pred_rows=None, pred_ms=None, f_nc=None, f_sc=None)
    labels_changed()  # the retried questions are no longer failures (a blind queue no longer holds them)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, error="")
    run.refresh_from_db()
    audit.record(action=audit.Action.RUN_RESUME, target_type="run", target=run.name, target_id=run.pk,
                 details={"questions": retried})
    run_dispatch_queue(run=run)
    return run


# A run that stored no turn and finished no session for this long (or for twice its sessions' mean time, if
# longer) is said to be stalled instead of shown an ETA.
STALL_AFTER_S = 60.0
# The sessions the ETA learns durations from: the run's most recent ones (a run's pace drifts with the LLM's).
_ETA_SAMPLE = 500


def run_progress(*, run: Run, now: datetime | None = None) -> dict[str, Any]:
    """Done / total, and an ETA from the run's observed session durations and its concurrency.

    A session's duration is the slot it holds: from its creation by the dispatch to its end (queueing, LLM
    latency and the worker's share included). Sessions still running count as lasting at least as long as they
    have run so far (a Kaplan-Meier estimate), so a latency tail is not hidden by the short sessions that end
    first. The remaining questions are then laid out over the run's slots, each started as one frees up: the
    ETA is when the last would end. ``stalled_s``: seconds since anything last happened (a turn stored, a
    session created or ended), once past ``STALL_AFTER_S``; then the ETA is None. ``now``: the moment the
    figures are for (default: now).
    """
    agg = run.items.aggregate(
        total=Count("id"),
        finished=Count("id", filter=~Q(predicted_sql="") | ~Q(prediction_note="")),
        active=Count("id", filter=Q(session__status__in=UNFINISHED_SESSION)),
        sessions_done=Count("id", filter=Q(session__finished_at__isnull=False)),
        first_start=Min("session__started_at"),
        last_created=Max("session__created_at"), last_finished=Max("session__finished_at"))
    now = now or timezone.now()
    sessions = AgentSession.objects.filter(run_items__run=run)
    running = list(sessions.filter(status__in=UNFINISHED_SESSION).values_list("pk", "created_at"))
    ended = list(sessions.filter(finished_at__isnull=False).order_by("-finished_at")
                 .values_list("created_at", "finished_at")[:_ETA_SAMPLE])
    last_turn = Turn.objects.filter(session_id__in=[pk for pk, _ in running]).aggregate(t=Max("created_at"))["t"]
    moments = [t for t in (run.created_at, agg["last_created"], agg["last_finished"], last_turn) if t is not None]
    quiet = (now - max(moments)).total_seconds() if moments else 0.0
    durations = [(finished - created).total_seconds() for created, finished in ended]
    elapsed = [(now - created).total_seconds() for _, created in running]
    mean = sum(durations) / len(durations) if durations else None
    stalled = run.status == Run.Status.RUNNING and quiet > max(STALL_AFTER_S, 2 * (mean or 0))
    remaining = agg["total"] - agg["finished"]
    waiting = max(0, remaining - len(running))
    eta = None
    if remaining and durations and not stalled:
        eta = eta_seconds(durations=durations, elapsed=elapsed, waiting=waiting,
                          concurrency=int(run.config.get("max_concurrency") or DEFAULT_RUN_CONCURRENCY))
    agg["percent"] = round(100 * agg["finished"] / agg["total"]) if agg["total"] else 100
    agg["eta_s"] = eta
    agg["stalled_s"] = quiet if stalled else None
    return agg


def eta_seconds(*, durations: list[float], elapsed: list[float], waiting: int, concurrency: int) -> float:
    """When the last of a run's sessions would end: ``elapsed`` are the running ones' times so far, ``waiting``
    the questions not started, ``durations`` the ended sessions' times (at least one).

    Session durations are taken as lognormal (LLM latencies are), fitted to the median and the deepest quantile
    the observed durations reach (running sessions censored); the remaining sessions' durations are drawn from
    it (each running session's given that it has lasted so far) and laid out over the slots, a few times over
    with a fixed seed: the mean of the makespans. With a latency tail, when the run ends depends on its longest
    remaining sessions, which a mean duration misses."""
    curve = _kaplan_meier(durations, elapsed)
    fitted = _lognormal_fit(curve)
    draw = random.Random(0)

    def duration(at_least: float) -> float:
        if fitted is None:  # too few ended sessions for a median: the observed ones as they are
            return _empirical_draw(curve, at_least, draw)
        low = fitted.cdf(math.log(at_least)) if at_least > 0 else 0.0
        if low >= 1.0 - 1e-9:
            return at_least  # far past what the run's sessions take: about to end
        return math.exp(fitted.inv_cdf(min(low + (1.0 - low) * draw.random(), 1.0 - 1e-12)))

    ends = []
    for _ in range(_ETA_DRAWS):
        slots = sorted(duration(t) - t for t in elapsed)[-concurrency:]
        slots += [0.0] * (max(1, concurrency) - len(slots))
        heapq.heapify(slots)
        for _ in range(waiting):
            heapq.heappush(slots, heapq.heappop(slots) + duration(0.0))
        ends.append(max(slots))
    return sum(ends) / len(ends)


_ETA_DRAWS = 16


def _lognormal_fit(curve: list[tuple[float, float]]) -> NormalDist | None:
    """The distribution of the logarithm of session durations: through the curve's median and the deepest
    quantile it reaches (up to the 80th percentile). None until half the sessions are known to have ended."""
    median = next((t for t, level in curve if level <= 0.5), None)
    if not median:
        return None
    level = max(curve[-1][1], 0.2)
    upper = next(t for t, at in curve if at <= level)
    z = NormalDist().inv_cdf(1.0 - level)
    return NormalDist(math.log(median), max(math.log(upper / median) / z if z > 0 else 0.0, 1e-6))


def _empirical_draw(curve: list[tuple[float, float]], at_least: float, draw: random.Random) -> float:
    """A duration from the survival curve, given that it is longer than ``at_least``; past the curve's end
    (longer than anything seen), its end or ``at_least`` plus a mean remaining life, whichever is later."""
    target = _survival_at(curve, at_least) * (1.0 - draw.random())
    for t, level in curve:
        if t > at_least and level <= target:
            return t
    return max(curve[-1][0], at_least + _area(curve, 0.0))


def _kaplan_meier(ended: list[float], running: list[float]) -> list[tuple[float, float]]:
    """The survival curve of session durations, ended ones as events and running ones as censored: (t, S(t))
    steps, S falling at each event time; the last step reaches the longest time observed."""
    points = sorted([(t, True) for t in ended] + [(t, False) for t in running])
    curve, alive, at_risk = [(0.0, 1.0)], 1.0, len(points)
    for t, event in points:
        if event:
            alive *= 1 - 1 / at_risk
            curve.append((t, alive))
        at_risk -= 1
    if points and points[-1][0] > curve[-1][0]:
        curve.append((points[-1][0], alive))  # a longer running session: the curve holds its level up to it
    return curve


def _survival_at(curve: list[tuple[float, float]], t: float) -> float:
    level = 1.0
    for start, value in curve:
        if start > t:
            break
        level = value
    return level


def _area(curve: list[tuple[float, float]], t: float) -> float:
    """The area under the curve from ``t`` to its last step (the mean remaining life times S(t))."""
    total = 0.0
    for (start, value), (end, _) in zip(curve, curve[1:], strict=False):
        if end > t:
            total += value * (end - max(start, t))
    return total
