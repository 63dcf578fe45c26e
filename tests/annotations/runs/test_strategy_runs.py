"""Runs of the paper strategies over a small Spider-layout dataset built here (no ../shared needed), with the
replay LLM server: every LLM call and every query is a stored turn, the run page shows calls, tokens and cost
per question, and a run whose example pool is the dataset itself never retrieves a question's own gold pair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command

from agent.models import AgentSession, DatabaseGrant, LLMEndpoint, Turn
from agent.services import sessions
from annotations.runs import selectors, services
from annotations.runs.models import Run
from annotations.runs.pools import question_key
from tests.agent.strategies.tool_double import build_school_db
from tests.conftest import group_of_testers


def drive(run):
    """What the dispatcher and the workers do, in this process, one session at a time in question order
    (the replay script is one sequence of completions)."""
    while services.run_dispatch(run=run):
        for pk in AgentSession.objects.filter(status="queued").order_by("pk").values_list("pk", flat=True):
            sessions.session_execute(session_id=pk)
    run.refresh_from_db()
    if run.status == Run.Status.EVALUATING:  # what the evaluation task does
        services.run_evaluate(run=run)
        run.refresh_from_db()

pytestmark = pytest.mark.django_db

QUESTIONS = [
    ("How many singers are there?", "SELECT count(*) FROM singer"),
    ("How many concerts are there?", "SELECT count(*) FROM concert"),
    ("How many singers are from the UK?", "SELECT count(*) FROM singer WHERE country = 'UK'"),
    ("How many concerts were held in 2017?", "SELECT count(*) FROM concert WHERE year = 2017"),
    ("How many concerts did Adele give?",
     "SELECT count(*) FROM concert AS T1 JOIN singer AS T2 ON T1.singer_id = T2.singer_id WHERE T2.name = 'Adele'"),
    ("What is the number of enrollments?", "SELECT count(*) FROM enrollment"),
    ("How many grades are recorded?", "SELECT count(*) FROM grade"),
    ("What is the average score?", "SELECT avg(score) FROM grade"),
    ("What is the highest score?", "SELECT max(score) FROM grade"),
    ("What is the lowest score?", "SELECT min(score) FROM grade"),
    ("How many different countries do singers come from?", "SELECT count(DISTINCT country) FROM singer"),
    ("In how many different years were concerts held?", "SELECT count(DISTINCT year) FROM concert"),
    ("What is the latest concert year?", "SELECT max(year) FROM concert"),
    ("What is the earliest concert year?", "SELECT min(year) FROM concert"),
    ("How many students are enrolled in course 100?", "SELECT count(*) FROM enrollment WHERE course_id = 100"),
    ("How many courses does student 1 take?", "SELECT count(*) FROM enrollment WHERE student_id = 1"),
    ("What is the total of all scores?", "SELECT sum(score) FROM grade"),
    ("How many singers are from Colombia?", "SELECT count(*) FROM singer WHERE country = 'Colombia'"),
    # The same text twice with different gold queries, on the same database: a duplicate is never retrieved.
    ("How many singers are there?", "SELECT count(singer_id) FROM singer"),
    ("How many concerts were held after 2016?", "SELECT count(*) FROM concert WHERE year > 2016"),
]
ANSWER = "SELECT count(*) FROM singer"
DB_IDS = ("school", "college")


@pytest.fixture
def school_dataset(tmp_path: Path):
    root = tmp_path / "tiny_spider"
    for db_id in DB_IDS:  # two databases (the same school schema), so a cross-database pool has examples
        (root / "database" / db_id).mkdir(parents=True)
        build_school_db(root / "database" / db_id / f"{db_id}.sqlite")
    (root / "dev.json").write_text(json.dumps([{"db_id": DB_IDS[i % 2], "question": q, "query": s}
                                               for i, (q, s) in enumerate(QUESTIONS)]))
    dataset = services.dataset_import(kind="spider", path=root, name="tiny-dev", build_indexes=True)
    for database_id in set(dataset.questions.exclude(database=None).values_list("database_id", flat=True)):
        DatabaseGrant.objects.get_or_create(database_id=database_id, group=group_of_testers())  # user_client's
    LLMEndpoint.objects.create(name="priced", base_url="http://127.0.0.1:9/v1", model="replay-model",
                               input_price_per_mtok=1.0, output_price_per_mtok=2.0, is_default=True)
    return dataset


def point_endpoint_at(server) -> None:
    LLMEndpoint.objects.filter(name="priced").update(base_url=server.url)


def check_every_call_and_query_is_stored(run: Run, *, calls_per_question: int, queries_per_question: int,
                                         user_client) -> None:
    items = list(run.items.select_related("session", "question"))
    assert len(items) == 20 and all(i.session is not None for i in items)
    for item in items:
        session = item.session
        turns = list(Turn.objects.filter(session=session).order_by("index"))
        llm_turns = [t for t in turns if t.completion is not None]
        query_turns = [t for t in turns if t.tool == "ExecuteSQL"]
        assert session.status == AgentSession.Status.ANSWERED, [(t.kind, t.completion, t.error) for t in turns]
        assert len(llm_turns) == calls_per_question == session.rounds
        assert len(query_turns) == queries_per_question
        assert all(t.sql and t.tool_latency_ms is not None for t in query_turns)
        assert session.prompt_tokens == sum(t.prompt_tokens for t in turns) > 0
        assert session.cost is not None and session.cost > 0
    page = user_client.get(run.get_absolute_url()).content.decode()
    assert page.count('class="small item-calls"') == 20
    first = items[0].session
    assert f"{first.prompt_tokens:,} + {first.completion_tokens:,}" in page and f"${first.cost:.4f}" in page
    # Table 8 both ways: per case (rounds, calls, cost) and per LLM call (tokens, cost).
    agent = selectors.run_summary(run=run)["agent"]
    calls = len(items) * calls_per_question
    assert agent["calls"] == calls_per_question and agent["per_call"]["calls"] == calls
    assert agent["per_call"]["prompt"] == pytest.approx(sum(i.session.prompt_tokens for i in items) / calls)
    assert agent["per_call"]["cost"] == pytest.approx(sum(i.session.cost for i in items) / calls)
    assert 'id="table-8"' in page and f"Per LLM call ({calls})" in page and f"Per case ({len(items)})" in page


def test_dart_sql_run_with_its_own_dataset_as_pool_never_retrieves_from_the_questions_database(
        school_dataset, replay_llm, user_client) -> None:
    # Per question: rewrite (returns the question), preliminary query, generation, judge.
    script = []
    for q, _sql in QUESTIONS:
        script += [q, ANSWER.removeprefix("SELECT "), ANSWER.removeprefix("SELECT "), "Yes"]
    server = replay_llm(script)
    point_endpoint_at(server)
    call_command("run", "--dataset", "tiny-dev", "--strategy", "dart_sql", "--pool", "tiny-dev", "--name", "dart")
    run = Run.objects.get(name="dart")
    pool = run.config["example_pool"]
    assert pool["source"] == "dataset tiny-dev" and pool["size"] == 20 and pool["rule"] == "cross-database"
    drive(run)
    check_every_call_and_query_is_stored(run, calls_per_question=4, queries_per_question=4 + 1,
                                         user_client=user_client)
    by_key = {question_key(q): q for q in school_dataset.questions.all()}
    for item in run.items.select_related("question", "session"):
        own = item.question
        assert item.session.config["pool_exclusion"]["rule"] == "cross-database"
        select = Turn.objects.get(session=item.session, kind="select")
        chosen = [by_key[e["key"]] for e in select.extra["examples"]]
        assert len(chosen) == 5 and all(q.db_id != own.db_id for q in chosen)
        assert all(q.gold_sql.lower() != own.gold_sql.lower() and q.question != own.question for q in chosen)
        # The pool held 10 questions of the other database, less any duplicate of this question or its gold.
        others = [q for q in by_key.values() if q.db_id != own.db_id]
        duplicates = sum(q.gold_sql.lower() == own.gold_sql.lower() or q.question == own.question for q in others)
        assert select.extra["pool_size"] == 10 - duplicates and select.extra["left_out"] == 10 + duplicates
        assert f"({10 + duplicates} left out: no example of the question's own database" in select.observation
        generate = Turn.objects.get(session=item.session, kind="generate")
        prompt = generate.prompt[0]["content"]
        assert f"/* Answer the following: {own.question} */\n{own.gold_sql}\n" not in prompt
    # The session page shows each call's exact prompt, the judge's whole conversation included.
    session = run.items.first().session
    page = user_client.get(session.get_absolute_url()).content.decode()
    assert page.count('class="turn-prompt"') == 4
    assert "/*Here is the input:*/" in page and "Judge whether the results are correct" in page
    assert "<strong>assistant</strong>" in page and "<strong>completion</strong>" in page
    # The run page says which rule applied and how many examples the pool held.
    page = user_client.get(run.get_absolute_url()).content.decode()
    assert "Example pool: dataset tiny-dev (20 question-SQL pairs)" in page
    assert 'id="run-pool-rule">cross-database</strong>' in page and "own database" in page
    assert server.remaining() == 0


def test_hdsp_run_stores_every_call_and_query(school_dataset, replay_llm, user_client) -> None:
    script = []
    for _q, _sql in QUESTIONS:
        script += ["3", f"Step 1: ...\n```sql\n{ANSWER}\n```"]  # A' (a number) and the 8-step answer
    server = replay_llm(script)
    point_endpoint_at(server)
    run = services.run_create_agent(dataset=school_dataset, name="hdsp", strategy="hdsp")
    drive(run)
    check_every_call_and_query_is_stored(run, calls_per_question=2, queries_per_question=1, user_client=user_client)
    assert server.remaining() == 0


def test_scl_sql_run_stores_every_call_and_query(school_dataset, replay_llm, user_client) -> None:
    script = []
    for _q, _sql in QUESTIONS:
        # LLM schema linking (the paper's), one loop that passes verification.
        script += ["singer.name\nsinger.country", f"```sql\n{ANSWER}\n```", "Yes, the count answers it."]
    server = replay_llm(script)
    point_endpoint_at(server)
    run = services.run_create_agent(dataset=school_dataset, name="scl", strategy="scl_sql", pool="tiny-dev")
    drive(run)
    check_every_call_and_query_is_stored(run, calls_per_question=3, queries_per_question=1, user_client=user_client)
    for item in run.items.select_related("question", "session"):
        retrieve = Turn.objects.get(session=item.session, kind="retrieve")
        assert question_key(item.question) not in [p["key"] for p in retrieve.extra["positives"]]
    assert server.remaining() == 0

