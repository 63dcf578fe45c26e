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
    FIDELITY,
    REVISE_REQUEST,
    SUBSTITUTIONS,
    DartSQL,
    DartSQLConfig,
    column_in_error,
    continued_sql,
    forbidden_keywords,
    parse_rewrite,
    select_rows,
    tables_with_column,
    vote_by_result,
)
from agent.strategies.pool import PoolExample
from tests.support.replay_server import ReplayServer

from .tool_double import ToolDouble

QUESTION = "How many concerts did adele give?"
REWRITTEN = "How many concerts did the singer named 'Adele' give?"
GOOD_SQL = ("SELECT COUNT(*) FROM concert JOIN singer ON concert.singer_id = singer.singer_id "
            "WHERE singer.name = 'Adele'")
TABLES = 4  # singer, concert, enrollment, grade: one sampling query each
NO_REWRITE = {"rewrite": False, "examples": 0}


def sql_block(sql: str, before: str = "") -> str:
    return f"{before}```sql\n{sql}\n```"


def stored_copy(turn: TurnRecord) -> TurnRecord:
    """A turn as the session layer stores and reloads it (through JSON)."""
    return TurnRecord.from_dict(json.loads(json.dumps(turn.to_dict())))


def client_for(server: ReplayServer) -> LLMClient:
    return LLMClient(LLMSettings(base_url=server.url, api_key="k", model="replay-model", timeout_s=5.0,
                                 backoff_base_s=0.001, backoff_max_s=0.005, max_retries=0))


def run(server: ReplayServer, tools: ToolDouble, *, config: DartSQLConfig | None = None,
        previous: Sequence[TurnRecord] = (), question: str = QUESTION, cancel=lambda: False,
        pool: Sequence[PoolExample] = (), question_key: str | None = None):
    stored: list[TurnRecord] = []
    ctx = SessionContext(question=question, schema=tools.schema, example_pool=tuple(pool), question_key=question_key)
    outcome = DartSQL(config).run(ctx, tools=tools, llm=client_for(server), on_turn=stored.append,
                                  previous_turns=previous, should_cancel=cancel)
    return outcome, stored


def llm_kinds(turns: Sequence[TurnRecord]) -> list[str]:
    return [t.kind for t in turns if t.kind not in ("sample", "select", "vote")]


def test_every_table_is_sampled_by_a_stored_query_and_the_prompts_follow_the_paper(tools: ToolDouble) -> None:
    script = [REWRITTEN, GOOD_SQL.removeprefix("SELECT "), "Yes. One count, as asked."]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools)
        requests = server.chat_requests()

    samples = turns[:TABLES]
    assert [t.kind for t in samples] == ["sample"] * TABLES
    singer = next(t for t in samples if t.extra["table"] == "singer")
    assert singer.tool == "ExecuteSQL" and singer.sql == "SELECT * FROM singer LIMIT 1000"
    assert singer.result.rows[0] == (1, "Adele", "UK") and singer.tool_latency_ms is not None
    assert [t.kind for t in turns[TABLES:]] == ["rewrite", "select", "generate", "judge"]
    assert turns[TABLES].extra == {"original_question": QUESTION, "rewritten_question": REWRITTEN}
    # Rewriting: the paper's prompt shape, with its three kinds of example, then the input.
    rewrite_prompt = requests[0].messages[0]["content"]
    assert rewrite_prompt.startswith("/*Instructions:*/\n")
    for marker in ("/*Example 1:", "/*Example 2:", "/*Example 3:", "/*Here is the input:*/"):
        assert marker in rewrite_prompt
    assert "['Table singer: ', [(1, 'Adele', 'UK'), (2, 'Shakira', 'Colombia'), (3, 'Sting', 'UK')]]" in rewrite_prompt
    assert rewrite_prompt.endswith(f"/*Rewrite the following question: {QUESTION}*/\n/*results:")
    # The empty pool is said; generation uses DAIL-SQL's representation with DART's example rows.
    assert "example pool is empty" in turns[TABLES + 1].observation
    generate_prompt = requests[1].messages[0]["content"]
    assert len(requests[1].messages) == 1
    assert generate_prompt.startswith("/* Given the following database schema: */\nCREATE TABLE ")
    assert "INSERT INTO singer (singer_id, name, country) VALUES\n(1, 'Adele', 'UK')" in generate_prompt
    assert generate_prompt.endswith(f"/* Answer the following: {REWRITTEN} */\nSELECT")
    # The model continued after SELECT; the query ran in the same turn.
    generate = turns[TABLES + 2]
    assert generate.sql == GOOD_SQL and generate.tool_ok and generate.result.rows == [(2,)]
    # The judge: initial prompt, the query as the LLM's reply, and the result with the paper's question.
    judge = requests[2].messages
    assert judge[0] == requests[1].messages[0] and judge[1] == {"role": "assistant", "content": GOOD_SQL}
    assert judge[2]["content"].startswith("/* Here are the execution results (total 1 rows):\n(2)\nJudge whether")
    assert "Output Yes if you agree with both, or No otherwise." in judge[2]["content"]
    assert turns[-1].extra["accepted"] is True and turns[-1].sql is None
    assert all(r.params["temperature"] == 0.0 for r in requests)

    assert outcome.status == Status.ANSWERED
    assert outcome.final_sql == GOOD_SQL and outcome.result.rows == [(2,)]
    assert outcome.totals.rounds == 3 and outcome.totals.tool_calls == TABLES + 1


