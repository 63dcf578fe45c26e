import pytest

from tests.browser import log_in
from tests.support.worker import WorkerProcess, purge_broker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_ask_in_the_browser_and_watch_turns_arrive_live(page, live_server, staff, spider_database,
                                                        replay_llm, tmp_path):
    spider_database("concert_singer")
    replay_llm([
        {"text": 'Thought: Which column holds names?\nAction: SearchColumn(["singer name"])', "latency_ms": 300},
        {"text": 'Thought: Count them.\nAction: ExecuteSQL("SELECT count(*) FROM singer")', "latency_ms": 1500},
        "Thought: That is the answer.\nAction: Done",
    ])
    purge_broker()
    worker = WorkerProcess(tmp_path).start()
    try:
        log_in(page, live_server, "sam", "pw-sam-123")
        page.goto(f"{live_server.url}/ask/")
        page.select_option("select[name=database]", "concert_singer")
        page.fill("textarea[name=question]", "How many singers do we have?")
        page.click("button:has-text('Ask')")
        page.wait_for_url("**/sessions/*/")
        # The first turn shows up while the second LLM call is still pending.
        page.wait_for_selector("#turn-0 >> text=Which column holds names?")
        assert page.is_visible("text=working")
        page.wait_for_selector("#session-status:has-text('Answered')", timeout=30_000)
        assert page.inner_text("#final-sql") == "SELECT count(*) FROM singer"
        # The poll that saw the session end brought its actions too, without a reload.
        assert page.is_visible("#promote-form >> text=Promote to exemplar")
        assert page.is_visible("#turn-1 >> td:has-text('6')")
        page.screenshot(path=str(tmp_path / "session.png"), full_page=True)
    finally:
        worker.stop()
