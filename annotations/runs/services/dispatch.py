"""Starting a run's sessions up to its concurrency, collecting their predictions, queueing its scoring."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Q, Sum
from django.utils import timezone

from agent.models import AgentSession, Database, LLMEndpoint
from agent.services import handover
from agent.services import sessions as session_services
from agent.services.jobs import enqueue_on_commit
from agent.services.rows import instance_from_row
from annotations.exemplars.selectors import few_shot_for_version
from annotations.experiments.selectors import snapshot_few_shot
from annotations.models import ExemplarSetVersion
from annotations.runs.models import DatasetQuestion, Run, RunItem
from annotations.runs.pools import question_key
from annotations.runs.services.evaluation import run_evaluate_queue

logger = logging.getLogger(__name__)
DISPATCH_TASK = "annotations.tasks.dispatch_run"
DEFAULT_RUN_CONCURRENCY = 4
UNFINISHED_SESSION = ("queued", "running")
RETRYABLE_SESSION = ("failed", "llm_error", "cancelled")

def run_dispatch_queue(*, run: Run) -> None:
    """Queue a dispatch pass of the run once the current transaction commits."""
    enqueue_on_commit(DISPATCH_TASK, run.pk)


@lru_cache(maxsize=16)
def _version_few_shot(version_id: int):
    """A published exemplar set version as session data, once per process (versions are immutable)."""
    found = ExemplarSetVersion.objects.select_related("exemplar_set").filter(pk=version_id).first()
    return few_shot_for_version(found) if found is not None else None


# A database still being introspected or indexed (just imported) is waited for, not failed.
_PREPARING_STATUS = (Database.Status.PENDING, Database.Status.INTROSPECTING)
_PREPARING_INDEX = (Database.IndexStatus.QUEUED, Database.IndexStatus.BUILDING)


def run_dispatch(*, run: Run) -> bool:
    """Collect finished sessions' predictions, start sessions up to the run's concurrency, and queue the
    evaluation once nothing is left. Returns True while the run still has work in flight.

    Called by the ``dispatch_run`` poll (a safety net, and the launch) and, through ``run_session_finished``,
    when one of the run's sessions ends. Its cost does not grow with the run: it reads the items that hold a
    session not yet collected (at most the concurrency) and the next waiting ones, never the JSON columns,
    and writes in bulk. The run's row is locked for the pass, so two dispatchers of one run (a poll and a
    finished session, in any workers) never start more than the concurrency.
    """
    more = _dispatch(run.pk, wait=True)
    return True if more is None else more


# A finished session fills its slot only once this share of the slots its run holds is free, and at most
# DISPATCH_BATCH_MAX (1 slot up to 7 held, 2 up to 11, 3 up to 15, then 4): a pass then starts several sessions
# for little more than the cost of one. The last session in flight always passes.
DISPATCH_BATCH_SHARE = 4
DISPATCH_BATCH_MAX = 4
# ... and a free slot waits that long at most for the others: then it is filled alone. Without the bound, the
# last session of a wave of an LLM-bound run (sessions in step, ending within a second of each other) left its
# slot empty until the next wave ended, 3 s later: one question ran a whole session late and bench-runs step 3
# fell from 91-93 % to 81-82 % of its ideal in about one run in three (2026-11-25), and probably why batches
# of 8 had given 67 % there. Bounded, batches of 4 halved step 2's passes (578 -> 345) and cost step 3 nothing.
DISPATCH_BATCH_WAIT_S = 0.05
# How many times a finished session's thread tries to fill its slot when another pass holds the run (then the
# run's poll is the safety net).
DISPATCH_SKIPPED_TRIES = 4


# Runs that a thread of this process is passing over (run id -> such threads). A finished session whose run
# is in here leaves at once, as one that finds the run's row locked does, without asking the database: in
# bench-runs most finished sessions that wanted a pass found it held by a sibling thread of the same worker,
# and learning it from the database (a transaction and a locking read) cost each about 0.35 ms of CPU.
_passing: dict[int, int] = {}
_passing_lock = threading.Lock()
# The run of each session this process's passes started: when it finishes while a sibling thread passes over
# that run, it leaves without even counting (the holder counts after its pass, and sees its end, committed
# before). Two in three finished sessions of bench-runs' step 2 found a sibling passing. Bounded: a session
# that never finishes here (re-delivered elsewhere) only loses the shortcut when the map is cleared.
_started_runs: dict[int, int] = {}
_STARTED_RUNS_MAX = 100_000


def _dispatch(run_id: int, *, wait: bool) -> bool | None:
    """Passes over the run until no finished session is left behind by a pass that skipped its own: whether
    work is still in flight, or None when a pass was skipped for another thread or worker holding the run.

    ``wait=False`` (a finished session): when another thread or worker holds the run for a pass, return at
    once instead of queueing up behind it. The holder looks again once it has let go of the run (in this
    process and in the database), with the same rule as a finished session (``_needs_pass``), and passes
    again if a batch is waiting: a session whose own pass was skipped had committed its end before it looked
    for a holder, so that look sees it.
    """
    while True:
        with _passing_lock:
            if not wait and _passing.get(run_id):
                return None  # a sibling thread holds the run; it looks again after its pass
            _passing[run_id] = _passing.get(run_id, 0) + 1
        try:
            more = _dispatch_pass(run_id, skip_locked=not wait)
        finally:
            with _passing_lock:
                if _passing[run_id] == 1:
                    del _passing[run_id]
                else:
                    _passing[run_id] -= 1
        if more is None:
            return None  # another process holds the run; it looks again after its pass
        if not more or _needs_pass(run_id=run_id) is None:
            return more
        wait = False


def _needs_pass(*, run_id: int | None = None, session_id: int | None = None) -> int | None:
    """The run (given, or the session's) when its finished, uncollected sessions make a batch (or are all it
    holds, or free a slot for each question still waiting), else None. One read, without the run's lock."""
    slots = _free_slots(run_id=run_id, session_id=session_id)
    return None if slots is None or slots[1] else slots[0]