def test_column_error_is_analysed_then_revised_in_a_separate_call(tools: ToolDouble) -> None:
    fixed = "SELECT year FROM concert WHERE singer_id = 1"
    script = ["year FROM singer WHERE name = 'Adele'", "The year is in concert, not singer.",
              fixed.removeprefix("SELECT "), "Yes, these are her concert years."]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools, config=DartSQLConfig(**NO_REWRITE))
        requests = server.chat_requests()

    assert llm_kinds(turns) == ["generate", "judge", "revise", "judge"]
    assert turns[TABLES].tool_ok is False and "no such column: year" in turns[TABLES].observation
    analyse = requests[1].messages[-1]["content"]
    assert analyse.startswith("/* Received the following exception: no such column: year")
    assert 'In fact, the following 1 table(s) contain column "year": concert.' in analyse
    assert analyse.endswith("Please analyze the cause. */")
    judge = turns[TABLES + 1]
    assert judge.extra == {"iteration": 1, "feedback": "column_error", "verdict": None, "accepted": False}
    # The revise call continues the same exchange and asks for the revised query.
    revise = requests[2].messages
    assert revise[:3] == requests[1].messages
    assert revise[3] == {"role": "assistant", "content": "The year is in concert, not singer."}
    assert revise[4]["content"] == REVISE_REQUEST
    assert turns[TABLES + 2].sql == fixed and turns[TABLES + 2].result.rows == [(2016,), (2017,)]
    # Algorithm 1: the next iteration sees the initial prompt and only the latest query.
    assert requests[3].messages[0] == requests[0].messages[0]
    assert requests[3].messages[1] == {"role": "assistant", "content": fixed}
    assert len(requests[3].messages) == 3
    assert outcome.status == Status.ANSWERED and outcome.final_sql == fixed


def test_other_errors_are_sent_back_without_a_column_hint(tools: ToolDouble) -> None:
    script = ["YEAR(year) FROM concert", "YEAR is not a SQLite function.", "year FROM concert", "Yes"]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools, config=DartSQLConfig(**NO_REWRITE))
        requests = server.chat_requests()
    feedback = requests[1].messages[-1]["content"]
    assert "no such function: YEAR" in feedback and "In fact" not in feedback
    assert turns[TABLES + 1].extra["feedback"] == "error"
    assert outcome.final_sql == "SELECT year FROM concert"


def test_empty_result_is_judged_like_any_result(tools: ToolDouble) -> None:
    empty = "SELECT name FROM singer WHERE country = 'United Kingdom'"
    fixed = "SELECT name FROM singer WHERE country = 'UK'"
    script = [sql_block(empty), "No: no rows, the country is stored as 'UK'.", sql_block(fixed), "Yes"]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools, config=DartSQLConfig(**NO_REWRITE),
                             question="Which singers are from the United Kingdom?")
        requests = server.chat_requests()
    assert turns[TABLES].tool_ok and turns[TABLES].result.total_rows == 0
    assert requests[1].messages[-1]["content"].startswith(
        "/* Here are the execution results (total 0 rows):\nJudge whether")
    assert turns[TABLES + 1].extra["feedback"] == "result" and turns[TABLES + 1].extra["verdict"] == "no"
    assert turns[TABLES + 2].result.rows == [("Adele",), ("Sting",)]
    assert outcome.status == Status.ANSWERED and outcome.final_sql == fixed


