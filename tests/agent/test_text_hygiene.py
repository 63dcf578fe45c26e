"""Outside text with NUL bytes or lone surrogates is stored (cleaned) on the app database, never a failure.

The suite runs on PostgreSQL (DATABASE_URL), which refuses NUL in text and JSONB; the
last test runs the same saves on an embedded SQLite app database in a child process,
where lone surrogates are what fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.models import AgentSession, Turn
from agent.textclean import MAX_COMPLETION_CHARS, REPLACEMENT, clean_json, clean_text
from tests.conftest import seed_taxonomy_and_roles

HOSTILE = "a\x00b\ud800c\udfffd"
CLEAN = f"a{REPLACEMENT}b{REPLACEMENT}c{REPLACEMENT}d"


def test_clean_text_replaces_nul_and_lone_surrogates_only():
    assert clean_text(HOSTILE) == CLEAN
    assert clean_text("plain ünïcode 𝄞 text") == "plain ünïcode 𝄞 text"
    assert clean_json({"k\x00": ["x\ud800", 1, None, {"n": "\x00"}]}) == {
        f"k{REPLACEMENT}": [f"x{REPLACEMENT}", 1, None, {"n": REPLACEMENT}]}


def test_clean_text_cap_says_how_long_the_text_was():
    out = clean_text("x" * 1_000_000, limit=MAX_COMPLETION_CHARS)
    assert len(out) <= MAX_COMPLETION_CHARS and out.endswith("[cut: 1,000,000 characters in all]")


@pytest.mark.django_db
def test_turn_with_nul_in_completion_cells_and_column_names_is_stored(demo_database):
    session = AgentSession.objects.create(database=demo_database, question=HOSTILE)
    turn = Turn.objects.create(
        session=session, index=0, completion=HOSTILE, thought=HOSTILE, action=HOSTILE, observation=HOSTILE,
        sql=HOSTILE, args=[HOSTILE], kwargs={HOSTILE: HOSTILE}, error=HOSTILE,
        result={"columns": [HOSTILE], "rows": [[HOSTILE, 1]], "total_rows": 1},
        prompt=[{"role": "assistant", "content": HOSTILE}])
    turn.refresh_from_db()
    session.refresh_from_db()
    assert turn.completion == CLEAN and turn.observation == CLEAN and session.question == CLEAN
    assert turn.result["columns"] == [CLEAN] and turn.result["rows"] == [[CLEAN, 1]]
    assert turn.kwargs == {CLEAN: CLEAN} and turn.prompt[0]["content"] == CLEAN


@pytest.mark.django_db
def test_exemplar_step_with_a_nul_cell_is_stored(make_sqlite, staff, staff_client):
    from agent.services.databases import database_register
    from annotations.exemplars import services

    path = make_sqlite("CREATE TABLE t (name TEXT); INSERT INTO t VALUES ('x' || char(0) || 'y');")
    database = database_register(name="nul_db", location=str(path), refresh="sync")
    exemplar = services.exemplar_create(user=staff, database=database, question="What is in t?")
    services.step_add(exemplar=exemplar, user=staff, thought="look\x00", action='ExecuteSQL("SELECT name FROM t")')
    step = exemplar.steps.get()
    assert "\x00" not in step.observation and REPLACEMENT in step.observation and step.thought == f"look{REPLACEMENT}"
    response = staff_client.get(f"/exemplars/{exemplar.pk}/")
    assert response.status_code == 200


@pytest.mark.django_db
def test_label_note_and_corrected_gold_with_nul_are_stored(tiny_labelled_item):
    from annotations.labels.models import Label

    label = tiny_labelled_item
    label.note = HOSTILE
    label.corrected_sql = "SELECT 1 -- \x00"
    label.save()
    label = Label.objects.get(pk=label.pk)
    assert label.note == CLEAN and "\x00" not in label.corrected_sql
    from annotations.labels.services import label_note_set

    label_note_set(item=label.item, user=label.annotator, note="note \x00 again")
    assert Label.objects.get(pk=label.pk).note == f"note {REPLACEMENT} again"


@pytest.fixture
def tiny_labelled_item(db, staff):
    from annotations.labels.models import Category, Label
    from annotations.runs.models import Dataset, DatasetQuestion, Run, RunItem

    dataset = Dataset.objects.create(name="d", source_path="/nowhere")
    question = DatasetQuestion.objects.create(dataset=dataset, index=0, db_id="x", question="q", gold_sql="SELECT 1")
    run = Run.objects.create(name="r", dataset=dataset)
    item = RunItem.objects.create(run=run, question=question, predicted_sql="SELECT 2")
    if not Category.objects.exists():
        seed_taxonomy_and_roles()  # a transactional test run before this one in the process flushed them
    category = Category.objects.first()
    return Label.objects.create(item=item, category=category, taxonomy_version=category.version, annotator=staff)


SQLITE_SCRIPT = r"""
import django, os, sys
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from agent.models import Database, AgentSession, Turn
db = Database.objects.create(name="d", engine="sqlite", location="/nowhere")
s = AgentSession.objects.create(database=db, question="q\ud800\x00")
t = Turn.objects.create(session=s, index=0, completion="c\udfff\x00", result={"rows": [["\ud800"]]})
t.refresh_from_db()
assert t.completion == "c\ufffd\ufffd", repr(t.completion)
assert t.result == {"rows": [["\ufffd"]]}, t.result
print("ok")
"""


def test_same_saves_work_on_an_embedded_sqlite_app_database(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",)}
    env.update(DJANGO_SETTINGS_MODULE="t2s_site.settings", T2S_VAR_DIR=str(tmp_path),
               DATABASE_URL=f"sqlite:///{tmp_path / 'app.sqlite3'}", T2S_REQUIRE_SERVICES="0")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", SQLITE_SCRIPT], cwd=root, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")


@pytest.mark.django_db
def test_sessions_started_together_are_stored_clean_their_shared_snapshot_cleaned_once(demo_database, replay_llm):
    from agent.services import sessions

    replay_llm(["Thought: x\nAction: Done"])
    specs = [sessions.SessionSpec(database=demo_database, question=HOSTILE, evidence=HOSTILE, question_key=HOSTILE,
                                  options={"stop": [HOSTILE]}),
             sessions.SessionSpec(database=demo_database, question="Plain?", question_key="plain",
                                  options={"stop": [HOSTILE]})]
    created = sessions.session_create_many(specs=specs, strategy="interactive_t2s",
                                           endpoint=sessions.default_llm_endpoint(), zero_shot=True)
    first, second = (AgentSession.objects.get(pk=s.pk) for s in created)
    assert (first.question, first.evidence, first.config["question_key"]) == (CLEAN, CLEAN, CLEAN)
    assert CLEAN in first.config["strategy"]["stop"] and CLEAN in second.config["strategy"]["stop"]
    assert second.config["question_key"] == "plain" and second.question == "Plain?"
