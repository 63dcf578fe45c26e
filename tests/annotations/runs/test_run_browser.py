import pytest

from annotations.runs import services
from tests.browser import log_in
from tests.conftest import SPIDER_DIR
from tests.support.worker import WorkerProcess, purge_broker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.shared_data]


def test_launch_a_small_run_in_the_browser_and_watch_it_finish(page, live_server, staff, replay_llm, tmp_path):
    purge_broker()
    worker = WorkerProcess(tmp_path).start()
    try:
        dataset = services.dataset_import(kind="spider", path=SPIDER_DIR, name="spider-dev", build_indexes=False)
        q0, q1 = dataset.questions.filter(db_id="concert_singer").order_by("index")[:2]
        replay_llm({"scripts": {
            q0.question: [{"text": f'Thought: a\nAction: ExecuteSQL("{q0.gold_sql}")', "latency_ms": 500},
                          "Thought: ok\nAction: Done"],
            q1.question: [{"text": 'Thought: b\nAction: ExecuteSQL("SELECT 1")', "latency_ms": 500},
                          "Thought: ok\nAction: Done"],
        }})
        log_in(page, live_server, "sam", "pw-sam-123")
        page.goto(f"{live_server.url}/datasets/spider-dev/")
        page.fill("input[name=launch-name]", "two questions")
        page.check("input[name=launch-sample][value=first]")  # the first two, as scripted (random is the default)
        page.fill("input[name=launch-limit]", "2")
        page.fill("input[name=launch-db_ids]", "concert_singer")
        page.click("button:has-text('Start the run')")
        page.wait_for_url("**/runs/*/")
        page.wait_for_selector("#run-ex", timeout=60_000)  # the page refreshes itself when the run is evaluated
        assert page.inner_text("#run-ex") == "50.00%"
        assert page.inner_text("#run-ex-basis").startswith("1 correct out of 2 scored questions. The run has 2")
    finally:
        worker.stop()
