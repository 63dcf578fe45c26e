"""In the browser: a short predictions file is reported before scoring, and both choices score it as chosen."""

import pytest

from agent.roles import OPERATOR
from tests.annotations.runs.test_short_predictions import gold_lines
from tests.browser import log_in
from tests.conftest import give_roles

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def eager_celery():
    from t2s_site.celery import app

    app.conf.task_always_eager = True  # the live server runs in this process: evaluation runs in its request
    yield
    app.conf.task_always_eager = False


def upload(page, live_server, dataset, tmp_path, name: str, text: str) -> None:
    path = tmp_path / f"{name}.txt"
    path.write_text(text)
    page.goto(f"{live_server.url}{dataset.get_absolute_url()}")
    page.fill("input[name=name]", name)
    page.set_input_files("input[name=file]", str(path))
    page.click("button:has-text('Import and evaluate')")
    page.wait_for_url("**/runs/*/")


def test_short_upload_warns_then_scores_as_wrong_or_as_subset(page, live_server, user, built_dataset, tmp_path,
                                                              eager_celery):
    dataset = built_dataset(10)
    give_roles(user, OPERATOR)
    log_in(page, live_server, "ana", "pw-ana-123")

    upload(page, live_server, dataset, tmp_path, "as wrong", gold_lines(dataset, 4, broken=(1,)))
    assert page.inner_text("#prediction-counts") == \
        "4 predictions for 10 questions: 6 missing (1 of the 4 malformed)."
    assert "line 2: expected 'SQL<TAB>db_id'" in page.inner_text("#import-issues")  # listed, open
    assert not page.is_visible("#run-ex")  # nothing scored yet
    page.click("#missing-wrong")
    page.wait_for_selector("#run-ex")
    assert page.inner_text("#run-ex") == "30.00%"
    assert page.inner_text("#missing-choice") == "scored as wrong"

    upload(page, live_server, dataset, tmp_path, "as subset", gold_lines(dataset, 4, broken=(1,)))
    page.click("#missing-subset")
    page.wait_for_selector("#run-ex")
    assert page.inner_text("#run-ex") == "75.00% subset: 4 of 10 questions"
    assert page.inner_text("#missing-choice") == "left out: only the given subset is scored"
    assert "4 of the dataset's 10 questions in this run" in page.inner_text("#prediction-counts")
