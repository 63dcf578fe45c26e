"""In a browser: the person who asked marks the answer wrong with the right SQL, downloads the rows and asks a
follow-up that a worker answers with the earlier question in its prompt."""

from __future__ import annotations

import csv
import io

import pytest

from agent.models import AgentSession, AnswerFeedback
from tests.browser import log_in
from tests.support.worker import WorkerProcess, purge_broker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_answer_feedback_rows_and_a_follow_up_question(page, live_server, user, spider_database, replay_llm,
                                                        tmp_path):
    db = spider_database("concert_singer")
    server = replay_llm([
        "Thought: Only the French ones.\nAction: ExecuteSQL(\"SELECT count(*) FROM singer WHERE Country = 'France'\")",
        "Thought: Done.\nAction: Done",
    ])
    first = AgentSession.objects.create(
        database=db, question="Which singers are there?", status=AgentSession.Status.ANSWERED, created_by=user,
        final_sql="SELECT Name, Country FROM singer",
        result={"columns": ["Name", "Country"], "rows": [["Joe Sharp", "Netherlands"]], "total_rows": 6})
    purge_broker()
    worker = WorkerProcess(tmp_path).start()
    try:
        log_in(page, live_server, "ana", "pw-ana-123")
        page.goto(f"{live_server.url}{first.get_absolute_url()}")
        # Wrong, with the SQL that would be right: run read-only and shown with its rows.
        page.click("#feedback-form summary")
        page.fill("#feedback-form textarea[name=corrected_sql]", "SELECT Name FROM singer WHERE Age > 40")
        page.click("#feedback-form button[value=wrong]")
        page.wait_for_selector("#answer-feedback >> text=Wrong")
        assert "SELECT Name FROM singer WHERE Age > 40" in page.inner_text("#answer-feedback")
        feedback = AnswerFeedback.objects.get(session=first)
        assert feedback.author == user and feedback.verdict == "wrong"
        # The rows as CSV: all six, where the session kept one.
        with page.expect_download() as download:
            page.click("#download-csv")
        rows = list(csv.reader(io.StringIO(open(download.value.path(), encoding="utf-8").read())))
        assert rows[0] == ["Name", "Country"] and len(rows) == 7
        # A follow-up: a new session linked to the first, answered with the conversation in its prompt.
        page.fill("#follow-up-form textarea[name=question]", "How many of them are from France?")
        page.click("#follow-up-form button[type=submit]")
        page.wait_for_url(lambda url: url.rstrip("/").split("/")[-1] != str(first.pk) and "/sessions/" in url)
        page.wait_for_selector("#session-status:not(:has-text('Queued')):not(:has-text('Running'))", timeout=60_000)
        assert page.inner_text("#session-status") == "Answered", page.inner_text("#session-head")
        assert f"session #{first.pk}" in page.inner_text("#follow-up-of")
        assert "Which singers are there?" in page.inner_text("#follow-up-of")
        prompt = server.chat_requests()[0].messages[1]["content"]
        assert "Question 1: Which singers are there?" in prompt and "SQL 1: SELECT Name, Country FROM singer" in prompt
        assert "Follow-up question: How many of them are from France?" in prompt
        follow_up = AgentSession.objects.get(follow_up_of=first)
        assert follow_up.created_by == user and follow_up.final_sql.endswith("'France'")
    finally:
        worker.stop()
