"""In a real browser: a Curator exports a Chinook set, uploads the file again and then a copy naming a database
not registered here; the first maps to chinook and adds no exemplar, the second names the unmatched database,
and its set page says which exemplar cannot run here while that exemplar's steps offer no Run button."""

import json

import pytest

from agent.roles import CURATOR, VIEWER
from annotations.exemplars import services
from annotations.models import Exemplar, ExemplarSet
from tests.browser import log_in
from tests.conftest import give_roles

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_exported_set_uploaded_again_maps_and_does_not_duplicate(page, live_server, demo_database, tmp_path,
                                                                    django_user_model):
    from tests.conftest import seed_taxonomy_and_roles

    seed_taxonomy_and_roles()
    author = give_roles(django_user_model.objects.create_user("ana", password="pw-12345-x"), CURATOR, VIEWER)
    give_roles(django_user_model.objects.create_user("cleo", password="pw-12345-x"), CURATOR, VIEWER)
    exemplar = services.exemplar_create(user=author, database=demo_database, question="How many artists?")
    services.step_add(exemplar=exemplar, user=author, thought="Count.", action='ExecuteSQL("SELECT COUNT(*) FROM Artist")')
    services.step_add(exemplar=exemplar, user=author, thought="Done.", action="Done")
    services.exemplar_submit(exemplar=exemplar, user=author)
    reviewer = django_user_model.objects.get(username="cleo")
    services.exemplar_review(exemplar=exemplar, user=reviewer, approve=True)
    chinook_set = services.set_create(name="chinook-set", user=reviewer)
    services.set_publish(exemplar_set=chinook_set, exemplars=[exemplar], user=reviewer)
    pool = Exemplar.objects.count()

    log_in(page, live_server, "cleo", "pw-12345-x")
    page.goto(f"{live_server.url}/exemplars/sets/{chinook_set.pk}/v1/")
    with page.expect_download() as download:
        page.click("text=Export JSON")
    exported = tmp_path / "chinook-set.json"
    download.value.save_as(exported)

    page.goto(f"{live_server.url}/exemplars/sets/upload/")
    page.set_input_files("input[name=file]", str(exported))
    page.fill("input[name=name]", "chinook-again")
    page.click("main button:has-text('Upload and import')")
    page.wait_for_url("**/exemplars/sets/*/")
    text = page.inner_text("main")
    assert "Mapped to registered databases: chinook (1)." in text
    assert "1 exemplar already here with the same content reused, not duplicated." in text
    assert page.locator("#set-unrunnable").count() == 0
    assert Exemplar.objects.count() == pool

    doc = json.loads(exported.read_text())
    doc["exemplars"][0]["database"] = "academic"
    elsewhere = tmp_path / "academic-set.json"
    elsewhere.write_text(json.dumps(doc))
    page.goto(f"{live_server.url}/exemplars/sets/upload/")
    page.set_input_files("input[name=file]", str(elsewhere))
    page.fill("input[name=name]", "academic-set")
    page.click("main button:has-text('Upload and import')")
    page.wait_for_url("**/exemplars/sets/*/")
    assert "No registered database matched academic (1 exemplar): their tools cannot run here." in \
        page.inner_text("main")
    assert "on academic" in page.inner_text("#set-unrunnable")
    stranger = Exemplar.objects.get(pk=ExemplarSet.objects.get(name="academic-set").versions.get()
                                    .exemplars[0]["exemplar_id"])
    page.click(f"#set-unrunnable a[href='/exemplars/{stranger.pk}/']")
    page.wait_for_url(f"**/exemplars/{stranger.pk}/")
    assert "its tools cannot run here" in page.inner_text("main")
    assert page.locator("button:text-is('Run')").count() == 0
