"""Dispatch of a run: start its questions' sessions up to its concurrency, collect them, queue its scoring.

A pass (``run_dispatch``) locks the run's row, so the passes of one run, in any threads or workers, take turns
and never start more sessions than its concurrency. A pass runs

- when the run is launched or resumed (the ``dispatch_run`` task);
- when one of its sessions finishes, in the worker that ran it (``run_session_finished``, the receiver of
  ``agent.signals.session_finished``);
- for every running run at each poll of Celery beat (``runs_poll``, every ``DISPATCH_POLL_S``): the safety
  net for a wake-up lost with a worker, and for databases still being indexed when the run started.
"""

from __future__ import annotations

import logging
from functools import lru_cache

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Sum

from agent.models import AgentSession, Database, ExamplePool
from agent.services import sessions as session_services
from agent.services.jobs import enqueue_on_commit
from annotations.exemplars.selectors import few_shot_for_version
from annotations.experiments.selectors import snapshot_few_shot
from annotations.models import ExemplarSetVersion
from annotations.runs.models import Run, RunItem
from annotations.runs.pools import question_exclusion, question_key
from annotations.runs.services.evaluation import run_evaluate_queue

logger = logging.getLogger(__name__)
DISPATCH_TASK = "annotations.tasks.dispatch_run"
DEFAULT_RUN_CONCURRENCY = 4
# Sessions started by one pass before it commits: a run launched at concurrency 64 on a busy worker starts its
# first questions after one batch's set-up, not after all 64 (the pass goes on with the next batch).
START_BATCH = 16
UNFINISHED_SESSION = ("queued", "running")
RETRYABLE_SESSION = ("failed", "llm_error", "cancelled")
# A database still being introspected or indexed (just imported) is waited for, not failed.
_PREPARING_STATUS = (Database.Status.PENDING, Database.Status.INTROSPECTING)
_PREPARING_INDEX = (Database.IndexStatus.QUEUED, Database.IndexStatus.BUILDING)
# What starting a session reads of an item's question and database (a database's schema is tens of kB).
_START_FIELDS = ("id", "session", "predicted_sql", "prediction_note", "question__id", "question__dataset_id", "question__index", "question__question",
                 "question__evidence", "question__gold_sql", "question__database__id", "question__database__name",
                 "question__database__status", "question__database__index_status")


def run_dispatch_queue(*, run: Run) -> None:
    """Queue a dispatch pass of the run once the current transaction commits."""
    enqueue_on_commit(DISPATCH_TASK, run.pk)


def run_dispatch(*, run: Run) -> bool:
    """Collect the run's finished sessions, start sessions in its free slots, and queue its scoring once nothing
    is left. Whether work is still in flight.

    A pass that finds the run held by another one leaves the work to it: each pass, once committed, looks for
    sessions that ended while it held the run and passes again if there are some. (A session commits its end
    before its own pass looks for the lock, so the holder's look sees it.) Sessions ending together thus share
    a pass instead of queueing for the lock one by one.
    """
    while True:
        outcome = _pass(run.pk)
        if outcome is None:
            return True  # another pass holds the run: it looks again once it has let go
        more, batch_full = outcome
        if not more or not (batch_full or _ended_uncollected(run.pk).exists()):
            return more


def run_session_finished(*, session_id: int) -> None:
    """A session ended: when it belongs to a running run, that run's pass collects it and fills its slot."""
    run_id = (RunItem.objects.filter(session_id=session_id, run__status=Run.Status.RUNNING).order_by()
              .values_list("run_id", flat=True).first())
    if run_id is not None:
        run_dispatch(run=Run(pk=run_id))


def runs_poll() -> list[int]:
    """A pass over every running run of ours (beat's poll, and a worker's start); the runs passed over."""
    ids = list(Run.objects.filter(source=Run.Source.AGENT, status=Run.Status.RUNNING).values_list("pk", flat=True))
    for pk in ids:
        try:
            run_dispatch(run=Run(pk=pk))
        except Exception:  # one run's failure must not keep the others waiting; the next poll tries again
            logger.exception("dispatch of run %s failed", pk)
    return ids


def _ended_uncollected(run_id: int):
    return RunItem.objects.filter(run_id=run_id, predicted_sql="", prediction_note="", session__isnull=False).exclude(
        session__status__in=UNFINISHED_SESSION).order_by()