def _free_slots(*, run_id: int | None = None, session_id: int | None = None) -> tuple[int, bool] | None:
    """(the run, given or the session's; whether its finished, uncollected sessions are short of a batch
    that questions wait for) when they make a pass worth it now or after a wait, else None. (No question
    waiting: finished sessions are only to collect, and that waits for a batch or the run's last session.)
    One read, without the run's lock.

    Written in SQL: it runs once per finished session, and the ORM took about 1 ms of CPU to build it, ten
    times what the database took to answer. The literal empty strings let PostgreSQL use the partial index
    of uncollected items (``runitem_uncollected``).
    """
    with connection.cursor() as cursor:
        if run_id is not None:
            cursor.execute(_count_sql("%s"), [run_id])
        else:
            cursor.execute(_count_sql(f"(SELECT run_id FROM {RunItem._meta.db_table} WHERE session_id = %s LIMIT 1)"),
                           [session_id])
        row = cursor.fetchone()
    if row is None:
        return None  # not a run's session, or nothing of its run is in flight
    found, held, finished, waiting = row
    finished = int(finished or 0)
    if not finished:
        return None
    batch = max(1, min(DISPATCH_BATCH_MAX, held // DISPATCH_BATCH_SHARE))
    # Fewer questions waiting than a batch (the last ones): a free slot is enough. Waiting for a second one
    # left the last question of an LLM-bound run idle for a whole session (bench-runs step 3: 77 % instead of
    # 85-87 % of its ideal in the runs where it happened).
    if finished >= held or finished >= batch or 0 < waiting < batch:
        return found, False
    return (found, True) if waiting else None


@lru_cache(maxsize=2)
def _count_sql(run: str) -> str:
    # Built once, with the unfinished statuses as literals (constants of this module): two parameters fewer to
    # quote at every finished session (about 0.03 of 0.1 ms of CPU). The questions still waiting are counted
    # up to a batch only, so the count does not grow with the run.
    statuses = ", ".join(f"'{status}'" for status in UNFINISHED_SESSION)
    items = RunItem._meta.db_table
    return (f"WITH r AS (SELECT {run} AS id) "
            f"SELECT r.id, COUNT(*), SUM(CASE WHEN s.status IN ({statuses}) THEN 0 ELSE 1 END), "
            f"(SELECT COUNT(*) FROM (SELECT 1 FROM {items} w WHERE w.run_id = r.id AND w.session_id IS NULL "
            f"AND w.predicted_sql = '' AND w.prediction_note = '' LIMIT {int(DISPATCH_BATCH_MAX)}) AS w) "
            f"FROM r JOIN {items} i ON i.run_id = r.id AND i.predicted_sql = '' AND i.prediction_note = '' "
            f"JOIN {AgentSession._meta.db_table} s ON s.id = i.session_id GROUP BY r.id")


def _dispatch_pass(run_id: int, *, skip_locked: bool) -> bool | None:
    """One pass under the run's lock: whether work is still in flight; None when ``skip_locked`` found the
    run held by another dispatcher."""
    with transaction.atomic():
        locked = _locked_run(run_id, skip_locked=skip_locked)
        if locked is None:
            # SKIP LOCKED found no row: held by another dispatcher (or deleted: nothing to do either way).
            return None if skip_locked and connection.features.has_select_for_update_skip_locked else False
        run, stale_mark, endpoint = locked
        if run.status != Run.Status.RUNNING:
            return False
        if stale_mark:
            # What the revival sweep reads; at most one write a second however often sessions finish.
            Run.objects.filter(pk=run.pk).update(dispatched_at=timezone.now())
        in_flight = _in_flight(run.pk)
        labels = _SESSION_LABELS
        done = [_ItemWrite(pk, session_id, final_sql, "" if final_sql else f"agent: {labels.get(status, status)}")
                for pk, session_id, status, final_sql in in_flight if status not in UNFINISHED_SESSION]
        active = len(in_flight) - len(done)
        cap = run.config.get("spend_cap")
        if cap is not None:
            spent = run.items.filter(session__isnull=False).aggregate(s=Sum("session__cost"))["s"] or 0
            if spent >= cap:
                _waiting(run.pk).update(prediction_note=f"not run: spend cap ${cap:g} reached")
        capacity = max(0, run.config.get("max_concurrency", DEFAULT_RUN_CONCURRENCY) - active)
        started: list[_ItemWrite] = []
        refused: list[_ItemWrite] = []
        if capacity:
            with handover.passing(run.pk):  # threads of this process waiting on the run get one each
                started, refused = _start_sessions(run, _next_waiting(run.pk, capacity), endpoint)
            if len(_started_runs) > _STARTED_RUNS_MAX:
                _started_runs.clear()
            _started_runs.update((item.session_id, run.pk) for item in started)
        _write_items(done + started + refused)
        if active + len(started) or _waiting(run.pk).exists():
            return True
        run_evaluate_queue(run=run)
    return False


_SESSION_LABELS = dict(AgentSession.Status.choices)  # what a collected item's note names (read at every pass)


def _locked_run(run_id: int, *, skip_locked: bool) -> tuple[Run, bool, tuple] | None:
    """The run's row locked for the pass (``FOR UPDATE``, ``SKIP LOCKED`` when asked; SQLite has one writer),
    with only what a pass reads of it (status, strategy, config, launcher; the rest deferred), whether its
    ``dispatched_at`` is older than a second, and the columns of the LLM endpoint record its snapshot names
    (``session_services.endpoint_columns``; all NULL when there is none). None: no row (or, skipping, a row held
    by another dispatcher).

    Written in SQL, one statement that locks and reads both: it runs at every pass, and the ORM's locking read
    took about 0.75 ms of CPU to build against 0.14 ms for this one (most of which is the config's JSON); the
    endpoint was a statement of its own, 0.1-0.15 ms of CPU a pass.
    """
    lock = ""
    if connection.features.has_select_for_update:
        lock = " FOR UPDATE OF r"  # the run only (the endpoint is on the nullable side of the join)
        if skip_locked and connection.features.has_select_for_update_skip_locked:
            lock += " SKIP LOCKED"
    # Compared in SQL: SQLite hands a raw cursor text for datetimes; its stored format sorts as time does.
    cutoff = connection.ops.adapt_datetimefield_value(timezone.now() - timedelta(seconds=1))
    with connection.cursor() as cursor:
        cursor.execute(_locked_run_sql(lock), [cutoff, run_id])
        row = cursor.fetchone()
    if row is None:
        return None
    (status, strategy, config, created_by_id, stale_mark), endpoint = row[:5], row[5:]
    run = instance_from_row(Run, {"id": run_id, "status": status, "strategy": strategy, "config": config,
                                  "created_by_id": created_by_id})
    if created_by_id is not None:
        # Whose budget the sessions count to: only its id is read (budgets look up by account).
        run.created_by = instance_from_row(get_user_model(), {"id": created_by_id})
    return run, bool(stale_mark), endpoint


@lru_cache(maxsize=4)
def _locked_run_sql(lock: str) -> str:
    endpoints, name = LLMEndpoint._meta.db_table, connection.ops.quote_name(LLMEndpoint._meta.get_field("name").column)
    # The endpoint's name in the run's LLM snapshot (run_create_agent's config["llm"]["endpoint"]).
    snapshot_name = ("r.config -> 'llm' ->> 'endpoint'" if connection.vendor == "postgresql"
                     else "json_extract(r.config, '$.llm.endpoint')")
    return (f"SELECT r.status, r.strategy, r.config, r.created_by_id, "
            f"(r.dispatched_at IS NULL OR r.dispatched_at < %s), {session_services.endpoint_columns('e')} "
            f"FROM {Run._meta.db_table} r LEFT JOIN {endpoints} e ON e.{name} = {snapshot_name} "
            f"WHERE r.id = %s{lock}")


@dataclass(slots=True)
class _ItemWrite:
    """What a pass writes of an item: its prediction and note once collected, its session once started; and, for
    an item to start, its question. A plain record: a RunItem instance cost a model's __init__ over its twenty
    fields, twice for each session of a run (started, then collected)."""

    pk: int
    session_id: int | None = None
    predicted_sql: str = ""
    prediction_note: str = ""
    question: DatasetQuestion | None = None


def _waiting(run_id: int):
    """The run's items waiting for a session (a database still preparing included)."""
    return RunItem.objects.filter(run_id=run_id, predicted_sql="", prediction_note="", session__isnull=True,
                                  question__database__isnull=False).order_by()


# What starting a session reads of an item's question and database (a database's schema is tens of kB).
_QUESTION_FIELDS = ("id", "dataset_id", "index", "database_id", "question", "evidence", "gold_sql")
_DATABASE_FIELDS = ("id", "name", "status", "index_status")


def _next_waiting(run_id: int, limit: int) -> list[_ItemWrite]:
    """The next ``limit`` waiting items, in question order (the items' primary key: created in that order),
    whose database is ready to start on, with their question and database (only what a session's start
    reads; the rest loads if used).

    Written in SQL: the ORM's query with its joins and deferred columns took about 1 ms of CPU to build at
    every pass, several times what the database took to answer. The literal empty strings let PostgreSQL use
    the partial index of uncollected items (``runitem_uncollected``).
    """
    sql, question_fields, database_fields = _next_waiting_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, [run_id, *_PREPARING_STATUS, *_PREPARING_INDEX, limit])
        rows = cursor.fetchall()
    items, databases = [], {}
    split = len(question_fields)
    for item_id, *values in rows:
        question = instance_from_row(DatasetQuestion, {f.attname: v for f, v in
                                                       zip(question_fields, values[:split], strict=True)})
        if question.database_id not in databases:  # one instance per database (its checks run once a pass)
            databases[question.database_id] = instance_from_row(
                Database, {f.attname: v for f, v in zip(database_fields, values[split:], strict=True)})
        question.database = databases[question.database_id]
        items.append(_ItemWrite(item_id, question=question))
    return items


@lru_cache(maxsize=1)
def _next_waiting_sql() -> tuple[str, list[Any], list[Any]]:
    """The statement (built once) and the question's and database's fields it reads, in its order."""
    qn = connection.ops.quote_name
    question_fields = [f for f in DatasetQuestion._meta.concrete_fields if f.attname in _QUESTION_FIELDS]
    database_fields = [f for f in Database._meta.concrete_fields if f.attname in _DATABASE_FIELDS]
    columns = ", ".join([*(f"q.{qn(f.column)}" for f in question_fields),
                         *(f"d.{qn(f.column)}" for f in database_fields)])
    return (f"SELECT i.id, {columns} FROM {RunItem._meta.db_table} i "
            f"JOIN {DatasetQuestion._meta.db_table} q ON q.id = i.question_id "
            f"JOIN {Database._meta.db_table} d ON d.id = q.database_id "
            f"WHERE i.run_id = %s AND i.session_id IS NULL AND i.predicted_sql = '' AND i.prediction_note = '' "
            f"AND d.status NOT IN (%s, %s) AND d.index_status NOT IN (%s, %s) ORDER BY i.id LIMIT %s",
            question_fields, database_fields)


def _in_flight(run_id: int) -> list[tuple[int, int, str, str]]:
    """(item id, session id, session status, final SQL) of the run's items holding a session not yet collected.

    Written in SQL, as the two statements below: they run at every pass, and the ORM spent more CPU building
    them (and Django's bulk_update its CASE expressions, one object per item and field) than the database
    spent answering them. The literal empty strings let PostgreSQL use ``runitem_uncollected``.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT i.id, i.session_id, s.status, s.final_sql FROM {RunItem._meta.db_table} i "
            f"JOIN {AgentSession._meta.db_table} s ON s.id = i.session_id "
            f"WHERE i.run_id = %s AND i.predicted_sql = '' AND i.prediction_note = ''", [run_id])
        return cursor.fetchall()


def _write_items(items: list[_ItemWrite]) -> None:
    """The pass's collected, started and refused items (prediction, note, session) in one UPDATE.

    The ids (integers read from the database) are written into the statement: as parameters, each was quoted
    three times over at every pass; the texts stay parameters."""
    if not items:
        return
    ids = [str(int(item.pk)) for item in items]
    sessions = [str(int(item.session_id)) if item.session_id is not None else "NULL" for item in items]
    # CAST: a column of NULLs (no refused item has a session) has no type of its own on PostgreSQL.
    sets = [f"{column} = CAST(CASE id {' '.join(f'WHEN {pk} THEN %s' for pk in ids)} END AS TEXT)"
            for column in ("predicted_sql", "prediction_note")]
    cases = " ".join(f"WHEN {pk} THEN {session}" for pk, session in zip(ids, sessions, strict=True))
    sets.append(f"session_id = CAST(CASE id {cases} END AS BIGINT)")
    params = [item.predicted_sql for item in items] + [item.prediction_note for item in items]
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {RunItem._meta.db_table} SET {', '.join(sets)} WHERE id IN ({', '.join(ids)})",
                       params)


def _start_sessions(run: Run, items: list[_ItemWrite],
                    endpoint_record: tuple) -> tuple[list[_ItemWrite], list[_ItemWrite]]:
    """A session for each item (in the caller's transaction: queued once it commits): the items started and
    those refused (with the reason as their note), for the caller to write."""
    if not items:
        return [], []
    version_id, candidate = run.config.get("exemplar_set_version"), run.config.get("exemplar_candidate")
    version = (_version_few_shot(version_id) if version_id
               else snapshot_few_shot(candidate["snapshot"]) if candidate else None)
    example_pool = None
    if run.config.get("example_pool"):
        from agent.models import ExamplePool

        example_pool = ExamplePool.objects.defer("examples").get(pk=run.config["example_pool"]["id"])
    # The LLM recorded when the run was launched, not whatever this worker's environment says.
    endpoint = session_services.endpoint_from_snapshot(run.config["llm"], record=endpoint_record)
    specs = []
    for item in items:
        options = dict(run.config.get("options") or {})
        if run.strategy == "hdsp":
            options["gold_sql"] = item.question.gold_sql  # HDSP's feedback mode compares with the gold (paper)
        specs.append(session_services.SessionSpec(
            database=item.question.database, question=item.question.question, evidence=item.question.evidence,
            options=options, question_key=question_key(item.question) if example_pool is not None else None))
    # One INSERT for the pass's sessions, each checked as session_create checks one; queued once this commits.
    created = session_services.session_create_many(
        specs=specs, strategy=run.strategy, endpoint=endpoint, few_shot=version, example_pool=example_pool,
        billed_to=run.created_by,  # the run's spend counts to its launcher's daily budget
        zero_shot=version is None)  # the run resolved its set (or none) when it was created
    started, refused = [], []
    for item, outcome in zip(items, created, strict=True):
        if isinstance(outcome, ValidationError):
            item.prediction_note = "not run: " + " ".join(outcome.messages)
            refused.append(item)
        else:
            item.session_id = outcome.pk
            started.append(item)
    return started, refused


def run_session_finished(*, session_id: int) -> None:
    """A session ended: if it belongs to a running run, collect it and fill its slot, once a few are free
    (or once this thread has waited ``DISPATCH_BATCH_WAIT_S`` for a second one)."""
    started_by = _started_runs.pop(session_id, None)
    if started_by is not None:
        with _passing_lock:
            sibling = bool(_passing.get(started_by))
        if sibling:
            # A sibling thread passes over its run, and counts again after its pass: that pass, or the next,
            # may hand this thread a session. If none comes, the slot is counted below as after a wait.
            if handover.wait_for_pass(started_by, DISPATCH_BATCH_WAIT_S):
                return
            return _fill_slot(_free_slots(run_id=started_by), waited=True)
    # Each finished session committed its end before this read, so the last of several finishing at once
    # counts them all: a batch is never left waiting for a session that has already finished. A session this
    # process started names its run: counted without looking the run up by the session.
    _fill_slot(_free_slots(session_id=session_id) if started_by is None else _free_slots(run_id=started_by),
               waited=False)


def _fill_slot(slots: tuple[int, bool] | None, *, waited: bool) -> None:
    if slots is None:
        return  # not a run's session, collected already, or nothing to start (collected with a batch later)
    run_id, short = slots
    if short and not waited:
        # A free slot short of a batch: a session ending meanwhile passes for both, and may hand this thread
        # one of the sessions it starts; else, after the wait, the slot is filled alone.
        if handover.wait_for_pass(run_id, DISPATCH_BATCH_WAIT_S):
            return
        slots = _free_slots(run_id=run_id)
        if slots is None:
            return
    with handover.filling_slot():  # this thread may run one of the sessions the pass starts
        for tries_left in range(DISPATCH_SKIPPED_TRIES - 1, -1, -1):
            if _dispatch(run_id, wait=False) is not None:
                return
            # Another thread or worker was passing over the run. Its pass may not have counted this slot, and
            # its look afterwards leaves a slot short of a batch: wait for it to hand this thread a session,
            # else fill the slot (bench-runs step 3: a wave's last slot was otherwise left for the next wave).
            # No count after the last wait: nothing would act on it.
            if (handover.wait_for_pass(run_id, DISPATCH_BATCH_WAIT_S) or not tries_left
                    or _free_slots(run_id=run_id) is None):
                return


def runs_revive_dispatch(*, idle_s: float = 30) -> list[int]:
    """Agent runs nobody dispatched for a while (a lost wake-up, a dead worker): dispatch them again."""
    cutoff = timezone.now() - timedelta(seconds=idle_s)
    stale = list(Run.objects.filter(source=Run.Source.AGENT, status=Run.Status.RUNNING)
                 .filter(Q(dispatched_at__lt=cutoff) | Q(dispatched_at__isnull=True))
                 .values_list("pk", flat=True))
    for pk in stale:
        enqueue_on_commit(DISPATCH_TASK, pk, robust=True)  # a broker that is away: the next sweep tries again
    return stale


