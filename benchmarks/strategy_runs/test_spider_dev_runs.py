"""Each paper strategy over 20 Spider dev questions (concert_singer) with the replay LLM server, the dataset as
its own example pool: every call and query stored, calls/tokens/cost per question on the run page, no question
retrieving its own gold pair. Needs ../shared/data/spider_dev; slow (index build, a 1034-pair pool), so it is a
benchmark rather than part of ``make test``: ``make bench-strategies``."""

from __future__ import annotations

import sqlite3

import pytest

from agent.metrics import result_type
from agent.models import AgentSession, LLMEndpoint, Turn
from agent.strategies.hdsp import answer_text_type
from annotations.runs import services
from annotations.runs.models import Run
from annotations.runs.pools import question_key
from tests.annotations.runs.test_strategy_runs import check_every_call_and_query_is_stored, drive

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]


@pytest.mark.parametrize("strategy", ["dart_sql", "scl_sql", "hdsp"])
def test_each_strategy_over_20_spider_dev_questions_stores_every_call_and_query(spider_dev, replay_llm, user_client,
                                                                               strategy) -> None:
    """The real Spider dev data (skipped without ../shared): 20 concert_singer questions, the dataset as its own
    example pool."""
    from agent import services as agent_services
    from agent.models import Database

    database = Database.objects.get(name="concert_singer")
    agent_services.database_refresh(database=database)
    questions = list(spider_dev.questions.filter(db_id="concert_singer").order_by("index")[:20])
    script = []
    extended = 0
    for q in questions:
        gold = q.gold_sql
        if strategy == "dart_sql":  # rewrite, preliminary, generate, judge
            script += [q.question, gold, gold, "Yes"]
        elif strategy == "scl_sql":  # linking, one loop that passes
            # The execution check fails an empty result and loops again (two of these golds are empty): answer
            # those with a query that returns rows, so every question takes the one scripted loop.
            with sqlite3.connect(database.location) as conn:
                empty = not conn.execute(gold).fetchall()
            answer = "SELECT name FROM stadium" if empty else gold
            script += ["singer.name\nconcert.concert_name", f"```sql\n{answer}\n```", "Yes"]
        else:  # A' of the gold result's type (else the extended prompt runs too) and the 8-step answer
            with sqlite3.connect(database.location) as conn:
                cursor = conn.execute(gold)
                kind = result_type([d[0] for d in cursor.description], cursor.fetchall())
            direct = {"number": "3", "text": "Adele", "date": "2019-01-01", "list": "a\nb", "record": "a: 1\nb: 2",
                      "empty": "none, none"}.get(kind, "3")
            script += [direct, f"Step 8: the query.\n```sql\n{gold}\n```"]
            if answer_text_type(direct) != kind:
                script.append(f"```sql\n{gold}\n```")
                extended += 1
    server = replay_llm(script)
    LLMEndpoint.objects.create(name="priced", base_url=server.url, model="replay-model",
                               input_price_per_mtok=1.0, output_price_per_mtok=2.0, is_default=True)
    run = services.run_create_agent(dataset=spider_dev, name=strategy, strategy=strategy, db_ids=["concert_singer"],
                                    limit=20, pool="spider-dev" if strategy != "hdsp" else None)
    drive(run)
    tables = len(Database.objects.get(name="concert_singer").schema_info().tables)
    calls, queries = {"dart_sql": (4, tables + 1), "scl_sql": (3, 1), "hdsp": (None, None)}[strategy]
    if strategy == "hdsp":  # the extended prompt runs for the questions whose A' type differs from the result's
        for item in run.items.select_related("session"):
            kinds = list(Turn.objects.filter(session=item.session).values_list("kind", flat=True))
            assert item.session.status == AgentSession.Status.ANSWERED
            assert item.session.rounds == 2 + kinds.count("extended")
            assert item.session.tool_calls == 1 + kinds.count("extended")
        assert Turn.objects.filter(session__in=[i.session for i in run.items.all()], kind="extended").count() == extended
        assert server.remaining() == 0
    else:
        check_every_call_and_query_is_stored(run, calls_per_question=calls, queries_per_question=queries,
                                             user_client=user_client)
        kind = "select" if strategy == "dart_sql" else "retrieve"
        by_key = {question_key(q): q for q in spider_dev.questions.all()}
        own_database = spider_dev.questions.filter(db_id="concert_singer").count()
        for item in run.items.select_related("question", "session"):
            turn = Turn.objects.get(session=item.session, kind=kind)
            chosen = [by_key[e["key"]] for e in turn.extra["examples" if strategy == "dart_sql" else "positives"]]
            # Cross-database: nothing of concert_singer, nor any pair with this question's gold query.
            assert chosen and all(q.db_id != "concert_singer" for q in chosen)
            assert all(q.gold_sql.strip().lower() != item.question.gold_sql.strip().lower() for q in chosen)
            assert turn.extra["left_out"] >= own_database
    assert run.status == Run.Status.DONE
