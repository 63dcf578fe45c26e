"""Answers people can act on: a verdict with an optional corrected query, the rows as CSV, a follow-up question."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from agent.models import AgentSession, AnswerFeedback
from agent.roles import ANNOTATOR
from agent.services import sessions
from tests.conftest import group_of_testers

pytestmark = pytest.mark.django_db

NUMBERS = "CREATE TABLE n (i INTEGER PRIMARY KEY, label TEXT);\n" + "\n".join(
    f"INSERT INTO n VALUES ({i}, '{'=cmd' if i == 7 else f'row {i}'}');" for i in range(1, 121))


@pytest.fixture
def numbers(make_sqlite, grant):
    from agent import services

    database = services.database_register(name="numbers", location=str(make_sqlite(NUMBERS, "numbers.sqlite")),
                                          refresh="sync")
    return grant(database, group_of_testers())


@pytest.fixture
def answered(numbers, user):
    return AgentSession.objects.create(
        database=numbers, question="Which rows are there?", status=AgentSession.Status.ANSWERED, created_by=user,
        final_sql="SELECT i, label FROM n ORDER BY i",
        result={"columns": ["i", "label"], "rows": [[i, f"row {i}"] for i in range(1, 51)], "total_rows": 120})


def test_the_asker_marks_the_answer_wrong_with_a_corrected_query_kept_with_its_rows(user_client, answered, user):
    response = user_client.post(reverse("session_feedback", args=[answered.pk]), {
        "verdict": "wrong", "corrected_sql": "SELECT i FROM n WHERE i < 4", "note": "only the first three"})
    assert response.status_code == 302
    feedback = AnswerFeedback.objects.get(session=answered)
    assert (feedback.author, feedback.verdict, feedback.note) == (user, "wrong", "only the first three")
    assert feedback.corrected_preview["rows"] == [[1], [2], [3]]
    page = user_client.get(answered.get_absolute_url()).content.decode()
    assert "SELECT i FROM n WHERE i &lt; 4" in page and "said <strong>ana</strong>" in page
    # Changing one's mind replaces the verdict (one per person).
    user_client.post(reverse("session_feedback", args=[answered.pk]), {"verdict": "right"})
    feedback = AnswerFeedback.objects.get(session=answered)
    assert feedback.verdict == "right" and feedback.corrected_sql == ""


def test_a_corrected_query_that_writes_is_refused_by_the_guard_and_nothing_is_stored(user_client, answered):
    for sql in ("DELETE FROM n", "SELECT 1; DROP TABLE n", "SELECT * FROM n WHERE"):
        response = user_client.post(reverse("session_feedback", args=[answered.pk]),
                                    {"verdict": "wrong", "corrected_sql": sql}, follow=True)
        assert "The corrected query did not run" in response.content.decode()
    assert not AnswerFeedback.objects.exists()


def test_only_the_asker_or_an_annotator_judges_an_answer(client, answered, django_user_model):
    viewer = django_user_model.objects.create_user("vic", password="pw-vic-123")
    viewer.groups.add(group_of_testers())
    client.force_login(viewer)
    assert client.post(reverse("session_feedback", args=[answered.pk]), {"verdict": "right"}).status_code == 403
    assert "feedback-form" not in client.get(answered.get_absolute_url()).content.decode()
    annotator = django_user_model.objects.create_user("ann", password="pw-ann-123")
    annotator.groups.add(group_of_testers(), Group.objects.get(name=ANNOTATOR))
    client.force_login(annotator)
    assert client.post(reverse("session_feedback", args=[answered.pk]), {"verdict": "wrong"}).status_code == 302
    assert AnswerFeedback.objects.get().author == annotator


def test_the_rows_download_as_csv_all_of_them_with_formulas_neutralised(user_client, answered):
    response = user_client.get(reverse("session_result_csv", args=[answered.pk]))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == ["i", "label"] and len(rows) == 121  # the stored answer kept 50
    assert rows[7][1] == "'=cmd"


def test_the_api_sets_and_lists_verdicts_and_returns_every_row(user_client, answered):
    url = f"/api/sessions/{answered.pk}/feedback/"
    refused = user_client.post(url, {"verdict": "wrong", "corrected_sql": "UPDATE n SET i = 0"},
                               content_type="application/json")
    assert refused.status_code == 400 and "corrected_sql" in refused.json()
    made = user_client.post(url, {"verdict": "wrong", "corrected_sql": "SELECT count(*) FROM n"},
                            content_type="application/json")
    assert made.status_code == 200 and made.json()["corrected_preview"]["rows"] == [[120]]
    assert [f["author"] for f in user_client.get(url).json()] == ["ana"]
    rows = user_client.get(f"/api/sessions/{answered.pk}/rows/").json()
    assert rows["total_rows"] == 120 and len(rows["rows"]) == 120


def test_a_follow_up_carries_the_earlier_question_and_answer_into_the_prompt(spider_database, replay_llm, user):
    db = spider_database("concert_singer")
    server = replay_llm([
        'Thought: Count them.\nAction: ExecuteSQL("SELECT count(*) FROM singer")',
        "Thought: Done.\nAction: Done",
        'Thought: Now the French ones.\nAction: ExecuteSQL("SELECT count(*) FROM singer WHERE Country = \'France\'")',
        "Thought: Done.\nAction: Done",
    ])
    first = sessions.session_create(database=db, question="How many singers are there?", user=user, enqueue=False)
    sessions.session_execute(session_id=first.pk)
    first.refresh_from_db()
    second = sessions.session_create(database=db, question="And how many of them are from France?", user=user,
                                     enqueue=False, follow_up_of=first)
    sessions.session_execute(session_id=second.pk)
    second.refresh_from_db()
    assert second.follow_up_of == first and second.question == "And how many of them are from France?"
    prompt = server.chat_requests()[2].messages[1]["content"]
    assert "Question 1: How many singers are there?" in prompt
    assert "SQL 1: SELECT count(*) FROM singer" in prompt and "count(*) -> 6" in prompt
    assert "Follow-up question: And how many of them are from France?" in prompt
    assert "Earlier in this conversation" not in server.chat_requests()[0].messages[1]["content"]


def test_a_follow_up_from_the_page_and_the_api_is_a_new_linked_session(user_client, answered, replay_llm):
    replay_llm([])  # an endpoint to snapshot; the follow-up is only queued here
    response = user_client.post(reverse("session_follow_up", args=[answered.pk]), {"question": "Only the even ones?"})
    follow_up = AgentSession.objects.get(follow_up_of=answered)
    assert response.url == follow_up.get_absolute_url()
    assert follow_up.config["conversation"][0]["question"] == "Which rows are there?"
    page = user_client.get(follow_up.get_absolute_url()).content.decode()
    assert f"Follows up <a href=\"/sessions/{answered.pk}/\">session #{answered.pk}</a>" in page
    made = user_client.post(f"/api/sessions/{answered.pk}/follow-up/", {"question": "And the odd ones?"},
                            content_type="application/json")
    assert made.status_code == 201 and made.json()["follow_up_of"] == answered.pk


def test_wrong_answers_with_their_corrections_reach_the_labels_page_of_those_who_see_them(
        client, user_client, answered, django_user_model):
    user_client.post(reverse("session_feedback", args=[answered.pk]),
                     {"verdict": "wrong", "corrected_sql": "SELECT i FROM n WHERE i = 2"})
    page = user_client.get(reverse("labels:overview")).content.decode()
    assert "0 marked right · 1 marked wrong" in page and "SELECT i FROM n WHERE i = 2" in page
    outsider = django_user_model.objects.create_user("otto", password="pw-otto-123")  # not granted `numbers`
    client.force_login(outsider)
    page = client.get(reverse("labels:overview")).content.decode()
    assert "0 marked right · 0 marked wrong" in page and "WHERE i = 2" not in page
