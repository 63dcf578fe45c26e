"""Every list page and API list runs a fixed number of queries, whatever the number of rows it shows.

Each test builds a list with 2 rows, counts the queries of one request, adds 18 rows and asserts the same request
runs no more queries (``django_assert_max_num_queries``): a per-row query (N+1) fails it. They run for a user
granted one database (the visibility filters are part of every query) and, where it differs, for a superuser.
"""

from __future__ import annotations

import importlib
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agent.models import AgentSession, Turn
from agent.roles import ANNOTATOR, CURATOR, OPERATOR, ensure_roles
from tests.conftest import give_roles
from tests.conftest import group_of_testers as team

pytestmark = pytest.mark.django_db

SQLITE = "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO t VALUES (1, 'a');"


@pytest.fixture
def world(db, make_sqlite, grant, user):
    """A registered database granted to ``user`` (Viewer, Asker, Annotator, Curator, Operator), with a taxonomy."""
    from agent import services as agent_services

    importlib.import_module("annotations.migrations.0005_seed_error_taxonomy").seed(
        __import__("django.apps", fromlist=["apps"]).apps, None)
    ensure_roles()
    give_roles(user, ANNOTATOR, CURATOR, OPERATOR)
    database = agent_services.database_register(name="shop", location=str(make_sqlite(SQLITE, "shop.sqlite")),
                                                refresh="none")
    grant(database, team())
    return database


def add_sessions(database, user, n: int, *, turns: int = 0) -> list[AgentSession]:
    start = AgentSession.objects.count()
    sessions = AgentSession.objects.bulk_create([
        AgentSession(database=database, question=f"How many rows in t? ({start + i})", strategy="interactive_t2s",
                     model="replay-model", status="answered", rounds=2, prompt_tokens=100 + i, completion_tokens=10,
                     cost=0.001 * i if i % 3 else None, elapsed_ms=100.0 + i, created_by=user)
        for i in range(n)])
    for session in sessions:
        Turn.objects.bulk_create([
            Turn(session=session, index=k, prompt=[{"role": "user", "content": f"step {k}"}], prompt_prefix_len=k,
                 completion=f"Thought: {k}\nAction: Done", thought=str(k), action="Done", tool="Done")
            for k in range(turns)])
    return sessions


def assert_flat(client, url: str, grow, django_assert_max_num_queries, *, params=None, htmx: bool = False):
    """``url`` runs no more queries after ``grow()`` (which adds 18 rows) than before."""
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    with CaptureQueriesContext(connection) as before:
        response = client.get(url, params or {}, **headers)
    assert response.status_code == 200, (url, response.status_code)
    grow()
    with django_assert_max_num_queries(len(before)):
        response = client.get(url, params or {}, **headers)
    assert response.status_code == 200
    return response


# --- sessions -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("params", [
    {}, {"sort": "-cost"}, {"sort": "latency"}, {"sort": "-tokens"}, {"sort": "rounds"},
    {"q": "rows", "status": "answered", "strategy": "interactive_t2s", "model": "replay-model", "database": "shop"},
])
def test_sessions_list_queries_do_not_grow(user_client, user, world, django_assert_max_num_queries, params):
    add_sessions(world, user, 2)
    response = assert_flat(user_client, reverse("session_list"), lambda: add_sessions(world, user, 18),
                           django_assert_max_num_queries, params=params)
    assert response.content.decode().count('<tr>') == 20 + 1  # header row + every session (page of 30)


def test_sessions_tables_do_not_read_results_configs_or_schemas(user_client, user, world):
    add_sessions(world, user, 3)
    for url in (reverse("session_list"), reverse("ask")):
        with CaptureQueriesContext(connection) as queries:
            assert user_client.get(url).status_code == 200
        rows = [q["sql"] for q in queries.captured_queries if 'FROM "agent_agentsession"' in q["sql"]
                and '"agent_agentsession"."question"' in q["sql"]]
        assert rows, url
        for sql in rows:
            for column in ('"agent_agentsession"."result"', '"agent_agentsession"."config"', '"agent_database"."schema"',
                           '"agent_database"."index_manifest"'):
                assert column not in sql, (url, column)


