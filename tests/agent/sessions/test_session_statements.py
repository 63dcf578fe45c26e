"""The statements a session's run writes out instead of going through the ORM (agent/services/sessions.py) read and
store exactly what the ORM would: the same instances, the same rows, the same cleaning."""

import time

import pytest
from django.contrib.auth.models import User
from django.forms.models import model_to_dict

from agent.llm import Message
from agent.models import AgentSession, Turn
from agent.services import sessions
from agent.strategies import TurnKind, TurnRecord

pytestmark = pytest.mark.django_db

QUESTION = "How many singers do we have?"


def _fields(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


@pytest.mark.parametrize("billed", [True, False])
def test_a_session_loads_as_select_related_would(spider_database, replay_llm, billed):
    replay_llm([])
    user = User.objects.create_user("payer") if billed else None
    session = sessions.session_create(database=spider_database("concert_singer"), question=QUESTION,
                                      enqueue=False, billed_to=user, user=user)
    expected = AgentSession.objects.select_related("database", "billed_to").get(pk=session.pk)
    loaded = sessions._load_session(session.pk)
    assert _fields(loaded) == _fields(expected)
    assert loaded._state.fields_cache.keys() == expected._state.fields_cache.keys()
    assert _fields(loaded.database) == _fields(expected.database)
    if billed:
        assert _fields(loaded.billed_to) == _fields(expected.billed_to)
    else:
        assert loaded.billed_to is None
    with pytest.raises(AgentSession.DoesNotExist):
        sessions._load_session(session.pk + 1000)


def _record(index: int, text: str) -> TurnRecord:
    return TurnRecord(index=index, kind=TurnKind.REACT, messages=(Message("system", "s"), Message("user", text)),
                      completion=f"Thought: {text}\nAction: Done", thought=text, action="Done", tool="Done",
                      kwargs={"k": text}, result=None, prompt_tokens=3, completion_tokens=2, llm_latency_ms=1.5,
                      llm_attempts=1, model="m", extra={"note": text})


def test_a_stored_turn_is_the_row_turn_save_would_store_cleaned_alike(spider_database, replay_llm):
    replay_llm([])
    db = spider_database("concert_singer")
    one, two = (sessions.session_create(database=db, question=QUESTION, enqueue=False) for _ in range(2))
    dirty = "nul\x00 and a lone \ud800 surrogate"  # PostgreSQL refuses NUL in text and JSON: cleaned first
    record = _record(0, dirty)
    messages = list(record.messages)
    Turn.from_record(record, session_id=one.pk, prompt=messages, prompt_prefix_len=0).save(force_insert=True)
    before = time.time()
    sessions._insert_turn(Turn.from_record(record, session_id=two.pk, prompt=messages, prompt_prefix_len=0))
    by_orm, written = Turn.objects.get(session=one), Turn.objects.get(session=two)
    exclude = ["id", "session", "created_at"]
    assert model_to_dict(written, exclude=exclude) == model_to_dict(by_orm, exclude=exclude)
    assert "\x00" not in written.thought and "\x00" not in written.extra["note"]
    assert written.created_at.timestamp() >= before - 1 and written.created_at.tzinfo is not None


def test_stored_turns_come_back_in_index_order(spider_database, replay_llm):
    replay_llm([])
    session = sessions.session_create(database=spider_database("concert_singer"), question=QUESTION,
                                      enqueue=False)
    for index in (2, 0, 1):
        record = _record(index, f"step {index}")
        sessions._insert_turn(Turn.from_record(record, session_id=session.pk, prompt=list(record.messages),
                                               prompt_prefix_len=0))
    assert [r.index for r in sessions.session_records(session)] == [0, 1, 2]
    assert [_fields(t) for t in sessions._stored_turns(session.pk)] == \
        [_fields(t) for t in Turn.objects.for_session(session)]


def test_finish_stores_the_cleaned_outcome_only_under_the_lease(spider_database, replay_llm):
    replay_llm([])
    session = sessions.session_create(database=spider_database("concert_singer"), question=QUESTION,
                                      enqueue=False)
    lease = sessions._claim(session.pk)
    assert not sessions._finish(session.pk, "another", status="answered", error="", started=time.monotonic())
    assert sessions._finish(session.pk, lease, status="answered", error="e\x00", final_sql="SELECT\x00 1",
                            result={"rows": [["a\x00"]]}, cost=0.25, started=time.monotonic() - 2)
    session.refresh_from_db()
    assert session.status == "answered" and session.cost == 0.25 and session.elapsed_ms >= 2000
    assert "\x00" not in session.error + session.final_sql and "\x00" not in session.result["rows"][0][0]
    assert session.finished_at is not None and session.heartbeat_at == session.finished_at
    # A failed session stores no result: SQL NULL, as update(result=None) stored it.
    other = sessions.session_create(database=spider_database("concert_singer"), question=QUESTION, enqueue=False)
    assert sessions._finish(other.pk, sessions._claim(other.pk), status="failed", error="x", started=0.0)
    assert AgentSession.objects.filter(pk=other.pk, result__isnull=True).exists()
