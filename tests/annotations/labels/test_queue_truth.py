"""Queues tell each annotator the truth: complete means enough annotators, each one's own share and what is left
for them, the header moves as they label, creators find their queues, guidelines reach annotators, and a blind
queue's suggestion figures give nobody's labels away."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from agent.roles import CURATOR
from annotations.labels import selectors, services
from annotations.labels.models import SuggestionEvent
from tests.conftest import group_of_testers

pytestmark = pytest.mark.django_db


def category(key):
    return selectors.default_taxonomy_version().categories.get(key=key)


@pytest.fixture
def curator(django_user_model):
    user = django_user_model.objects.create_user("cora", "cora@example.com", "pw-cora-123")
    user.groups.add(Group.objects.get(name=CURATOR), group_of_testers())
    return user


@pytest.fixture
def double(tiny_run, curator):
    return services.queue_create(run=tiny_run, name="double", taxonomy_version=selectors.default_taxonomy_version(),
                                 user=curator, max_annotators=2,
                                 guidelines="Label Golden Wrong only when you can write the right query.")


def label_all(run, user, key="reasoning"):
    for it in run.items.filter(ex=False):
        services.label_toggle(item=it, category=category(key), user=user)


def test_one_annotator_done_of_two_is_not_complete_and_the_second_sees_all_left(
        client, annotators, tiny_run, double):
    alice, bob, _ = annotators
    label_all(tiny_run, alice)
    assert selectors.queue_progress(queue=double, user=alice) == {
        "total": 4, "complete": 0, "mine": 4, "left": 0, "needed": 2, "percent": 0}
    assert selectors.queue_progress(queue=double, user=bob) == {
        "total": 4, "complete": 0, "mine": 0, "left": 4, "needed": 2, "percent": 0}
    client.force_login(bob)
    page = client.get(double.get_absolute_url()).content.decode()
    assert "0 / 4 complete (2 annotators each)" in page and "0 done by you" in page and "4 left for you" in page
    assert "<strong>alice</strong> 4" in page  # per annotator (counts, no categories)
    listed = client.get(reverse("labels:queue_list")).content.decode()
    assert "0 / 4 complete (2 annotators each) · 0 done by you · 4 left for you" in listed
    label_all(tiny_run, bob)
    assert selectors.queue_progress(queue=double, user=bob)["complete"] == 4


def test_the_review_header_moves_as_the_annotator_labels(client, annotators, tiny_run, double):
    alice = annotators[0]
    target = tiny_run.items.filter(ex=False).first()
    client.force_login(alice)
    review = client.get(reverse("labels:review", args=[target.pk]) + f"?queue={double.pk}").content.decode()
    assert "0 done by you" in review and "4 left for you" in review
    response = client.post(reverse("labels:toggle", args=[target.pk, category("reasoning").pk])
                           + f"?queue={double.pk}", HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert 'id="queue-progress" hx-swap-oob="true"' in body
    assert "1 done by you" in body and "3 left for you" in body


def test_the_creator_finds_the_queue_and_annotators_read_its_guidelines(
        client, annotators, tiny_run, double, curator):
    client.force_login(curator)
    listed = client.get(reverse("labels:queue_list")).content.decode()
    assert 'id="queues-created"' in listed and double.get_absolute_url() in listed
    client.force_login(annotators[0])
    assert "Label Golden Wrong only when you can write" in client.get(double.get_absolute_url()).content.decode()
    target = tiny_run.items.filter(ex=False).first()
    review = client.get(reverse("labels:review", args=[target.pk]) + f"?queue={double.pk}").content.decode()
    assert 'id="queue-guidelines"' in review and "Label Golden Wrong only when you can write" in review


def test_the_api_takes_and_returns_guidelines(client, tiny_run, curator):
    client.force_login(curator)
    made = client.post("/api/queues/", {"name": "q", "run": tiny_run.pk,
                                        "taxonomy_version": selectors.default_taxonomy_version().pk,
                                        "guidelines": "Read the evidence first."}, content_type="application/json")
    assert made.status_code == 201 and made.json()["guidelines"] == "Read the evidence first."


def test_suggestion_acceptance_in_a_blind_queue_shows_no_one_elses_labels_until_revealed(
        client, annotators, tiny_run, double, curator):
    alice, bob, _ = annotators
    target = tiny_run.items.filter(ex=False).first()
    services.suggestions_record(item=target, user=alice,
                                suggestions=[type("S", (), {"key": "selected_column", "reason": "r"})()])
    services.label_toggle(item=target, category=category("selected_column"), user=alice)
    assert SuggestionEvent.objects.get(user=alice).accepted

    def shown(user):
        return {r["key"]: (r["shown"], r["accepted"]) for r in selectors.suggestion_acceptance(run=tiny_run,
                                                                                               user=user)}
    assert shown(bob) == {} and shown(curator) == {"selected_column": (1, 1)}
    client.force_login(bob)
    for url in (reverse("labels:overview"), reverse("labels:dashboard", args=[tiny_run.pk])):
        assert "Selected Column</td>" not in client.get(url).content.decode(), url
    services.label_toggle(item=target, category=category("reasoning"), user=bob)
    services.labels_reveal(item=target, user=bob)
    assert shown(bob) == {"selected_column": (1, 1)}


def test_verdicts_on_a_run_answer_reach_its_review_page_as_blind_as_labels(client, annotators, tiny_run, double):
    from agent.models import AgentSession, AnswerFeedback

    alice, bob, _ = annotators
    target = tiny_run.items.filter(ex=False).first()
    target.session = AgentSession.objects.create(database=target.question.database, question="q",
                                                 status="answered", final_sql=target.predicted_sql)
    target.save(update_fields=["session"])
    AnswerFeedback.objects.create(session=target.session, author=alice, verdict="wrong",
                                  corrected_sql="SELECT DISTINCT country FROM singer")
    url = reverse("labels:review", args=[target.pk]) + f"?queue={double.pk}"
    client.force_login(alice)
    assert "SELECT DISTINCT country FROM singer</code>" in client.get(url).content.decode()
    client.force_login(bob)  # blind: not before he labelled and revealed
    assert 'id="answer-verdicts"' not in client.get(url).content.decode()
    services.label_toggle(item=target, category=category("reasoning"), user=bob)
    services.labels_reveal(item=target, user=bob)
    assert "by alice" in client.get(url).content.decode()