def test_forbidden_constructs_regenerate_at_once_without_spending_a_refinement(tools: ToolDouble) -> None:
    script = ["* FROM singer",                                     # generate: SELECT * -> regenerate at once
              "name, country FROM singer",                         # regenerate
              "No: the question asks only for names.",             # judge 1
              "name FROM singer LEFT JOIN concert ON 1",           # revise 1: LEFT JOIN -> regenerate at once
              "name FROM singer",                                  # regenerate
              "No.", "name FROM singer ORDER BY name",             # judge 2, revise 2
              "No.", "DISTINCT name FROM singer"]                  # judge 3, revise 3: the cap
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools, config=DartSQLConfig(**NO_REWRITE), question="List the singer names.")
        requests = server.chat_requests()
        assert server.remaining() == 0
    assert llm_kinds(turns) == ["generate", "regenerate", "judge", "revise", "regenerate", "judge", "revise",
                                "judge", "revise"]
    regenerate = requests[1].messages
    assert regenerate[:2] == [requests[0].messages[0], {"role": "assistant", "content": "SELECT * FROM singer"}]
    assert regenerate[2]["content"].startswith("/* The query must not use SELECT *.")
    regen = [t for t in turns if t.kind == "regenerate"]
    assert regen[0].extra == {"question": "List the singer names.", "regeneration": 1, "forbidden": ["SELECT *"]}
    assert regen[1].extra == {"iteration": 1, "regeneration": 1, "forbidden": ["LEFT JOIN"]}
    assert [t.extra["iteration"] for t in turns if t.kind == "judge"] == [1, 2, 3]
    assert outcome.final_sql == "SELECT DISTINCT name FROM singer"


def test_regeneration_is_capped(tools: ToolDouble) -> None:
    script = ["* FROM singer", "* FROM singer", "Yes"]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools, config=DartSQLConfig(**NO_REWRITE, max_regenerations=1))
    assert llm_kinds(turns) == ["generate", "regenerate", "judge"]
    assert outcome.final_sql == "SELECT * FROM singer"


def test_refinement_stops_after_the_cap_and_keeps_the_last_working_query(tools: ToolDouble) -> None:
    script = ["name FROM singer", "No.", "nme FROM singer", "Fix it.", "nam FROM singer", "Fix.", "nm FROM singer"]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools, config=DartSQLConfig(**NO_REWRITE))
        assert server.remaining() == 0
    assert llm_kinds(turns) == ["generate"] + ["judge", "revise"] * 3
    assert not turns[-1].tool_ok
    assert outcome.status == Status.ANSWERED and outcome.final_sql == "SELECT name FROM singer"


def test_no_query_ever_running_gives_up_with_the_last_query(tools: ToolDouble) -> None:
    script = ["nme FROM singer", "Wrong column.", "```\n```"]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools, config=DartSQLConfig(**NO_REWRITE))
    assert turns[-1].error == "No SQL query found in the completion."
    assert outcome.status == Status.GAVE_UP and outcome.final_sql == "SELECT nme FROM singer"
    assert outcome.result is None


def test_self_consistency_samples_five_at_t1_and_votes_by_result(tools: ToolDouble) -> None:
    script = ["name FROM singer WHERE country = 'UK'", "name FROM singer", "name FROM singer ORDER BY name",
              "nme FROM singer", "name FROM singer WHERE singer_id <> 2",
              "Yes"]
    config = DartSQLConfig(**NO_REWRITE, self_consistency=5)
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools, config=config, question="Which singers are from the UK?")
        requests = server.chat_requests()
    assert llm_kinds(turns) == ["generate"] * 5 + ["judge"]
    assert [r.params["temperature"] for r in requests] == [1.0] * 5 + [0.0]  # text generation unchanged
    vote = next(t for t in turns if t.kind == "vote")
    samples = [t for t in turns if t.kind == "generate"]
    # Adele+Sting twice (first and fifth sample), all three singers twice (order ignored): a tie,
    # won by the group sampled first.
    assert vote.extra["tie"] is True and vote.extra["chosen_turn"] == samples[0].index
    assert [g["turns"] for g in vote.extra["groups"]] == [[samples[0].index, samples[4].index],
                                                          [samples[1].index, samples[2].index]]
    assert outcome.final_sql == "SELECT name FROM singer WHERE country = 'UK'"
    assert requests[5].messages[1]["content"] == outcome.final_sql


