"""A turn's fields are listed once (TurnRecord); storing and reading a turn goes through that list."""

from __future__ import annotations

import dataclasses

import pytest

from agent.api import TurnSerializer
from agent.llm import Message
from agent.models import TURN_RECORD_FIELDS, AgentSession, Turn
from agent.sql import QueryResult
from agent.strategies import TurnRecord

pytestmark = pytest.mark.django_db


def test_every_record_field_is_a_turn_column_and_an_api_field() -> None:
    names = {f.name for f in dataclasses.fields(TurnRecord)} - {"messages"}
    assert set(TURN_RECORD_FIELDS) == names
    columns = {f.name for f in Turn._meta.get_fields()}
    assert names <= columns
    assert set(TurnSerializer.Meta.fields) == (names - {"extra"}) | {"created_at"}


def test_a_record_with_every_field_set_round_trips_through_the_database(demo_database) -> None:
    session = AgentSession.objects.create(database=demo_database, question="q", strategy="interactive_t2s")
    messages = [Message("system", "tools"), Message("user", "Q: q")]
    record = TurnRecord(
        index=3, kind="react", messages=tuple(messages), completion="Thought: t\nAction: ExecuteSQL(\"SELECT 1\")",
        thought="t", action='ExecuteSQL("SELECT 1")', tool="ExecuteSQL", args=("SELECT 1",), kwargs={"k": [1]},
        observation="1", tool_ok=True, sql="SELECT 1",
        result=QueryResult(columns=("1",), rows=[(1,)], total_rows=1, total_is_exact=True),
        prompt_tokens=11, completion_tokens=7, cost=0.001, llm_latency_ms=12.5, tool_latency_ms=1.5,
        llm_attempts=2, model="m", finish_reason="stop", error="e", extra={"votes": [1, 2]})
    defaults = TurnRecord(index=0, kind="")
    assert [f for f in TURN_RECORD_FIELDS if getattr(record, f) == getattr(defaults, f)] == []  # all set
    Turn.from_record(record, session_id=session.pk, prompt=messages, prompt_prefix_len=0).save()
    stored = Turn.objects.get(session=session, index=3)
    assert stored.to_record(messages) == record


def test_absent_text_fields_are_blank_in_the_table_and_none_in_the_record(demo_database) -> None:
    session = AgentSession.objects.create(database=demo_database, question="q", strategy="interactive_t2s")
    record = TurnRecord(index=0, kind="react", error="LLM down")
    Turn.from_record(record, session_id=session.pk, prompt=[], prompt_prefix_len=0).save()
    stored = Turn.objects.get(session=session, index=0)
    assert (stored.thought, stored.tool, stored.sql, stored.completion) == ("", "", "", None)
    assert stored.to_record([]) == record