def test_sessions_deep_page_queries_do_not_grow(user_client, user, world, django_assert_max_num_queries):
    from agent import selectors

    add_sessions(world, user, 40)
    qs = selectors.session_list(viewer=user)
    cursor = selectors.session_page(qs, cursor=None, size=30).next_cursor
    assert_flat(user_client, reverse("session_list"), lambda: add_sessions(world, user, 18),
                django_assert_max_num_queries, params={"cursor": cursor})


def test_ask_page_recent_sessions_queries_do_not_grow(user_client, user, world, django_assert_max_num_queries):
    add_sessions(world, user, 2)
    assert_flat(user_client, reverse("ask"), lambda: add_sessions(world, user, 18), django_assert_max_num_queries)


def test_session_page_and_its_poll_queries_do_not_grow_with_turns(user_client, user, world,
                                                                   django_assert_max_num_queries):
    session = add_sessions(world, user, 1, turns=2)[0]

    def more_turns():
        Turn.objects.bulk_create([Turn(session=session, index=k, prompt=[], prompt_prefix_len=k, completion="x")
                                  for k in range(2, 20)])

    assert_flat(user_client, session.get_absolute_url(), more_turns, django_assert_max_num_queries)
    other = add_sessions(world, user, 1, turns=2)[0]

    def more_turns_other():
        Turn.objects.bulk_create([Turn(session=other, index=k, prompt=[], prompt_prefix_len=k, completion="x")
                                  for k in range(2, 20)])

    assert_flat(user_client, other.get_absolute_url(), more_turns_other, django_assert_max_num_queries,
                params={"after": "0"}, htmx=True)


def test_api_session_lists_queries_do_not_grow(user_client, user, world, django_assert_max_num_queries):
    add_sessions(world, user, 2, turns=2)
    response = assert_flat(user_client, "/api/sessions/", lambda: add_sessions(world, user, 18),
                           django_assert_max_num_queries, params={"q": "rows"})
    assert len(response.json()["results"]) == 20
    session = AgentSession.objects.first()

    def more_turns():
        Turn.objects.bulk_create([Turn(session=session, index=k, prompt=[], completion="x") for k in range(2, 20)])

    for url in (f"/api/sessions/{session.pk}/", f"/api/sessions/{session.pk}/turns/"):
        Turn.objects.filter(session=session, index__gte=2).delete()
        assert_flat(user_client, url, more_turns, django_assert_max_num_queries)


# --- databases, datasets, runs, labels, queues, exemplars ------------------------------------------------------


def add_runs(database, n: int, *, dataset=None, labelled_by=None, with_sessions: bool = False, user=None):
    """``n`` runs of a 3-question dataset (created once), each with 3 failed items; labels by ``labelled_by``."""
    from annotations.labels.models import Label
    from annotations.labels.selectors import default_taxonomy_version
    from annotations.runs.models import Dataset, DatasetQuestion, Run, RunItem

    if dataset is None:
        dataset = Dataset.objects.get_or_create(name="ds", defaults={"kind": "spider", "source_path": "x"})[0]
    if not dataset.questions.exists():
        DatasetQuestion.objects.bulk_create([
            DatasetQuestion(dataset=dataset, index=i, db_id="shop", database=database, question=f"q{i}",
                            gold_sql="SELECT 1", difficulty="easy", table_count=1, join_count=0) for i in range(3)])
    version = default_taxonomy_version()
    category = version.categories.first()
    runs = []
    for _ in range(n):
        run = Run.objects.create(name="r", dataset=dataset, source="agent" if with_sessions else "imported",
                                 status="done", totals={"ex": 0.0, "questions": 3, "scored": 3, "correct": 0})
        sessions = add_sessions(database, user, 3) if with_sessions else [None] * 3
        items = RunItem.objects.bulk_create([
            RunItem(run=run, question=q, predicted_sql="SELECT 2", eval_status="ok", ex=False, session=s)
            for q, s in zip(dataset.questions.order_by("index"), sessions, strict=True)])
        if labelled_by is not None:
            Label.objects.bulk_create([Label(item=i, category=category, taxonomy_version=version,
                                             annotator=labelled_by) for i in items])
        runs.append(run)
    return runs


