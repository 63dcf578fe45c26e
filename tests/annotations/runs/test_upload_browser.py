"""In a real browser: upload a Spider-shaped dataset archive and follow its import on the progress page until it
is done, then open the dataset; a malformed archive ends with the error on the same page."""

import pytest

from agent.models import ImportJob
from annotations.runs.models import Dataset
from tests.browser import log_in
from tests.support.uploads import spider_zip
from tests.support.worker import WorkerProcess, purge_broker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_upload_a_dataset_and_follow_its_progress(page, live_server, staff, upload_dir, tmp_path):
    archive = tmp_path / "spider_small.zip"
    archive.write_bytes(spider_zip(tmp_path))
    purge_broker()
    log_in(page, live_server, "sam", "pw-sam-123")
    page.goto(f"{live_server.url}/datasets/")
    page.click("#dataset-upload summary")
    page.select_option("select[name=kind]", "spider")
    page.fill("input[name=name]", "small")
    page.set_input_files("input[name=archive]", str(archive))
    page.click("button:has-text('Upload and import')")
    page.wait_for_url("**/imports/*/")
    # No worker yet: the job waits, and the page says so while it polls.
    assert "Waiting for a worker" in page.inner_text("#import-job")
    worker = WorkerProcess(tmp_path, T2S_DATA_DIRS=str(upload_dir)).start()
    try:
        # The page follows the job by itself (htmx polling) until the link to the dataset appears.
        page.wait_for_selector("#import-result", timeout=60_000)
        assert page.inner_text("#import-status") == "done"
        assert "imported 3 questions" in page.inner_text("#import-job")
        job = ImportJob.objects.get()
        assert job.done == job.total == 3  # the last progress report
        page.screenshot(path=str(tmp_path / "import.png"), full_page=True)
        page.click("#import-result")
        page.wait_for_url("**/datasets/small/")
        assert Dataset.objects.get(name="small").executable_count == 3

        # A malformed archive: the job fails with the reason on the same page, and nothing is stored.
        bad = tmp_path / "bad.zip"
        bad.write_bytes(spider_zip(tmp_path, questions=[{"db_id": "concert_singer", "question": "q"}]))
        page.goto(f"{live_server.url}/datasets/")
        page.click("#dataset-upload summary")
        page.fill("input[name=name]", "bad")
        page.set_input_files("input[name=archive]", str(bad))
        page.click("button:has-text('Upload and import')")
        page.wait_for_selector("#import-error", timeout=60_000)
        assert "entry 1: needs 'query'" in page.inner_text("#import-error")
        assert not Dataset.objects.filter(name="bad").exists()
    finally:
        worker.stop()
