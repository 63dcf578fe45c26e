"""DART-SQL end to end over real HTTP (replay server -> LLMClient -> strategy -> tools -> turns)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

import pytest

from agent.llm import LLMClient, LLMSettings
from agent.sql import QueryResult
from agent.strategies import STRATEGIES, SessionContext, Status, TurnRecord, create_strategy
from agent.strategies.dart_sql import (
    SUBSTITUTIONS,
    DartSQL,
    DartSQLConfig,
    column_in_error,
    forbidden_keywords,
    parse_rewrite,
    select_rows,
    tables_with_column,
)
from tests.support.replay_server import ReplayServer

from .tool_double import ToolDouble

QUESTION = "How many concerts did adele give?"
REWRITTEN = "How many concerts did the singer named 'Adele' give?"
GOOD_SQL = ("SELECT COUNT(*) FROM concert JOIN singer ON concert.singer_id = singer.singer_id "
            "WHERE singer.name = 'Adele'")


def sql_block(sql: str, before: str = "") -> str:
    return f"{before}```sql\n{sql}\n```"


def stored_copy(turn: TurnRecord) -> TurnRecord:
    """A turn as the session layer stores and reloads it (through JSON)."""
    return TurnRecord.from_dict(json.loads(json.dumps(turn.to_dict())))


def client_for(server: ReplayServer) -> LLMClient:
    return LLMClient(LLMSettings(base_url=server.url, api_key="k", model="replay-model", timeout_s=5.0,
                                 backoff_base_s=0.001, backoff_max_s=0.005, max_retries=0))


def run(server: ReplayServer, tools: ToolDouble, *, config: DartSQLConfig | None = None,
        previous: Sequence[TurnRecord] = (), question: str = QUESTION, cancel=lambda: False):
    stored: list[TurnRecord] = []
    ctx = SessionContext(question=question, schema=tools.schema)
    outcome = DartSQL(config).run(ctx, tools=tools, llm=client_for(server), on_turn=stored.append,
                                  previous_turns=previous, should_cancel=cancel)
    return outcome, stored


def test_rewritten_question_is_stored_and_used_downstream(tools: ToolDouble) -> None:
    script = [REWRITTEN, sql_block(GOOD_SQL), "Yes. One count, as asked."]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools)
        requests = server.chat_requests()

    assert [t.kind for t in turns] == ["rewrite", "generate", "refine"]
    assert turns[0].extra == {"original_question": QUESTION, "rewritten_question": REWRITTEN}
    # The rewriting step saw the first rows of every table.
    rewrite_prompt = requests[0].messages[1]["content"]
    assert "Table singer (singer_id, name, country):\n(1, 'Adele', 'UK')" in rewrite_prompt
    assert "Table grade" in rewrite_prompt and rewrite_prompt.endswith("Rewrite the question above.")
    # The generation prompt answers the rewritten question, with schema and example rows.
    generate_prompt = requests[1].messages[1]["content"]
    assert f"/* Answer the following: {REWRITTEN} */" in generate_prompt
    assert QUESTION not in generate_prompt
    assert "CREATE TABLE concert (" in generate_prompt
    assert "INSERT INTO singer (singer_id, name, country) VALUES\n(1, 'Adele', 'UK')" in generate_prompt
    assert "Never use LEFT JOIN and never use SELECT *." in requests[1].messages[0]["content"]
    assert turns[1].extra == {"question": REWRITTEN}
    assert turns[1].sql == GOOD_SQL and turns[1].tool_ok and turns[1].result.rows == [(2,)]
    # The judge saw the initial prompt, the query and its result, and accepted it.
    judge = requests[2].messages
    assert judge[:2] == requests[1].messages
    assert judge[2] == {"role": "assistant", "content": sql_block(GOOD_SQL)}
    assert "Here are the execution results:\nColumns: COUNT(*) (total 1 rows)\n(2)" in judge[3]["content"]
    assert turns[2].extra["accepted"] is True and turns[2].sql is None
    assert requests[0].params["temperature"] == 0.0

    assert outcome.status == Status.ANSWERED
    assert outcome.final_sql == GOOD_SQL and outcome.result.rows == [(2,)]
    assert outcome.totals.rounds == 3


def test_column_error_triggers_refinement_with_the_tables_that_have_the_column(tools: ToolDouble) -> None:
    fixed = "SELECT year FROM concert WHERE singer_id = 1"
    script = [REWRITTEN, sql_block("SELECT year FROM singer WHERE name = 'Adele'"),
              sql_block(fixed, "The year is in concert.\n"), "Yes, these are her concert years."]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools)
        requests = server.chat_requests()

    assert [t.kind for t in turns] == ["rewrite", "generate", "refine", "refine"]
    assert turns[1].tool_ok is False and "no such column: year" in turns[1].observation
    feedback = requests[2].messages[-1]["content"]
    assert feedback.startswith("Received the following exception: SQL error: no such column: year")
    assert 'In fact, the following 1 table(s) contain column "year": concert.' in feedback
    assert turns[2].extra["feedback"] == "column_error" and turns[2].extra["iteration"] == 1
    assert turns[2].sql == fixed and turns[2].result.rows == [(2016,), (2017,)]
    # Algorithm 1: each refinement sees the initial prompt and only the latest query.
    assert requests[3].messages[:2] == requests[1].messages
    assert requests[3].messages[2]["content"] == sql_block(fixed)
    assert len(requests[3].messages) == 4
    assert outcome.status == Status.ANSWERED and outcome.final_sql == fixed


def test_other_errors_are_sent_back_without_a_column_hint(tools: ToolDouble) -> None:
    script = [REWRITTEN, sql_block("SELECT YEAR(year) FROM concert"), sql_block("SELECT year FROM concert"),
              "Yes"]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools)
        requests = server.chat_requests()
    feedback = requests[2].messages[-1]["content"]
    assert "no such function: YEAR" in feedback and "In fact" not in feedback
    assert turns[2].extra["feedback"] == "error"
    assert outcome.final_sql == "SELECT year FROM concert"


def test_empty_result_triggers_refinement(tools: ToolDouble) -> None:
    empty = "SELECT name FROM singer WHERE country = 'United Kingdom'"
    fixed = "SELECT name FROM singer WHERE country = 'UK'"
    script = [REWRITTEN, sql_block(empty), sql_block(fixed, "Stored as 'UK'.\n"), "Yes"]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools, question="Which singers are from the United Kingdom?")
        requests = server.chat_requests()
    assert turns[1].tool_ok and turns[1].result.total_rows == 0
    assert requests[2].messages[-1]["content"].startswith("The query ran but returned no rows.")
    assert turns[2].extra["feedback"] == "empty"
    assert turns[2].result.rows == [("Adele",), ("Sting",)]
    assert "Here are the execution results" in requests[3].messages[-1]["content"]
    assert outcome.status == Status.ANSWERED and outcome.final_sql == fixed


def test_judge_saying_no_revises_and_forbidden_keywords_are_sent_back(tools: ToolDouble) -> None:
    script = [sql_block("SELECT * FROM singer"),
              sql_block("SELECT name, country FROM singer"),
              "No: the question asks only for names.\n" + sql_block("SELECT name FROM singer"),
              "Yes"]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools, config=DartSQLConfig(rewrite=False, max_refinements=3),
                             question="List the singer names.")
        requests = server.chat_requests()
    assert [t.kind for t in turns] == ["generate", "refine", "refine", "refine"]
    assert requests[1].messages[-1]["content"].startswith("The query uses SELECT *, which is not allowed.")
    assert [t.extra["feedback"] for t in turns[1:]] == ["forbidden", "result", "result"]
    assert turns[2].extra["verdict"] == "no" and turns[2].sql == "SELECT name FROM singer"
    assert turns[3].extra == {"iteration": 3, "feedback": "result", "verdict": "yes", "accepted": True}
    assert outcome.final_sql == "SELECT name FROM singer"


def test_refinement_stops_after_the_cap_and_keeps_the_last_working_query(tools: ToolDouble) -> None:
    script = [sql_block("SELECT name FROM singer"), "No.\n" + sql_block("SELECT nme FROM singer"),
              sql_block("SELECT nam FROM singer"), sql_block("SELECT nm FROM singer")]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools, config=DartSQLConfig(rewrite=False))
        assert server.remaining() == 0
    assert [t.kind for t in turns] == ["generate", "refine", "refine", "refine"]
    assert [t.extra["iteration"] for t in turns[1:]] == [1, 2, 3]
    assert not turns[-1].tool_ok
    assert outcome.status == Status.ANSWERED and outcome.final_sql == "SELECT name FROM singer"


def test_no_query_ever_running_gives_up_with_the_last_query(tools: ToolDouble) -> None:
    script = [sql_block("SELECT nme FROM singer"), "I cannot fix it."]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools, config=DartSQLConfig(rewrite=False))
    assert turns[1].error == "No revised query in the completion."
    assert outcome.status == Status.GAVE_UP and outcome.final_sql == "SELECT nme FROM singer"
    assert outcome.result is None


def test_resume_replays_stored_turns_without_calling_the_llm_again(tools: ToolDouble) -> None:
    fixed = "SELECT year FROM concert WHERE singer_id = 1"
    script = [REWRITTEN, sql_block("SELECT year FROM singer"), sql_block(fixed), "Yes"]
    with ReplayServer(script) as server:
        full, full_turns = run(server, tools)
        full_requests = server.chat_requests()
    with ReplayServer(script[2:]) as server:
        resumed, new_turns = run(server, tools, previous=[stored_copy(t) for t in full_turns[:2]])
        requests = server.chat_requests()
    assert len(requests) == 2
    assert [m for m in requests[0].messages] == full_requests[2].messages
    assert [t.index for t in new_turns] == [2, 3]
    assert resumed.final_sql == full.final_sql == fixed
    assert resumed.totals.rounds == 4


def test_llm_failure_is_a_turn_and_the_resumed_run_retries_it(tools: ToolDouble) -> None:
    with ReplayServer([REWRITTEN, {"fault": "http", "status": 400}]) as server:
        failed, turns = run(server, tools)
    assert failed.status == Status.LLM_ERROR
    assert turns[-1].kind == "generate" and turns[-1].completion is None and turns[-1].error
    with ReplayServer([sql_block(GOOD_SQL), "Yes"]) as server:
        resumed, more = run(server, tools, previous=turns)
    assert [t.index for t in more] == [2, 3] and more[0].kind == "generate"
    assert resumed.status == Status.ANSWERED and resumed.totals.llm_failures == 1


def test_cancel_before_the_next_call(tools: ToolDouble) -> None:
    calls = iter([False, True])
    with ReplayServer([REWRITTEN]) as server:
        outcome, turns = run(server, tools, cancel=lambda: next(calls))
    assert outcome.status == Status.CANCELLED and [t.kind for t in turns] == ["rewrite"]


def test_preview_shows_the_next_prompt(tools: ToolDouble) -> None:
    strategy = DartSQL()
    ctx = SessionContext(question=QUESTION, schema=tools.schema)
    first = strategy.preview_messages(ctx)
    assert first[1].content.endswith("Rewrite the question above.")
    rewrite = TurnRecord(index=0, kind="rewrite", completion=REWRITTEN,
                         extra={"original_question": QUESTION, "rewritten_question": REWRITTEN})
    second = strategy.preview_messages(ctx, [rewrite])
    assert f"/* Answer the following: {REWRITTEN} */" in second[1].content


def test_registry_and_config_round_trip() -> None:
    assert STRATEGIES["dart_sql"] is DartSQL
    config = DartSQLConfig(context_rows=9, forbid_keywords=False)
    strategy = create_strategy("dart_sql", config.to_dict() | {"unknown_key": 1})
    assert strategy.config == config
    defaults = DartSQLConfig()
    assert (defaults.rewrite_rows, defaults.context_rows, defaults.max_refinements, defaults.result_rows) == \
        (5, 15, 3, 15)
    with pytest.raises(ValueError):
        DartSQLConfig(relevant_fraction=2)
    assert "GloVe" in SUBSTITUTIONS


# --- pure helpers ---------------------------------------------------------------------------------


def test_select_rows_takes_relevant_rows_then_seeded_random_ones() -> None:
    rows = [(i, f"city {i}") for i in range(40)] + [(99, "Springfield"), (100, "Springfield Gardens")]
    result = QueryResult(columns=("id", "name"), rows=rows, total_rows=len(rows))
    chosen, relevant = select_rows(result, "Who lives in Springfield?", n=15, relevant_fraction=0.5,
                                   rng=random.Random("0:t"))
    assert len(chosen) == 15 and relevant == 2  # only two rows share a word with the question
    assert chosen[:2] == [(99, "Springfield"), (100, "Springfield Gardens")]
    again, _ = select_rows(result, "Who lives in Springfield?", n=15, relevant_fraction=0.5,
                           rng=random.Random("0:t"))
    assert again == chosen  # fixed seed
    small = QueryResult(columns=("id",), rows=[(1,), (2,)], total_rows=2)
    assert select_rows(small, "x", n=15, relevant_fraction=0.5, rng=random.Random(0)) == ([(1,), (2,)], 0)


def test_forbidden_keywords_ignore_string_literals() -> None:
    assert forbidden_keywords("SELECT * FROM t") == ["SELECT *"]
    assert forbidden_keywords("SELECT DISTINCT t.* FROM t LEFT OUTER JOIN u ON 1") == ["LEFT JOIN", "SELECT *"]
    assert forbidden_keywords("SELECT COUNT(*) FROM t WHERE note = 'left join select *'") == []


def test_column_in_error_reads_sqlite_and_postgres_messages(tools: ToolDouble) -> None:
    assert column_in_error("no such column: T1.Model") == "Model"
    assert column_in_error("ambiguous column name: singer_id") == "singer_id"
    assert column_in_error('column "model" does not exist') == "model"
    assert column_in_error("column t1.model does not exist") == "model"
    assert column_in_error('column reference "id" is ambiguous') == "id"
    assert column_in_error("no such function: YEAR") is None
    assert tables_with_column(tools.schema, "SINGER_ID") == ["concert", "singer"]


def test_parse_rewrite_drops_labels_and_quotes() -> None:
    assert parse_rewrite("results: How many makers are in \"japan\"?") == 'How many makers are in "japan"?'
    assert parse_rewrite('\n"Rewritten question: List names."\n') == "List names."
    assert parse_rewrite("  \n") is None


def test_context_prompt_mixes_relevant_and_random_rows_for_larger_tables(tools: ToolDouble) -> None:
    script = [sql_block(GOOD_SQL), "Yes"]
    with ReplayServer(script) as server:
        run(server, tools, config=DartSQLConfig(rewrite=False, context_rows=2), question="Which songs did Sting sing?")
        prompt = server.chat_requests()[0].messages[1]["content"]
    block = prompt.split("INSERT INTO singer (singer_id, name, country) VALUES")[1].split(");")[0]
    assert block.startswith(" /* 1 rows most relevant to the question, 1 at random; 1 rows omitted */\n"
                            "(3, 'Sting', 'UK'),\n")
    assert block.count("\n(") == 2
    assert "/* With at most 2 example rows in each table: */" in prompt
