"""The sessions list as a trace viewer: columns, filters, sorts, keyset pages; the session page's cheap live poll;
the API's cursor pages and turns."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.urls import reverse

from agent import selectors
from agent.models import AgentSession, Turn
from tests.conftest import group_of_testers as team
from tests.conftest import only_on_postgres_app_database

pytestmark = pytest.mark.django_db

SQLITE = "CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1);"


@pytest.fixture
def shop(make_sqlite, grant):
    from agent import services

    database = services.database_register(name="shop", location=str(make_sqlite(SQLITE, "shop.sqlite")),
                                          refresh="none")
    return grant(database, team())


def make_sessions(database, user, n: int, **fields) -> list[AgentSession]:
    """Sessions with varied figures: equal values (ties broken by id) and missing cost/latency (NULLs last)."""
    rows = []
    for i in range(n):
        values = {"question": f"Question number {i}", "strategy": "dart_sql" if i % 4 == 0 else "interactive_t2s",
                  "model": "big-model" if i % 5 == 0 else "small-model", "status": "answered" if i % 2 else "failed",
                  "rounds": i % 3, "prompt_tokens": (i * 7) % 11, "completion_tokens": i % 2,
                  "cost": None if i % 4 == 1 else round((i % 5) * 0.01, 2),
                  "elapsed_ms": None if i % 6 == 2 else float(i % 7), "created_by": user, **fields}
        rows.append(AgentSession(database=database, **values))
    return AgentSession.objects.bulk_create(rows)


def expected_order(sessions, sort: str) -> list[int]:
    """The order a sort promises: by the value (NULLs last either way), then by id in the same direction."""
    key = sort.lstrip("-")
    descending = sort.startswith("-")
    value = {"created": lambda s: (s.created_at, s.pk), "rounds": lambda s: s.rounds,
             "tokens": lambda s: s.prompt_tokens + s.completion_tokens, "cost": lambda s: s.cost,
             "latency": lambda s: s.elapsed_ms}[key]
    present = [s for s in sessions if value(s) is not None]
    missing = [s for s in sessions if value(s) is None]
    present.sort(key=lambda s: (value(s), s.pk), reverse=descending)
    missing.sort(key=lambda s: s.pk, reverse=descending)
    return [s.pk for s in present + missing]


@pytest.mark.parametrize("sort", list(selectors.SESSION_SORTS))
def test_keyset_pages_walk_every_session_once_forwards_and_back(user, shop, sort):
    sessions = make_sessions(shop, user, 23)
    sessions = list(AgentSession.objects.filter(pk__in=[s.pk for s in sessions]))
    qs = selectors.session_list(viewer=user)
    pages, cursor = [], None
    while True:
        page = selectors.session_page(qs, sort=sort, cursor=cursor, size=5)
        pages.append(page)
        if not page.has_next:
            break
        cursor = page.next_cursor
    assert [s.pk for p in pages for s in p.object_list] == expected_order(sessions, sort)
    assert pages[0].count == 23 and not pages[0].has_previous and len(pages) == 5
    # back from the last page to the first, page by page, the same pages
    cursor = pages[-1].previous_cursor
    for expected in reversed(pages[:-1]):
        page = selectors.session_page(qs, sort=sort, cursor=cursor, size=5)
        assert [s.pk for s in page.object_list] == [s.pk for s in expected.object_list]
        cursor = page.previous_cursor
    assert cursor is None


def test_a_malformed_cursor_gives_the_first_page(user_client, user, shop):
    make_sessions(shop, user, 3)
    response = user_client.get(reverse("session_list"), {"cursor": "not-a-cursor!!"})
    assert response.status_code == 200 and response.content.decode().count("Question number") == 3


def test_list_shows_the_trace_columns_and_filters_by_status_strategy_model_and_question(user_client, user, shop):
    make_sessions(shop, user, 10)
    page = user_client.get(reverse("session_list")).content.decode()
    for header in ("Model", "Strategy", "Status", "Rounds", "Tokens", "Cost", "Latency"):
        assert f">{header}" in page
    assert "big-model" in page and "$0.0400" in page and "6 ms" in page

    def shown(**params) -> set[str]:
        html = user_client.get(reverse("session_list"), params).content.decode()
        return set(re.findall(r"Question number (\d+)", html))

    assert shown(strategy="dart_sql") == {"0", "4", "8"}
    assert shown(model="big-model") == {"0", "5"}
    assert shown(status="failed", strategy="dart_sql") == {"0", "4", "8"}
    assert shown(q="NUMBER 7") == {"7"}
    assert shown(database="shop", status="answered") == {"1", "3", "5", "7", "9"}


def test_sort_links_toggle_direction_and_keep_filters(user_client, user, shop):
    make_sessions(shop, user, 4)
    html = user_client.get(reverse("session_list"), {"status": "answered", "sort": "-cost"}).content.decode()
    assert re.search(r"status=answered&(amp;)?sort=cost\"", html)  # clicked again: smallest first
    assert re.search(r"status=answered&(amp;)?sort=-rounds\"", html)


def test_session_model_is_recorded_from_the_config(user, make_sqlite, grant, replay_llm):
    from agent import services
    from agent.services import sessions

    replay_llm(["Thought: x\nAction: Done"])
    ready = grant(services.database_register(name="ready", location=str(make_sqlite(SQLITE, "ready.sqlite")),
                                             refresh="sync"), team())
    session = sessions.session_create(database=ready, question="q?", user=user, enqueue=False)
    assert session.model == "replay-model" == session.config["llm"]["model"]


def test_live_poll_returns_only_new_turns_with_their_exact_prompts(user_client, user, shop):
    # a zero-shot snapshot, as session_create writes it (a config without one hides the prompt: its source is unknown)
    session = make_sessions(shop, user, 1, status="running", config={"few_shot": None})[0]
    system = {"role": "system", "content": "You are the agent. SYSTEM-PROMPT-TEXT"}
    Turn.objects.create(session=session, index=0, prompt=[system, {"role": "user", "content": "Q0"}],
                        completion="Thought: first\nAction: SearchColumn(['a'])", thought="first")
    page = user_client.get(session.get_absolute_url()).content.decode()
    assert f'hx-get="/sessions/{session.pk}/?after=0"' in page and "SYSTEM-PROMPT-TEXT" in page

    Turn.objects.create(session=session, index=1, prompt_prefix_len=2,
                        prompt=[{"role": "assistant", "content": "A1"}, {"role": "user", "content": "Observation 1"}],
                        completion="Thought: second\nAction: Done", thought="second")
    poll = user_client.get(session.get_absolute_url(), {"after": "0"}, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="turn-1"' in poll and 'id="turn-0"' not in poll  # only the new turn
    assert "SYSTEM-PROMPT-TEXT" in poll and "Observation 1" in poll  # its exact prompt, rebuilt from the chain
    assert 'hx-swap-oob="beforeend:#session-turns"' in poll and "?after=1" in poll
    quiet = user_client.get(session.get_absolute_url(), {"after": "1"}, HTTP_HX_REQUEST="true").content.decode()
    assert "turn-" not in quiet and "?after=1" in quiet and "SYSTEM-PROMPT-TEXT" not in quiet

    AgentSession.objects.filter(pk=session.pk).update(status="answered", final_sql="SELECT 1")
    done = user_client.get(session.get_absolute_url(), {"after": "1"}, HTTP_HX_REQUEST="true").content.decode()
    assert "every 1s" not in done and "Answered" in done and "SELECT 1" in done


def test_api_lists_sessions_by_cursor_and_turns_after_an_index(user_client, user, shop):
    sessions = make_sessions(shop, user, 7)
    seen, url = [], "/api/sessions/?page_size=3&strategy=interactive_t2s"
    while url:
        body = user_client.get(url).json()
        seen += [s["id"] for s in body["results"]]
        url = body["next"]
    wanted = sorted((s for s in sessions if s.strategy == "interactive_t2s"), key=lambda s: s.pk, reverse=True)
    assert seen == [s.pk for s in wanted]
    assert [s["id"] for s in user_client.get("/api/sessions/", {"model": "big-model"}).json()["results"]] == \
        [sessions[5].pk, sessions[0].pk]

    session = sessions[0]
    Turn.objects.bulk_create([Turn(session=session, index=k, completion=f"c{k}") for k in range(5)])
    body = user_client.get(f"/api/sessions/{session.pk}/turns/", {"after": 2}).json()
    assert [t["index"] for t in body["results"]] == [3, 4] and body["results"][0]["completion"] == "c3"
    assert user_client.get(f"/api/sessions/{session.pk}/").json()["turns"][0]["index"] == 0


def test_question_filter_has_a_trigram_index_on_postgresql(user, shop):
    only_on_postgres_app_database("the trigram index is PostgreSQL's; SQLite filters by a scan")
    make_sessions(shop, user, 5)
    qs = selectors.session_list(viewer=user, q="number 3")
    with connection.cursor() as cursor:
        # the filter session_list applies, alone: on 5 rows the planner would rather scan, so plain scans are off
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")
        sql, params = (AgentSession.objects.filter(question__icontains="number 3").order_by().only("id")
                       .query.sql_with_params())
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "session_question_trgm_idx" in plan
    assert [s.question for s in qs] == ["Question number 3"]
