"""HDSP end to end over real HTTP: step-by-step prompt, quality feedback, extended prompt exactly when f_sf = 1."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from agent.llm import LLMClient, LLMSettings
from agent.strategies import STRATEGIES, SessionContext, Status, TurnRecord, create_strategy
from agent.strategies.hdsp import (
    BASIC_STEPS,
    EXTENDED_STEPS,
    EXTRA_STEPS,
    HDSP,
    SUBSTITUTIONS,
    HDSPConfig,
    answer_text_type,
)
from tests.support.replay_server import ReplayServer

from .tool_double import ToolDouble

QUESTION = "How many concerts did Adele give?"
COUNT_SQL = ("SELECT COUNT(*) FROM concert JOIN singer ON concert.singer_id = singer.singer_id "
             "WHERE singer.name = 'Adele'")
YEARS_SQL = ("SELECT concert.year FROM concert JOIN singer ON concert.singer_id = singer.singer_id "
             "WHERE singer.name = 'Adele'")
WIDE_GOLD = ("SELECT g.student_id, g.course_id, g.score, s.name, s.country, c.year FROM grade AS g, singer AS s "
             "JOIN concert AS c ON s.singer_id = c.singer_id")


def answer(sql: str) -> str:
    return ("Step 1: singer.name and concert.singer_id.\nStep 2: join on singer_id.\n...\nStep 8: the query.\n"
            f"```sql\n{sql}\n```")


def stored_copy(turn: TurnRecord) -> TurnRecord:
    """A turn as the session layer stores and reloads it (through JSON)."""
    return TurnRecord.from_dict(json.loads(json.dumps(turn.to_dict())))


def client_for(server: ReplayServer) -> LLMClient:
    return LLMClient(LLMSettings(base_url=server.url, api_key="k", model="replay-model", timeout_s=5.0,
                                 backoff_base_s=0.001, backoff_max_s=0.005, max_retries=0))


def run(server: ReplayServer, tools: ToolDouble, *, config: HDSPConfig | None = None,
        previous: Sequence[TurnRecord] = ()):
    stored: list[TurnRecord] = []
    ctx = SessionContext(question=QUESTION, schema=tools.schema)
    outcome = HDSP(config).run(ctx, tools=tools, llm=client_for(server), on_turn=stored.append,
                               previous_turns=previous)
    return outcome, stored


def test_matching_answer_type_keeps_the_eight_step_answer(tools: ToolDouble) -> None:
    with ReplayServer(["2", answer(COUNT_SQL)]) as server:
        outcome, turns = run(server, tools)
        requests = server.chat_requests()

    assert [t.kind for t in turns] == ["direct_answer", "generate", "feedback"]
    assert turns[0].extra == {"answer_type": "number"} and turns[0].completion == "2"
    # A' is the model's direct answer to the question alone: no schema, no SQL asked for.
    direct = requests[0].messages
    assert len(direct) == 1 and direct[0]["content"].startswith(f"Question: {QUESTION}\nAnswer the question directly.")
    assert "CREATE TABLE" not in direct[0]["content"]
    system = requests[1].messages[0]["content"]
    assert f"Step 8: {BASIC_STEPS[7]}" in system and "Step 9" not in system
    assert "CREATE TABLE singer (" in requests[1].messages[1]["content"]
    assert turns[1].sql == COUNT_SQL and turns[1].result.rows == [(2,)]
    feedback = turns[2].extra
    assert feedback["f_nc"] is None and feedback["f_sc"] == 1 and feedback["predicted_type"] == "number"
    assert feedback["n_col_source"] == "schema_linking" and feedback["n_col"] == 2  # name, singer_id
    assert feedback["f_diff"] == 0 and feedback["f_sf"] == 0
    assert turns[2].completion is None and turns[2].observation.endswith("not hard: answer kept")
    assert outcome.status == Status.ANSWERED and outcome.final_sql == COUNT_SQL
    assert outcome.totals.rounds == 2 and len(requests) == 2


def test_wrong_answer_type_triggers_the_extended_prompt(tools: ToolDouble) -> None:
    with ReplayServer(["Adele\nUK\n2016", answer(COUNT_SQL), answer(YEARS_SQL)]) as server:
        outcome, turns = run(server, tools)
        requests = server.chat_requests()

    assert [t.kind for t in turns] == ["direct_answer", "generate", "feedback", "extended"]
    assert turns[2].extra["expected_type"] == "list" and turns[2].extra["predicted_type"] == "number"
    assert turns[2].extra["f_sc"] == 0 and turns[2].extra["f_sf"] == 1
    system = requests[2].messages[0]["content"]
    # The five extra steps sit between step 5 (aggregation) and the old step 6 (ordering).
    assert f"Step 5: {BASIC_STEPS[4]}\nStep 6: {EXTRA_STEPS[0]}" in system
    assert f"Step 10: {EXTRA_STEPS[4]}\nStep 11: {BASIC_STEPS[5]}" in system
    assert f"Step 13: {BASIC_STEPS[7]}" in system
    assert requests[2].messages[1] == requests[1].messages[1]
    assert turns[3].extra == {"prompt": "extended", "steps": 13}
    assert outcome.final_sql == YEARS_SQL and outcome.result.rows == [(2016,), (2017,)]


def test_gold_sql_far_from_the_prediction_on_a_wide_question_is_hard(tools: ToolDouble) -> None:
    config = HDSPConfig(gold_sql=WIDE_GOLD)
    with ReplayServer(["2", answer(COUNT_SQL), answer(YEARS_SQL)]) as server:
        outcome, turns = run(server, tools, config=config)
    feedback = turns[2].extra
    assert feedback["n_col_source"] == "gold" and feedback["n_col"] == 7
    assert feedback["f_nc"] < 0.8 and feedback["f_diff"] == 1 and feedback["f_sc"] == 1 and feedback["f_sf"] == 1
    assert turns[-1].kind == "extended" and outcome.final_sql == YEARS_SQL


def test_gold_sql_close_to_a_correctly_typed_prediction_is_not_hard(tools: ToolDouble) -> None:
    gold = COUNT_SQL.replace("singer.name", "T2.name").replace("JOIN singer ON", "JOIN singer AS T2 ON") \
        .replace("= singer.singer_id", "= T2.singer_id")
    with ReplayServer(["2", answer(COUNT_SQL)]) as server:
        outcome, turns = run(server, tools, config=HDSPConfig(gold_sql=gold))
    assert turns[2].extra["f_nc"] == 1.0 and turns[2].extra["f_sf"] == 0
    assert [t.kind for t in turns][-1] == "feedback" and outcome.final_sql == COUNT_SQL


def test_close_to_gold_but_wrong_type_is_hard(tools: ToolDouble) -> None:
    with ReplayServer(["Adele", answer(COUNT_SQL), answer(YEARS_SQL)]) as server:
        _, turns = run(server, tools, config=HDSPConfig(gold_sql=COUNT_SQL))
    assert turns[2].extra["f_nc"] == 1.0 and turns[2].extra["f_sc"] == 0 and turns[2].extra["f_sf"] == 1
    assert turns[-1].kind == "extended"


def test_failing_extended_query_falls_back_to_the_first_answer(tools: ToolDouble) -> None:
    with ReplayServer(["Adele\nUK\n2016", answer(COUNT_SQL), answer("SELECT yr FROM concert")]) as server:
        outcome, turns = run(server, tools)
    assert turns[-1].tool_ok is False
    assert outcome.status == Status.ANSWERED and outcome.final_sql == COUNT_SQL


def test_without_feedback_only_the_eight_step_prompt_runs(tools: ToolDouble) -> None:
    with ReplayServer([answer(COUNT_SQL)]) as server:
        outcome, turns = run(server, tools, config=HDSPConfig(feedback=False))
    assert [t.kind for t in turns] == ["generate"] and outcome.final_sql == COUNT_SQL


def test_resume_after_the_feedback_calls_only_the_extended_prompt(tools: ToolDouble) -> None:
    with ReplayServer(["Adele\nUK\n2016", answer(COUNT_SQL), answer(YEARS_SQL)]) as server:
        full, turns = run(server, tools)
    with ReplayServer([answer(YEARS_SQL)]) as server:
        resumed, more = run(server, tools, previous=[stored_copy(t) for t in turns[:3]])
        assert len(server.chat_requests()) == 1
    assert [t.kind for t in more] == ["extended"] and more[0].index == 3
    assert resumed.final_sql == full.final_sql == YEARS_SQL


def test_preview_and_registry() -> None:
    assert STRATEGIES["hdsp"] is HDSP
    config = HDSPConfig(gold_sql="SELECT 1", t_nc=0.7)
    assert create_strategy("hdsp", config.to_dict()).config == config
    assert HDSPConfig(gold_sql="  ").gold_sql is None
    with pytest.raises(ValueError):
        HDSPConfig(t_nc=1.5)
    with pytest.raises(ValueError):
        HDSPConfig(n_col_from="both")
    assert len(EXTENDED_STEPS) == 13 and "t_nc" in SUBSTITUTIONS
    assert HDSPConfig().t_nc == 0.8 and HDSPConfig().n_col_from == "gold"


def test_preview_shows_the_direct_answer_prompt_first(tools: ToolDouble) -> None:
    ctx = SessionContext(question=QUESTION, schema=tools.schema)
    messages = HDSP().preview_messages(ctx)
    assert messages[0].content.startswith(f"Question: {QUESTION}") and "directly" in messages[0].content
    with_schema = HDSP(HDSPConfig(direct_answer_schema=True)).preview_messages(ctx)
    assert "CREATE TABLE singer" in with_schema[0].content


def test_n_col_can_count_the_predictions_columns(tools: ToolDouble) -> None:
    with ReplayServer(["2", answer(COUNT_SQL), answer(YEARS_SQL)]) as server:
        _, turns = run(server, tools, config=HDSPConfig(gold_sql=WIDE_GOLD, n_col_from="prediction"))
    feedback = turns[2].extra
    assert feedback["n_col_source"] == "prediction" and feedback["n_col"] == 2 and feedback["f_diff"] == 0
    assert feedback["f_sf"] == 0 and turns[-1].kind == "feedback"


@pytest.mark.parametrize(("text", "label"), [
    ("3", "number"), ("1,234", "number"), ("12.5%", "number"), ("The answer is 4.", "number"),
    ("Adele", "text"), ("Adele, Sting", "list"), ("- Adele\n- Sting", "list"), ("name: Adele\nage: 30", "record"),
    ("Yes", "boolean"), ("2019-01-02", "date"), ("", "empty"),
])
def test_answer_text_type(text: str, label: str) -> None:
    assert answer_text_type(text) == label
