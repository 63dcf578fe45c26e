"""Double annotation in a browser: the second annotator is told the truth (nothing complete, all left for them),
the header moves as they label, the creator follows the queue, and the suggestion figures stay blind."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from agent.roles import CURATOR
from annotations.labels import selectors, services
from tests.annotations.labels.conftest import make_annotator
from tests.browser import log_in
from tests.conftest import group_of_testers as granted_group

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_double_annotation_progress_and_blind_suggestions(browser, live_server, tiny_run, django_user_model):
    alice = make_annotator(django_user_model, "alice")
    make_annotator(django_user_model, "bob")
    cora = django_user_model.objects.create_user("cora", "cora@example.com", "pw-cora-123")
    cora.groups.add(Group.objects.get(name=CURATOR), granted_group())
    queue = services.queue_create(run=tiny_run, name="double", user=cora, max_annotators=2,
                                  taxonomy_version=selectors.default_taxonomy_version(),
                                  guidelines="Use Selected Column only for a wrong SELECT list.")
    selected = selectors.default_taxonomy_version().categories.get(key="selected_column")
    # Alice has done the whole queue, taking a suggestion on every question.
    for it in tiny_run.items.filter(ex=False):
        services.suggestions_record(item=it, user=alice,
                                    suggestions=[type("S", (), {"key": "selected_column", "reason": "r"})()])
        services.label_toggle(item=it, category=selected, user=alice)

    def session(username):
        context = browser.new_context(viewport={"width": 1366, "height": 850})
        page = context.new_page()
        page.set_default_timeout(15_000)
        log_in(page, live_server, username, f"pw-{username}-123")
        return context, page

    bob_context, bob = session("bob")
    bob.goto(live_server.url + reverse("labels:queue_list"))
    assert "0 / 4 complete (2 annotators each) · 0 done by you · 4 left for you" in bob.inner_text("main")
    bob.goto(live_server.url + reverse("labels:overview"))
    # Alice's accepted suggestions would give her labels away: none is counted for Bob
    assert "No suggestion shown yet" in bob.inner_text("#suggestion-acceptance")
    bob.goto(live_server.url + reverse("labels:queue_next", args=[queue.pk]))
    bob.wait_for_selector("#queue-guidelines")
    assert "4 left for you" in bob.inner_text("#queue-progress")
    bob.locator("h2").click()
    bob.keyboard.press("9")  # Reasoning
    bob.wait_for_selector("#queue-progress >> text=1 done by you")  # no reload
    assert "3 left for you" in bob.inner_text("#queue-progress")
    assert "1 / 4 complete" in bob.inner_text("#queue-progress")
    bob_context.close()

    cora_context, cora_page = session("cora")
    cora_page.goto(live_server.url + reverse("labels:queue_list"))
    created = cora_page.inner_text("#queues-created + table")
    assert "double" in created and "1 / 4 complete (2 annotators each)" in created
    cora_page.goto(live_server.url + queue.get_absolute_url())
    assert "alice 4" in cora_page.inner_text("#annotator-progress")
    assert "bob 1" in cora_page.inner_text("#annotator-progress")
    cora_context.close()