def _pass(run_id: int) -> tuple[bool, bool] | None:
    """One pass under the run's row lock: whether work is still in flight and whether it started a full batch
    (slots may be left); None when another pass holds it."""
    with transaction.atomic():
        locked = (Run.objects.select_for_update(skip_locked=True, of=("self",)).select_related("created_by")
                  .only("id", "status", "strategy", "config", "created_by").filter(pk=run_id).first())
        if locked is None:  # held by another pass (SQLite takes its one writer lock instead), or gone
            return None if Run.objects.filter(pk=run_id).exists() else (False, False)
        if locked.status != Run.Status.RUNNING:
            return False, False
        uncollected = RunItem.objects.filter(run=locked, predicted_sql="", prediction_note="").order_by()
        in_flight = list(uncollected.filter(session__isnull=False)
                         .values_list("pk", "session_id", "session__status", "session__final_sql"))
        done = [RunItem(pk=pk, predicted_sql=final_sql, session_id=session_id,
                        prediction_note="" if final_sql else f"agent: {AgentSession.Status(status).label}")
                for pk, session_id, status, final_sql in in_flight if status not in UNFINISHED_SESSION]
        active = len(in_flight) - len(done)
        waiting = uncollected.filter(session__isnull=True, question__database__isnull=False)
        cap = locked.config.get("spend_cap")
        if cap is not None and (locked.items.aggregate(spent=Sum("session__cost"))["spent"] or 0) >= cap:
            waiting.update(prediction_note=f"not run: spend cap ${cap:g} reached")
        free = locked.config.get("max_concurrency", DEFAULT_RUN_CONCURRENCY) - active
        starting = list(waiting.exclude(question__database__status__in=_PREPARING_STATUS)
                        .exclude(question__database__index_status__in=_PREPARING_INDEX)
                        .select_related("question__database").only(*_START_FIELDS)
                        .order_by("pk")[:max(0, min(free, START_BATCH))])
        started = _start_sessions(locked, starting)
        for item in done + starting:  # a pass settles a few items: an UPDATE each costs less than a bulk one
            RunItem.objects.filter(pk=item.pk).update(session=item.session_id, predicted_sql=item.predicted_sql,
                                                      prediction_note=item.prediction_note)
        if active + started or waiting.exists():
            return True, len(starting) == START_BATCH
        run_evaluate_queue(run=locked)
    return False, False


def _version_few_shot(version_id: int):
    """A published exemplar set version as session data, built once per process (versions are immutable). The
    cache is keyed by the id and the version's creation time: an id can be handed out again after a rolled-back
    transaction (SQLite's AUTOINCREMENT), and the cache must not answer for the other version."""
    stamp = ExemplarSetVersion.objects.filter(pk=version_id).values_list("created_at", flat=True).first()
    return _version_few_shot_at(version_id, stamp) if stamp is not None else None


@lru_cache(maxsize=16)
def _version_few_shot_at(version_id: int, stamp):
    found = ExemplarSetVersion.objects.select_related("exemplar_set").filter(pk=version_id).first()
    return few_shot_for_version(found) if found is not None else None


def _start_sessions(run: Run, items: list[RunItem]) -> int:
    """A session for each item (set on it, for the caller to store), queued once the caller's transaction
    commits; an item refused (its database broke, the launcher's budget is used up) gets the reason as its note.
    How many started."""
    if not items:
        return 0
    version_id, candidate = run.config.get("exemplar_set_version"), run.config.get("exemplar_candidate")
    version = (_version_few_shot(version_id) if version_id
               else snapshot_few_shot(candidate["snapshot"]) if candidate else None)
    example_pool = None
    if run.config.get("example_pool"):
        example_pool = ExamplePool.objects.defer("examples").get(pk=run.config["example_pool"]["id"])
    # A run launched before the rules left out only the question's own pair: resumed, it keeps its one rule.
    pool_rule = (run.config.get("example_pool") or {}).get("rule")
    specs = []
    for item in items:
        options = dict(run.config.get("options") or {})
        if run.strategy == "hdsp":
            options["gold_sql"] = item.question.gold_sql  # HDSP's feedback mode compares with the gold (paper)
        specs.append(session_services.SessionSpec(
            database=item.question.database, question=item.question.question, evidence=item.question.evidence,
            options=options, question_key=question_key(item.question) if example_pool is not None else None,
            pool_exclusion=question_exclusion(item.question, rule=pool_rule).to_dict()
            if example_pool is not None and pool_rule else None))
    created = session_services.session_create_many(
        specs=specs, strategy=run.strategy,
        endpoint=session_services.endpoint_from_snapshot(run.config["llm"]),  # as launched, not this worker's env
        few_shot=version, example_pool=example_pool,
        billed_to=run.created_by,  # the run's spend counts to its launcher's daily budget
        zero_shot=version is None)  # the run resolved its set (or none) when it was created
    started = 0
    for item, outcome in zip(items, created, strict=True):
        if isinstance(outcome, ValidationError):
            item.prediction_note = "not run: " + " ".join(outcome.messages)
        else:
            item.session = outcome
            started += 1
    return started