def test_databases_lists_queries_do_not_grow(staff_client, world, make_sqlite, django_assert_max_num_queries):
    from agent import services as agent_services

    def grow():
        for i in range(18):
            agent_services.database_register(name=f"db{i}", location=str(make_sqlite(SQLITE, f"db{i}.sqlite")),
                                             refresh="none")

    counter = iter(range(100))
    for url in (reverse("database_list"), "/api/databases/"):
        assert_flat(staff_client, url, grow if next(counter) == 0 else lambda: None, django_assert_max_num_queries)


def test_dataset_pages_queries_do_not_grow(user_client, user, world, django_assert_max_num_queries):
    from annotations.runs.models import Dataset

    add_runs(world, 2, with_sessions=True, user=user)
    dataset = Dataset.objects.get()
    assert_flat(user_client, dataset.get_absolute_url(), lambda: add_runs(world, 18, with_sessions=True, user=user),
                django_assert_max_num_queries)

    def more_datasets():
        for i in range(18):
            add_runs(world, 1, dataset=Dataset.objects.create(name=f"ds{i}", kind="spider", source_path="x"))

    assert_flat(user_client, reverse("runs:dataset_list"), more_datasets, django_assert_max_num_queries)


def test_runs_pages_queries_do_not_grow(user_client, user, world, django_assert_max_num_queries):
    from annotations.runs.models import DatasetQuestion, RunItem

    run = add_runs(world, 2, with_sessions=True, user=user)[0]
    assert_flat(user_client, reverse("runs:run_list"), lambda: add_runs(world, 18, user=user),
                django_assert_max_num_queries)

    def more_items():
        questions = DatasetQuestion.objects.bulk_create([
            DatasetQuestion(dataset=run.dataset, index=i, db_id="shop", database=world, question=f"q{i}",
                            gold_sql="SELECT 1") for i in range(3, 21)])
        RunItem.objects.bulk_create([RunItem(run=run, question=q, predicted_sql="SELECT 2", ex=False)
                                     for q in questions])

    assert_flat(user_client, run.get_absolute_url(), more_items, django_assert_max_num_queries)


def test_labels_pages_queries_do_not_grow(user_client, user, world, django_assert_max_num_queries):
    from annotations.labels.models import Queue
    from annotations.labels.selectors import default_taxonomy_version

    runs = add_runs(world, 2, labelled_by=user)
    assert_flat(user_client, reverse("labels:overview"), lambda: add_runs(world, 18, labelled_by=user),
                django_assert_max_num_queries)
    assert_flat(user_client, "/api/labels/", lambda: add_runs(world, 5, labelled_by=user),
                django_assert_max_num_queries)
    version = default_taxonomy_version()

    def queues(n):
        for run in add_runs(world, n, labelled_by=user) if n > 2 else runs:
            Queue.objects.create(name="q", run=run, taxonomy_version=version, db_id="shop")

    queues(2)
    assert_flat(user_client, reverse("labels:queue_list"), lambda: queues(18), django_assert_max_num_queries)
    assert_flat(user_client, reverse("labels:questions", args=[runs[0].pk]), lambda: None,
                django_assert_max_num_queries)


