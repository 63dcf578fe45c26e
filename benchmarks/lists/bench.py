"""``make bench-lists``: list pages and API lists at scale (1 M turns, 200k sessions) on PostgreSQL.

Fills a benchmark database of its own (``--pg``, default ``t2s_bench_lists`` on the local server; never the app's
or the tests' database) with ``INSERT ... SELECT generate_series`` cloned from one template row per table (so
every column another migration adds is filled with its default), then requests every list page and API list
in-process through Django's test client as a Viewer granted half of the databases (the visibility filters are
part of every query), and prints p50 and p95 per URL: first page, a deep page, filters and sorts.

    python -m benchmarks.lists.bench [--sessions 200000] [--turns 5] [--repeats 30] [--keep] [--pg DSN]
        [--only REGEX] [--fill-only]

``--keep`` reuses a database filled by an earlier run with the same sizes. Target: every p95 under 200 ms.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time

TARGET_MS = 200.0
DATABASES = 20
STRATEGIES = ("interactive_t2s", "interactive_t2s", "dart_sql", "scl_sql", "hdsp")
MODELS = ("gpt-4o-mini", "gpt-4o", "llama3.1")
STATUSES = ("answered",) * 6 + ("failed", "max_rounds", "gave_up", "llm_error")
NOUNS = ("singers", "albums", "tracks", "customers", "orders", "flights", "students", "concerts")
TAILS = ("are there", "were sold in 2015", "live in France", "have more than three items",
         "are older than the average", "share a country with Joe")


def sql_array(values) -> str:
    return "ARRAY[" + ", ".join("'" + v.replace("'", "''") + "'" for v in values) + "]"


def setup_environment(dsn: str) -> None:
    os.environ["DATABASE_URL"] = dsn
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "t2s_site.settings")
    os.environ.setdefault("T2S_VAR_DIR", tempfile.mkdtemp(prefix="t2s-bench-lists-"))
    os.environ["ALLOWED_HOSTS"] = "testserver,localhost"
    os.environ["T2S_API_RATE_USER"] = "1000000/minute"  # the API throttle is not what is measured
    os.environ.pop("CELERY_BROKER_URL", None)


def create_database(dsn: str, fresh: bool) -> bool:
    """Create the benchmark database (dropped first when ``fresh``); whether it existed already."""
    import psycopg

    base, name = dsn.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None
        if exists and fresh:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            exists = False
        if not exists:
            admin.execute(f'CREATE DATABASE "{name}"')
    return exists


def columns(cursor, table: str) -> list[str]:
    cursor.execute("SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                   "ORDER BY ordinal_position", [table])
    return [r[0] for r in cursor.fetchall() if r[0] != "id"]


def clone(cursor, table: str, template_id: int, source: str, overrides: dict[str, str], where: str = "") -> int:
    """INSERT rows of ``table`` copied from the template row, one per row of ``source`` (a FROM clause whose
    columns the ``overrides`` expressions use, filtered by ``where``), the overridden columns computed."""
    cols = columns(cursor, table)
    unknown = set(overrides) - set(cols)
    assert not unknown, unknown
    select = ", ".join(overrides.get(c, f't."{c}"') for c in cols)
    cursor.execute(f'INSERT INTO {table} ({", ".join(chr(34) + c + chr(34) for c in cols)}) '
                   f"SELECT {select} FROM {source} CROSS JOIN (SELECT * FROM {table} WHERE id = {template_id}) t"
                   + (f" WHERE {where}" if where else ""))
    return cursor.rowcount


def fill(sessions: int, turns: int) -> None:
    from django.contrib.auth.models import Group, User
    from django.db import connection

    from agent.models import AgentSession, Database, DatabaseGrant, Turn
    from agent.roles import ensure_roles
    from annotations.labels.models import Label, Queue
    from annotations.labels.selectors import default_taxonomy_version
    from annotations.labels.version import labels_changed
    from annotations.models import Exemplar, ExemplarSet
    from annotations.runs.models import Dataset, DatasetQuestion, Run, RunItem

    started = time.perf_counter()
    ensure_roles()
    viewer = User.objects.create_user("bench-viewer", password="bench-viewer-pw")
    viewer.groups.add(Group.objects.get(name="Viewer"))
    team = Group.objects.create(name="bench-team")
    viewer.groups.add(team)
    askers = [User.objects.create_user(f"asker{i}") for i in range(5)]
    dbs = [Database.objects.create(name=f"db{i:02d}", engine="sqlite", location=f"/nonexistent/db{i}.sqlite",
                                   status="ready", index_status="ready") for i in range(DATABASES)]
    for db in dbs[: DATABASES // 2]:
        DatabaseGrant.objects.create(database=db, group=team)
    template = AgentSession.objects.create(
        database=dbs[0], question="template", strategy="interactive_t2s", model="gpt-4o-mini", status="answered",
        config={"llm": {"model": "gpt-4o-mini", "endpoint": "bench"}, "strategy": {"max_rounds": 12}},
        final_sql="SELECT count(*) FROM singer", created_by=askers[0])
    db_ids = "ARRAY[" + ",".join(str(d.pk) for d in dbs) + "]"
    user_ids = "ARRAY[" + ",".join(str(u.pk) for u in askers) + "]"
    with connection.cursor() as cursor:
        n = clone(cursor, "agent_agentsession", template.pk, f"generate_series(1, {sessions}) g", {
            "database_id": f"({db_ids})[1 + g % {DATABASES}]",
            "question": f"'How many ' || ({sql_array(NOUNS)})[1 + g % {len(NOUNS)}] || ' ' || "
                        f"({sql_array(TAILS)})[1 + (g / {len(NOUNS)}) % {len(TAILS)}] || ' (batch ' || g || ')?'",
            "strategy": f"({sql_array(STRATEGIES)})[1 + (g / 3) % {len(STRATEGIES)}]",
            "model": f"({sql_array(MODELS)})[1 + (g / 7) % {len(MODELS)}]",
            "status": f"({sql_array(STATUSES)})[1 + (g * 7) % {len(STATUSES)}]",
            "rounds": "(g * 13) % 13", "tool_calls": "(g * 13) % 12",
            "prompt_tokens": "(g * 7919) % 40000", "completion_tokens": "(g * 31) % 900",
            "cost": "CASE WHEN g % 5 = 0 THEN NULL ELSE ((g * 37) % 5000) / 100000.0 END",
            "elapsed_ms": "CASE WHEN g % 50 = 0 THEN NULL ELSE ((g * 17) % 60000)::float END",
            "llm_latency_ms": "((g * 17) % 50000)::float",
            "created_at": f"now() - make_interval(mins => {sessions} - g)",
            "created_by_id": f"({user_ids})[1 + g % 5]",
        })
        print(f"  {n} sessions", flush=True)
        turn_template = Turn.objects.create(
            session=template, index=0, prompt=[{"role": "user", "content": "Observation: 3 rows"}],
            prompt_prefix_len=1, completion="Thought: count them.\nAction: ExecuteSQL(\"SELECT count(*) FROM t\")",
            thought="count them.", action='ExecuteSQL("SELECT count(*) FROM t")', tool="ExecuteSQL",
            observation="| count |\n| 3 |", prompt_tokens=900, completion_tokens=40, llm_latency_ms=800)
        n = clone(cursor, "agent_turn", turn_template.pk,
                  f"agent_agentsession s CROSS JOIN generate_series(0, {turns - 1}) k", {
                      "session_id": "s.id", "index": "k", "prompt_prefix_len": "CASE WHEN k = 0 THEN 0 ELSE 2 * k END",
                      "created_at": "s.created_at + make_interval(secs => k)"}, where=f"s.id <> {template.pk}")
        print(f"  {n} turns", flush=True)

    # a dataset of 1,034 questions, 30 runs of it (10 of our strategy, with sessions), labels on 10, 30 queues
    dataset = Dataset.objects.create(name="spider-like", kind="spider", source_path="/bench", question_count=1034)
    question = DatasetQuestion.objects.create(dataset=dataset, index=0, db_id="db00", database=dbs[0],
                                              question="q", gold_sql="SELECT 1", difficulty="easy",
                                              table_count=1, join_count=0)
    with connection.cursor() as cursor:
        clone(cursor, "annotations_datasetquestion", question.pk, "generate_series(1, 1033) g", {
            "index": "g", "db_id": "'db' || lpad((g % 10)::text, 2, '0')",
            "database_id": f"({db_ids})[1 + g % 10]", "question": "'Question ' || g",
            "difficulty": "(ARRAY['easy','medium','hard','extra'])[1 + g % 4]",
            "table_count": "1 + g % 4", "join_count": "g % 4"})
    version = default_taxonomy_version()
    categories = list(version.categories.all())
    for r in range(30):
        agent = r < 10
        run = Run.objects.create(name=f"run {r}", dataset=dataset, source="agent" if agent else "imported",
                                 strategy="interactive_t2s" if agent else "", status="done",
                                 totals={"ex": 60.0, "questions": 1034, "scored": 1034, "correct": 620})
        first_session = AgentSession.objects.order_by("pk").values_list("pk", flat=True)[
            1 + (r * 1034) % max(1, sessions - 1100)] if agent else None
        item = RunItem.objects.create(run=run, question=question, session_id=first_session, predicted_sql="SELECT 2",
                                      eval_status="ok", ex=False)
        with connection.cursor() as cursor:
            clone(cursor, "annotations_runitem", item.pk, "annotations_datasetquestion q", {
                "question_id": "q.id", "session_id": f"{first_session} + q.index" if agent else "NULL",
                "ex": f"(q.index * 7 + {r}) % 10 < 6"}, where=f"q.dataset_id = {dataset.pk} AND q.index > 0")
        if 10 <= r < 20:
            failed = list(RunItem.objects.filter(run=run, ex=False).values_list("pk", flat=True))
            Label.objects.bulk_create([Label(item_id=i, category=categories[i % len(categories)],
                                             taxonomy_version=version, annotator=askers[i % 3]) for i in failed])
        Queue.objects.create(name=f"queue {r}", run=run, taxonomy_version=version,
                             db_id="db01" if r % 2 else "", max_annotators=1 + r % 2)
    Exemplar.objects.bulk_create([Exemplar(database=dbs[i % DATABASES], question=f"exemplar {i}",
                                           final_sql="SELECT 1", author=askers[0]) for i in range(500)])
    ExemplarSet.objects.bulk_create([ExemplarSet(name=f"set {i}") for i in range(20)])
    labels_changed()  # labels, items and queues written in bulk: label counts cached before are stale
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    print(f"  filled in {time.perf_counter() - started:.0f} s", flush=True)


def measure(repeats: int, only: str = "") -> list[tuple[str, float, float, int]]:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from rest_framework.pagination import Cursor, CursorPagination
    from rest_framework.request import Request
    from rest_framework.test import APIRequestFactory

    from agent import policies
    from agent.keyset import encode_cursor
    from annotations.labels.models import Label, Queue
    from annotations.runs.models import Dataset, Run

    viewer = User.objects.get(username="bench-viewer")
    client = Client()
    client.force_login(viewer)
    visible = policies.visible_sessions(viewer)
    qs_count = visible.count()
    offset = min(100_000, qs_count - 30)  # the viewer sees half the sessions: 100,000 at 200k, the last page
    deep = visible.order_by("-created_at", "-id")[offset]
    deep_cursor = encode_cursor(deep.created_at, deep.pk)
    deep_cost = visible.filter(cost__isnull=False).order_by("-cost", "-id")[visible.count() // 2]
    paginator = CursorPagination()
    paginator.ordering = ("-created_at", "-id")
    paginator.base_url = "/api/sessions/"
    paginator.request = Request(APIRequestFactory().get("/api/sessions/"))
    api_deep = paginator.encode_cursor(Cursor(offset=0, reverse=False, position=deep.created_at.isoformat()))
    labels_paginator = CursorPagination()
    labels_paginator.ordering = ("item_id",)
    labels_paginator.base_url = "/api/labels/"
    labels_paginator.request = Request(APIRequestFactory().get("/api/labels/"))
    session = visible.order_by("-created_at").first()
    run = Run.objects.filter(source="agent").order_by("pk").first()
    labelled = Run.objects.filter(name="run 12").first()
    dataset = Dataset.objects.get(name="spider-like")
    queue = Queue.objects.order_by("pk").first()
    deep_item = Label.objects.filter(item__run=labelled).order_by("-item_id").values_list("item_id", flat=True)[50]
    labels_deep = labels_paginator.encode_cursor(Cursor(offset=0, reverse=False, position=str(deep_item)))
    urls = [
        ("/sessions/", "sessions list, first page"),
        (f"/sessions/?cursor={deep_cursor}", f"sessions list, page at row {offset:,} of {qs_count:,}"),
        ("/sessions/?sort=created", "sessions list, oldest first (the old 'last page')"),
        ("/sessions/?status=failed", "filter status"),
        ("/sessions/?strategy=dart_sql&model=gpt-4o", "filter strategy + model"),
        ("/sessions/?database=db03&status=answered", "filter database + status"),
        ("/sessions/?q=France", "question filter, common word"),
        ("/sessions/?q=batch+123457", "question filter, rare text"),
        ("/sessions/?sort=-cost", "sort by cost"),
        (f"/sessions/?sort=-cost&cursor={encode_cursor(deep_cost.cost, deep_cost.pk)}", "sort by cost, deep page"),
        ("/sessions/?sort=-latency&status=failed", "sort by latency, filtered"),
        ("/sessions/?sort=-tokens", "sort by tokens"),
        ("/sessions/?sort=rounds&strategy=hdsp", "sort by rounds, filtered"),
        (f"/sessions/{session.pk}/", "session page (5 turns)"),
        (f"/sessions/{session.pk}/?after=4", "session live poll, nothing new"),
        ("/ask/", "ask page (recent sessions)"),
        ("/api/sessions/", "API sessions, first page"),
        (api_deep.replace("http://testserver", ""), f"API sessions, page at row {offset:,}"),
        ("/api/sessions/?status=failed&strategy=dart_sql", "API sessions, filters"),
        ("/api/sessions/?q=batch+123457", "API sessions, question filter"),
        (f"/api/sessions/{session.pk}/", "API session with turns"),
        (f"/api/sessions/{session.pk}/turns/?after=1", "API turns after an index"),
        ("/databases/", "databases"),
        ("/api/databases/", "API databases"),
        ("/datasets/", "datasets"),
        (f"/datasets/{dataset.name}/", "dataset page (30 runs)"),
        ("/api/datasets/", "API datasets"),
        ("/runs/", "runs"),
        (f"/runs/{run.pk}/", "run page, first items"),
        (f"/runs/{run.pk}/?page=20", "run page, items page 20"),
        ("/api/runs/", "API runs"),
        (f"/api/runs/{run.pk}/items/", "API run items"),
        ("/labels/", "labels overview (10 labelled runs)"),
        ("/labels/queues/", "label queues (30)"),
        (f"/labels/queues/{queue.pk}/", "one queue"),
        (f"/labels/queues/{queue.pk}/?page=4", "one queue, page 4"),
        (f"/labels/runs/{labelled.pk}/questions/", "labelled run's questions"),
        ("/api/labels/", "API labels"),
        (f"/api/labels/?run={labelled.pk}", "API labels of a run"),
        (labels_deep.replace("http://testserver", "") + f"&run={labelled.pk}", "API labels of a run, last pages (cursor)"),
        ("/api/queues/", "API queues"),
        ("/exemplars/", "exemplars (500)"),
        ("/api/exemplars/", "API exemplars"),
        ("/exemplars/sets/", "exemplar sets"),
        ("/api/exemplar-sets/", "API exemplar sets"),
    ]
    if only:  # measure only the lists whose label or URL matches (a regular expression)
        urls = [(url, label) for url, label in urls if re.search(only, label) or re.search(only, url)]
    rows = []
    for url, label in urls:
        times = []
        for i in range(repeats + 2):
            start = time.perf_counter()
            response = client.get(url)
            elapsed = (time.perf_counter() - start) * 1000
            if response.status_code != 200:
                raise SystemExit(f"{url}: HTTP {response.status_code}")
            if i >= 2:  # two warm-up requests
                times.append(elapsed)
        # one more request, its queries captured: how many, and how long the database took (the rest is Python)
        with CaptureQueriesContext(connection) as queries:
            client.get(url)
        sql_ms = sum(float(q["time"]) for q in queries.captured_queries) * 1000
        times.sort()
        p95 = times[min(len(times) - 1, int(round(0.95 * len(times))) - 1)]
        rows.append((label, statistics.median(times), p95, len(queries), sql_ms))
        print(f"  {statistics.median(times):8.1f} {p95:8.1f} {sql_ms:8.1f} {len(queries):4d}  {label}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default=os.environ.get("T2S_BENCH_LISTS_DSN",
                                                       "postgresql://postgres@127.0.0.1:5432/t2s_bench_lists"))
    parser.add_argument("--sessions", type=int, default=200_000)
    parser.add_argument("--turns", type=int, default=5, help="turns per session")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--keep", action="store_true", help="reuse an already filled benchmark database")
    parser.add_argument("--only", default="", metavar="REGEX",
                        help="measure only the lists whose label or URL matches (e.g. 'labels|queue')")
    parser.add_argument("--fill-only", action="store_true", help="fill the database, measure nothing")
    args = parser.parse_args(argv)
    setup_environment(args.pg)
    existed = create_database(args.pg, fresh=not args.keep)
    import django

    django.setup()
    from django.core.management import call_command

    from agent.models import AgentSession, Turn

    call_command("migrate", verbosity=0)
    if not existed or not AgentSession.objects.exists():
        print(f"filling {args.sessions:,} sessions x {args.turns} turns ...", flush=True)
        fill(args.sessions, args.turns)
    if args.fill_only:
        return 0
    print(f"{AgentSession.objects.count():,} sessions, {Turn.objects.count():,} turns; "
          f"{args.repeats} requests per URL (after 2 warm-ups), as a Viewer granted half the databases")
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    print(f"  {'p50 ms':>8} {'p95 ms':>8} {'SQL ms':>8} {'SQLs':>4}  list")
    rows = measure(args.repeats, args.only)
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    over = [r for r in rows if r[2] >= TARGET_MS]
    print(f"\n{len(rows) - len(over)} of {len(rows)} under the {TARGET_MS:.0f} ms p95 target"
          + ("; over: " + ", ".join(f"{r[0]} ({r[2]:.0f} ms)" for r in over) if over else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