def test_dail_selection_prefers_similar_questions_and_never_retrieves_the_question_itself(tools: ToolDouble) -> None:
    pool = [
        PoolExample("d:0", QUESTION, GOOD_SQL, "school"),  # the question's own gold pair
        PoolExample("d:1", "How many songs did prince write?",
                    "SELECT COUNT(*) FROM song JOIN writer ON song.writer_id = writer.id WHERE writer.name = 'Prince'"),
        PoolExample("d:2", "List all the cities.", "SELECT city FROM city"),
        PoolExample("d:3", "How many books did orwell publish?",
                    "SELECT COUNT(*) FROM book JOIN author ON book.author_id = author.id WHERE author.name = 'Orwell'"),
    ]
    pre = "COUNT(*) FROM concert JOIN singer ON concert.singer_id = singer.singer_id WHERE singer.name = 'Adele'"
    script = [pre, pre, "Yes"]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools, config=DartSQLConfig(rewrite=False, examples=2), pool=pool,
                             question_key="d:0")
        requests = server.chat_requests()
    assert llm_kinds(turns) == ["preliminary", "generate", "judge"]
    select = next(t for t in turns if t.kind == "select")
    assert [e["key"] for e in select.extra["examples"]] == ["d:1", "d:3"]
    assert select.extra["left_out"] == 1 and select.extra["pool_size"] == 3
    assert all(e["skeleton_similarity"] >= 0.85 for e in select.extra["examples"])
    prompt = requests[1].messages[0]["content"]
    assert prompt.startswith("/* Some SQL examples are provided based on similar problems: */\n"
                             "/* Answer the following: How many songs did prince write? */\n")
    assert GOOD_SQL not in prompt and "d:0" not in select.observation
    # The preliminary query is zero-shot and not executed.
    assert "Some SQL examples" not in requests[0].messages[0]["content"]
    assert turns[TABLES].sql.startswith("SELECT COUNT(*)") and turns[TABLES].tool is None
    assert outcome.final_sql.startswith("SELECT COUNT(*)")


def test_token_cap_stops_before_the_next_call(tools: ToolDouble) -> None:
    script = ["nme FROM singer", "Wrong column.", "name FROM singer", "Yes"]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools, config=DartSQLConfig(**NO_REWRITE, max_total_tokens=50))
    assert outcome.status == Status.TOKEN_LIMIT and "limit 50" in outcome.error
    assert llm_kinds(turns) == ["generate"]  # the generate prompt alone is over 50 words


def test_resume_replays_stored_turns_without_calling_the_llm_again(tools: ToolDouble) -> None:
    fixed = "SELECT year FROM concert WHERE singer_id = 1"
    script = [REWRITTEN, "year FROM singer", "Wrong table.", fixed, "Yes"]
    with ReplayServer(script) as server:
        full, full_turns = run(server, tools)
        full_requests = server.chat_requests()
    cut = TABLES + 3  # samples, rewrite, select, generate
    with ReplayServer(script[2:]) as server:
        resumed, new_turns = run(server, tools, previous=[stored_copy(t) for t in full_turns[:cut]])
        requests = server.chat_requests()
    assert len(requests) == 3
    assert requests[0].messages == full_requests[2].messages
    assert [t.index for t in new_turns] == list(range(cut, cut + 3))
    assert resumed.final_sql == full.final_sql == fixed
    assert resumed.totals.rounds == 5


def test_llm_failure_is_a_turn_and_the_resumed_run_retries_it(tools: ToolDouble) -> None:
    with ReplayServer([REWRITTEN, {"fault": "http", "status": 400}]) as server:
        failed, turns = run(server, tools)
    assert failed.status == Status.LLM_ERROR
    assert turns[-1].kind == "generate" and turns[-1].completion is None and turns[-1].error
    with ReplayServer([GOOD_SQL, "Yes"]) as server:
        resumed, more = run(server, tools, previous=turns)
    assert [t.kind for t in more] == ["generate", "judge"]
    assert resumed.status == Status.ANSWERED and resumed.totals.llm_failures == 1