def test_label_lists_queries_do_not_grow_with_blind_queues(user_client, user, world, django_assert_max_num_queries):
    """Blind queues hide other annotators' labels on every label list: one query finds their items, not one per
    queue."""
    from django.contrib.auth.models import Group

    from annotations import policies
    from annotations.labels.models import Queue
    from annotations.labels.selectors import default_taxonomy_version

    user.groups.remove(Group.objects.get(name=CURATOR))  # an annotator who may not adjudicate: labels are hidden
    user = type(user).objects.get(pk=user.pk)
    assert policies.can_label(user) and not policies.can_adjudicate(user)
    version = default_taxonomy_version()

    def blind_queues(n):
        for run in add_runs(world, n, labelled_by=user):
            Queue.objects.create(name="q", run=run, taxonomy_version=version, max_annotators=2, blind=True)

    blind_queues(2)
    for url in ("/api/labels/", reverse("labels:overview")):
        assert_flat(user_client, url, lambda: blind_queues(9), django_assert_max_num_queries)


def test_queue_page_is_paged_and_its_queries_do_not_grow(user_client, user, world, django_assert_max_num_queries):
    from annotations.labels.models import Label, Queue
    from annotations.labels.selectors import default_taxonomy_version
    from annotations.runs.models import DatasetQuestion, RunItem

    run = add_runs(world, 1, labelled_by=user)[0]
    version = default_taxonomy_version()
    queue = Queue.objects.create(name="q", run=run, taxonomy_version=version)

    def more_failures(n):
        start = run.dataset.questions.count()
        questions = DatasetQuestion.objects.bulk_create([
            DatasetQuestion(dataset=run.dataset, index=i, db_id="shop", database=world, question=f"q{i}",
                            gold_sql="SELECT 1") for i in range(start, start + n)])
        items = RunItem.objects.bulk_create([RunItem(run=run, question=q, predicted_sql="SELECT 2", ex=False)
                                             for q in questions])
        Label.objects.bulk_create([Label(item=i, category=version.categories.first(), taxonomy_version=version,
                                         annotator=user) for i in items])

    assert_flat(user_client, queue.get_absolute_url(), lambda: more_failures(117), django_assert_max_num_queries)
    first = user_client.get(queue.get_absolute_url()).content.decode()
    second = user_client.get(queue.get_absolute_url(), {"page": 2}).content.decode()
    assert first.count("/labels/items/") == 100 and second.count("/labels/items/") == 20  # 120 failures
    assert "page 1 of 2 (120)" in first and "page=2" in first


def test_exemplar_lists_queries_do_not_grow(user_client, user, world, django_assert_max_num_queries):
    from annotations.models import Exemplar, ExemplarSet

    def exemplars(n):
        for i in range(n):
            Exemplar.objects.create(database=world, question=f"e{i}", final_sql="SELECT 1", author=user)
            ExemplarSet.objects.create(name=f"set-{Exemplar.objects.count()}", created_by=user)

    exemplars(2)
    assert_flat(user_client, reverse("exemplars:exemplar_list"), lambda: exemplars(18), django_assert_max_num_queries)
    assert_flat(user_client, reverse("exemplars:set_list"), lambda: exemplars(18), django_assert_max_num_queries)


def test_api_lists_of_datasets_runs_queues_and_exemplars_queries_do_not_grow(user_client, user, world,
                                                                            django_assert_max_num_queries):
    from annotations.exemplars import services as exemplar_services
    from annotations.labels.models import Queue
    from annotations.labels.selectors import default_taxonomy_version
    from annotations.models import Exemplar, ExemplarSet
    from annotations.runs.models import Dataset

    version = default_taxonomy_version()

    def runs(n):
        for run in add_runs(world, n, labelled_by=user, with_sessions=True, user=user):
            Queue.objects.create(name="q", run=run, taxonomy_version=version)

    runs(2)
    run = Queue.objects.first().run
    for url in ("/api/runs/", "/api/queues/", f"/api/runs/{run.pk}/items/"):
        assert_flat(user_client, url, lambda: runs(9), django_assert_max_num_queries)

    def datasets(n):
        for _ in range(n):
            add_runs(world, 1, dataset=Dataset.objects.create(name=f"ds-{Dataset.objects.count()}", kind="spider",
                                                               source_path="x"))

    assert_flat(user_client, "/api/datasets/", lambda: datasets(18), django_assert_max_num_queries)
    assert_flat(user_client, "/api/datasets/ds/questions/", lambda: None, django_assert_max_num_queries)

    def exemplars(n):
        for _ in range(n):
            number = Exemplar.objects.count()
            exemplar = Exemplar.objects.create(database=world, question=f"e{number}", final_sql="SELECT 1",
                                               author=user, state="approved")
            exemplar_set = ExemplarSet.objects.create(name=f"api-set-{number}", created_by=user)
            exemplar_services.set_publish(exemplar_set=exemplar_set, exemplars=[exemplar], user=user)

    exemplars(2)
    for url in ("/api/exemplars/", "/api/exemplar-sets/", "/api/exemplar-set-versions/"):
        assert_flat(user_client, url, lambda: exemplars(18), django_assert_max_num_queries)


