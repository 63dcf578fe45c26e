"""In a real browser, with no admin page: a Data admin creates a workspace and adds a team to it; its Operator
imports a small Spider-shaped dataset into it and imports predictions as a run; the Curator and two Annotators
of the workspace see the run at once. Switching accounts goes through the login page of a signed-in browser."""

import pytest

from agent.roles import ANNOTATOR, CURATOR, DATA_ADMIN, OPERATOR, VIEWER
from annotations.runs.models import Dataset, Run
from tests.browser import log_in
from tests.conftest import give_roles
from tests.support.uploads import spider_zip
from tests.support.worker import WorkerProcess, purge_broker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-12345-x"


def switch_to(page, live_server, username: str, previous: str) -> None:
    """Sign in as someone else from a signed-in browser: the login page says who is signed in and offers it."""
    page.goto(f"{live_server.url}/accounts/login/")
    assert f"Signed in as {previous}; sign in as someone else" in page.inner_text("main")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("#login-form button:has-text('Log in as someone else')")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    assert f"Log out {username}" in page.inner_text("nav")


def test_a_team_sees_a_run_imported_into_its_workspace(page, live_server, upload_dir, tmp_path, django_user_model):
    from tests.conftest import seed_taxonomy_and_roles

    seed_taxonomy_and_roles()
    for name, role in [("dana", DATA_ADMIN), ("opal", OPERATOR), ("cora", CURATOR), ("ann1", ANNOTATOR),
                       ("ann2", ANNOTATOR), ("olga", CURATOR)]:
        give_roles(django_user_model.objects.create_user(name, password=PASSWORD), role, VIEWER)
    visited: list[str] = []
    page.on("request", lambda request: visited.append(request.url))
    archive = tmp_path / "spider_small.zip"
    archive.write_bytes(spider_zip(tmp_path))
    purge_broker()

    log_in(page, live_server, "dana", PASSWORD)
    page.goto(f"{live_server.url}/workspaces/")
    page.click("summary:has-text('Create a workspace')")
    page.fill("input[name=slug]", "team")
    page.fill("input[name=name]", "Team")
    page.click("button:has-text('Create')")
    page.wait_for_url("**/workspaces/team/")
    for name, role in [("opal", "admin"), ("cora", "member"), ("ann1", "member"), ("ann2", "member")]:
        page.select_option("#add-member select[name=kind]", "user")
        page.fill("#add-member input[name=name]", name)
        page.select_option("#add-member select[name=role]", role)
        page.click("button:has-text('Add to the workspace')")
        page.wait_for_selector(f"#members td:text-is('{name}')")
    assert "Operator" in page.inner_text("#members") and "Annotator" in page.inner_text("#members")

    switch_to(page, live_server, "opal", "dana")
    page.goto(f"{live_server.url}/datasets/")
    page.click("#dataset-upload summary")
    page.select_option("select[name=kind]", "spider")
    page.fill("input[name=name]", "spider-small")
    page.select_option("select[name=workspace]", "team")
    page.set_input_files("input[name=archive]", str(archive))
    page.click("button:has-text('Upload and import')")
    page.wait_for_url("**/imports/*/")
    worker = WorkerProcess(tmp_path, T2S_DATA_DIRS=str(upload_dir)).start()
    try:
        page.wait_for_selector("#import-result", timeout=60_000)
        assert "imported 3 questions, 3 executable here" in page.inner_text("#import-job")
        page.click("#import-result")
        page.wait_for_url("**/datasets/spider-small/")
        predictions = tmp_path / "pred.txt"
        predictions.write_text("SELECT count(*) FROM singer\nSELECT 1\nSELECT name FROM stadium\n")
        page.fill("input[name=name]", "baseline")
        page.set_input_files("input[name=file]", str(predictions))
        page.click("button:has-text('Import and evaluate')")
        page.wait_for_url("**/runs/*/")
        run = Run.objects.get(name="baseline")
        assert Dataset.objects.get(name="spider-small").workspace.slug == "team"

        previous = "opal"
        for name in ("cora", "ann1", "ann2"):
            switch_to(page, live_server, name, previous)
            previous = name
            page.goto(f"{live_server.url}/runs/")
            page.click(f"a[href='/runs/{run.pk}/']")
            page.wait_for_url(f"**/runs/{run.pk}/")
            assert "baseline" in page.inner_text("main")
        # A Curator outside the workspace sees neither the run nor the dataset.
        switch_to(page, live_server, "olga", previous)
        page.goto(f"{live_server.url}/runs/")
        assert page.locator(f"a[href='/runs/{run.pk}/']").count() == 0
        assert page.goto(f"{live_server.url}/runs/{run.pk}/").status == 404
    finally:
        worker.stop()
    assert not [url for url in visited if "/admin/" in url]