def test_cancel_before_the_next_call(tools: ToolDouble) -> None:
    calls = iter([False, True])
    with ReplayServer([REWRITTEN]) as server:
        outcome, turns = run(server, tools, cancel=lambda: next(calls))
    assert outcome.status == Status.CANCELLED and llm_kinds(turns) == ["rewrite"]


def test_preview_shows_the_next_prompt(tools: ToolDouble) -> None:
    strategy = DartSQL()
    ctx = SessionContext(question=QUESTION, schema=tools.schema)
    first = strategy.preview_messages(ctx)
    assert first[0].content.endswith(f"/*Rewrite the following question: {QUESTION}*/\n/*results:")
    with ReplayServer([REWRITTEN, {"fault": "http", "status": 400}]) as server:
        _failed, turns = run(server, tools)
    second = strategy.preview_messages(ctx, turns)
    assert "INSERT INTO singer" in second[0].content  # the stored sample rows, not a new query
    assert second[0].content.endswith(f"/* Answer the following: {REWRITTEN} */\nSELECT")


def test_registry_and_config_round_trip() -> None:
    assert STRATEGIES["dart_sql"] is DartSQL
    config = DartSQLConfig(context_rows=9, forbid_keywords=False, self_consistency=5)
    strategy = create_strategy("dart_sql", config.to_dict() | {"unknown_key": 1, "refine_on_empty": True})
    assert strategy.config == config
    defaults = DartSQLConfig()
    assert (defaults.rewrite_rows, defaults.context_rows, defaults.max_refinements, defaults.result_rows,
            defaults.temperature, defaults.self_consistency, defaults.sc_temperature) == (5, 15, 3, 15, 0.0, 1, 1.0)
    with pytest.raises(ValueError):
        DartSQLConfig(relevant_fraction=2)
    with pytest.raises(ValueError):
        DartSQLConfig(max_total_tokens=0)
    assert "GloVe" in SUBSTITUTIONS and FIDELITY["as_in_paper"] and FIDELITY["differs"]


def test_continued_sql_and_vote_helpers() -> None:
    assert continued_sql("name FROM singer;\n\nThis lists names.") == "SELECT name FROM singer"
    assert continued_sql("SELECT name FROM singer") == "SELECT name FROM singer"
    assert continued_sql("```sql\nname FROM t\n```") == "SELECT name FROM t"
    assert continued_sql("   ") is None
    ok = QueryResult(columns=("n",), rows=[(1,)], total_rows=1)
    a = TurnRecord(index=3, kind="generate", sql="SELECT 1", tool_ok=True, result=ok)
    b = TurnRecord(index=4, kind="generate", sql="SELECT x", tool_ok=False)
    assert vote_by_result([b, a])["extra"]["chosen_turn"] == 3  # a failing sample never wins
    assert vote_by_result([b])["extra"]["chosen_turn"] == 4


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
        prompt = server.chat_requests()[0].messages[0]["content"]
    block = prompt.split("INSERT INTO singer (singer_id, name, country) VALUES")[1].split(");")[0]
    assert block.startswith(" /* 1 rows omitted */\n(3, 'Sting', 'UK'),\n")  # the relevant row first
    assert block.count("\n(") == 2
    assert "/* With at most 2 example rows in each table: */" in prompt


def test_a_sampling_seed_gives_each_call_its_own_seed_so_the_vote_still_samples(tools: ToolDouble) -> None:
    script = ["name FROM singer", "name FROM singer WHERE country = 'UK'", "name FROM singer", "Yes"]
    config = DartSQLConfig(**NO_REWRITE, self_consistency=3, sampling_seed=2**31 - 2)
    with ReplayServer(script) as server:
        _, turns = run(server, tools, config=config, question="Which singers are from the UK?")
        requests = server.chat_requests()
    calls = [t for t in turns if t.completion is not None]
    # the session's seed plus each call's turn index, wrapping inside the 31-bit range OpenAI accepts
    assert [r.params["seed"] for r in requests] == [(2**31 - 2 + t.index) % 2**31 for t in calls]
    assert len({r.params["seed"] for r in requests}) == 4
    with ReplayServer(script) as server:
        run(server, tools, config=DartSQLConfig(**NO_REWRITE, self_consistency=3))
        assert all("seed" not in r.params for r in server.chat_requests())  # none unless asked for
