"""Blind double annotation with two annotators, then adjudication, in a real browser (Debian's chromium)."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from agent.roles import CURATOR
from annotations.labels import selectors, services
from annotations.labels.models import Label
from tests.annotations.labels.conftest import make_annotator
from tests.browser import log_in, scripts_ready
from tests.conftest import group_of_testers as granted_group

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def pressed(page, key):
    return page.locator(f'#label-buttons button[data-key="{key}"][aria-pressed="true"]')


def test_blind_double_annotation_then_adjudication(browser, live_server, tiny_run, django_user_model, tmp_path):
    make_annotator(django_user_model, "alice")
    make_annotator(django_user_model, "bob")
    cora = django_user_model.objects.create_user("cora", "cora@example.com", "pw-cora-123")
    cora.groups.add(Group.objects.get(name=CURATOR), granted_group())
    queue = services.queue_create(run=tiny_run, name="double", user=cora, max_annotators=2,
                                  taxonomy_version=selectors.default_taxonomy_version())
    assert queue.is_blind  # on by default with two annotators per question

    def session(username):
        context = browser.new_context(viewport={"width": 1366, "height": 850})
        page = context.new_page()
        page.set_default_timeout(15_000)
        log_in(page, live_server, username, f"pw-{username}-123")
        return context, page

    # Alice takes the first question of the queue and labels it Selected Column (key 7).
    alice_context, alice = session("alice")
    alice.goto(live_server.url + reverse("labels:queue_next", args=[queue.pk]))
    alice.wait_for_selector("text=Which countries do singers come from?")
    alice.locator("h2").click()
    alice.keyboard.press("7")
    pressed(alice, "selected_column").wait_for()

    # Bob, while Alice is still on it, sees none of her labels: not on the queue page, not on the review page.
    bob_context, bob = session("bob")
    bob.goto(live_server.url + queue.get_absolute_url())
    bob.wait_for_selector("#blind-note")
    assert "alice" not in bob.inner_text("table")
    bob.goto(live_server.url + reverse("labels:queue_next", args=[queue.pk]))
    bob.wait_for_selector("text=Which countries do singers come from?")
    assert "once you have labelled this question" in bob.inner_text("#others")
    assert bob.locator('[data-annotator="alice"]').count() == 0
    bob.screenshot(path=str(tmp_path / "bob-blind.png"))
    bob.locator("h2").click()
    bob.keyboard.press("4")  # Distinct
    pressed(bob, "distinct").wait_for()
    # Having labelled it, Bob may ask to see the others' labels (offered at once, without reloading).
    bob.click("#reveal-others")
    bob.wait_for_selector('#others [data-annotator="alice"]')
    assert "Selected Column" in bob.inner_text("#others")
    assert list(Label.objects.filter(is_final=False).values_list("blind", flat=True)) == [True, True]
    alice_context.close()
    bob_context.close()

    # Cora, a Curator, reads the agreement and adjudicates from the adjudication page in adjudication mode.
    cora_context, cora_page = session("cora")
    cora_page.goto(live_server.url + reverse("labels:agreement", args=[tiny_run.pk]))
    cora_page.wait_for_selector("#alpha")
    assert "1" in cora_page.inner_text("#pairs")  # one question both rated
    cora_page.click("text=adjudicate disagreements")
    row = cora_page.locator("#adjudication tbody tr")
    row.first.wait_for()
    assert row.count() == 1
    text = row.first.inner_text()
    assert "Selected Column" in text and "Distinct" in text and "selected_column" not in text
    assert "SELECT DISTINCT country FROM singer" in text and "wrong result" in text
    cora_page.screenshot(path=str(tmp_path / "adjudication.png"), full_page=True)
    row.first.locator("a[role=button]").click()
    cora_page.wait_for_selector("#adjudication-mode")
    scripts_ready(cora_page)
    assert cora_page.locator('#others [data-annotator="alice"]').count() == 1
    assert cora_page.locator('#others [data-annotator="bob"]').count() == 1
    cora_page.locator("h2").click()
    cora_page.keyboard.press("4")
    pressed(cora_page, "distinct").wait_for()
    cora_page.screenshot(path=str(tmp_path / "adjudication-mode.png"))
    final = Label.objects.get(is_final=True)
    assert final.category.key == "distinct" and final.annotator == cora
    cora_page.goto(live_server.url + reverse("labels:adjudication", args=[tiny_run.pk]))
    assert "Distinct" in cora_page.inner_text("#adjudication tbody tr td:nth-child(7)")
    cora_context.close()