def test_run_page_reads_a_finished_runs_agent_figures_from_the_dataset_pages_cache(user, world):
    from django.core.cache import cache

    from annotations.runs import selectors as run_selectors

    run = add_runs(world, 1, with_sessions=True, user=user)[0]
    for item in run.items.all():
        Turn.objects.bulk_create([Turn(session_id=item.session_id, index=k, prompt=[], completion="x",
                                       prompt_tokens=100 * (k + 1), completion_tokens=10, cost=0.01) for k in range(2)])
    computed = run_selectors.run_agent_figures(run=run)
    assert computed["cases"] == 3 and computed["per_call"]["calls"] == 6
    cache.clear()
    (row,) = run_selectors.dataset_run_table(dataset=run.dataset)
    with CaptureQueriesContext(connection) as queries:
        cached = run_selectors.run_agent_figures(run=run)
    assert cached == row["agent"] == computed and len(queries) == 0


def test_api_runs_and_exemplars_page_by_cursor_through_every_row_once(user_client, user, world):
    from annotations.models import Exemplar
    from annotations.runs.models import Run

    add_runs(world, 5)
    Exemplar.objects.bulk_create([Exemplar(database=world, question=f"e{i}", final_sql="SELECT 1", author=user)
                                  for i in range(5)])
    for url, expected in (("/api/runs/", Run.objects.order_by("-created_at", "-id")),
                          ("/api/exemplars/", Exemplar.objects.order_by("-id"))):
        seen, page = [], f"{url}?page_size=2"
        while page:
            body = user_client.get(page).json()
            assert "count" not in body and len(body["results"]) <= 2  # no COUNT over the whole table
            seen += [row["id"] for row in body["results"]]
            page = body["next"]
        assert seen == list(expected.values_list("pk", flat=True)) and len(seen) >= 5  # (the paper's exemplars too)


def test_ask_page_reads_nothing_twice(user_client, user, world):
    """The Ask page ran 15 queries, four of them twice over (the few-shot choices and the database select, each
    read once per look; the LLM endpoint, by the view and again by the context processor; the start database, one
    query per rule): each is read once now."""
    from agent.models import Database

    add_sessions(world, user, 3)
    Database.objects.filter(pk=world.pk).update(status=Database.Status.READY)  # offered by the select
    with CaptureQueriesContext(connection) as queries:
        page = user_client.get(reverse("ask"))
    assert page.status_code == 200 and '<option value="shop" selected>' in page.content.decode()
    statements = [q["sql"] for q in queries.captured_queries]
    assert len(statements) == len(set(statements)), [s for s in statements if statements.count(s) > 1]
    databases = [s for s in statements if re.match(r'(DECLARE .*? FOR )?SELECT (?:(?! FROM ).)* FROM "agent_database"', s)]
    # the start database, the select (a cursor on PostgreSQL), and the exemplar sets' grant rule: the names of
    # the databases the user sees and of those hidden from them (a version drawing on one is not offered)
    assert len(databases) == 4, databases
    assert len(statements) <= 15  # with the default daily budget (its limits and today's use) and the BIRD-set check
