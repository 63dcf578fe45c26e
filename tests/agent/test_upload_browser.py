"""In a real browser: upload a SQLite file, then ask a question on it (the agent runs on a worker against the
replay LLM server)."""

import time

import pytest

from agent.models import Database
from tests.browser import log_in
from tests.support.uploads import sqlite_bytes
from tests.support.worker import WorkerProcess, purge_broker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def wait_until_indexed(name: str, limit_s: float = 90) -> Database:
    """The worker introspects and indexes the upload; wait for it (a bound on waiting, not a speed assertion)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        database = Database.objects.filter(name=name).first()
        if database and database.status == "ready" and database.index_status == "ready":
            return database
        time.sleep(0.3)
    raise AssertionError(f"{name} was not indexed: {database and (database.status, database.index_status)}")


def test_upload_a_sqlite_file_then_ask_a_question_on_it(page, live_server, staff, upload_dir, replay_llm, tmp_path):
    replay_llm([
        {"text": 'Thought: Count the singers.\nAction: ExecuteSQL("SELECT count(*) FROM singer")', "latency_ms": 200},
        "Thought: That is the answer.\nAction: Done",
    ])
    upload = tmp_path / "my concerts.sqlite"
    upload.write_bytes(sqlite_bytes(tmp_path))
    purge_broker()
    worker = WorkerProcess(tmp_path, T2S_DATA_DIRS=str(upload_dir)).start()
    try:
        log_in(page, live_server, "sam", "pw-sam-123")
        page.goto(f"{live_server.url}/databases/")
        page.click("text=Upload a SQLite file")
        page.fill("input[name=name]", "concerts")
        page.set_input_files("input[name=file]", str(upload))
        page.click("button:has-text('Upload')")
        page.wait_for_url("**/databases/concerts/")
        assert "Uploaded concerts" in page.inner_text("main")
        wait_until_indexed("concerts")

        page.goto(f"{live_server.url}/ask/")
        page.select_option("select[name=database]", "concerts")
        page.fill("textarea[name=question]", "How many singers do we have?")
        page.click("button:has-text('Ask')")
        page.wait_for_url("**/sessions/*/")
        page.wait_for_selector("#session-status:has-text('Answered')", timeout=60_000)
        assert page.inner_text("#final-sql") == "SELECT count(*) FROM singer"
        page.screenshot(path=str(tmp_path / "asked.png"), full_page=True)
    finally:
        worker.stop()


def test_a_file_that_is_not_a_database_gets_a_clear_error_in_the_page(page, live_server, staff, upload_dir,
                                                                       tmp_path):
    junk = tmp_path / "notes.sqlite"
    junk.write_text("name,country\nJoe,France\n")
    log_in(page, live_server, "sam", "pw-sam-123")
    page.goto(f"{live_server.url}/databases/upload/")
    page.fill("input[name=name]", "notes")
    page.set_input_files("input[name=file]", str(junk))
    page.click("button:has-text('Upload')")
    assert "it is not a SQLite database file" in page.inner_text(".field-error")
    assert not Database.objects.filter(name="notes").exists()
    assert [p for p in upload_dir.rglob("*") if p.is_file()] == []
