"""Blind double annotation: who sees whose labels, where, and what agreement counts."""

import json

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from agent.roles import CURATOR
from annotations import policies
from annotations.labels import selectors, services
from annotations.labels.models import Label
from tests.conftest import group_of_testers as granted_group

pytestmark = pytest.mark.django_db


def category(key):
    return selectors.default_taxonomy_version().categories.get(key=key)


def item(run, index):
    return run.items.get(question__index=index)


@pytest.fixture
def curator(django_user_model):
    user = django_user_model.objects.create_user("cora", "cora@example.com", "pw-cora-123")
    user.groups.add(Group.objects.get(name=CURATOR), granted_group())
    return user


@pytest.fixture
def queue(tiny_run, curator):
    return services.queue_create(run=tiny_run, name="double", taxonomy_version=selectors.default_taxonomy_version(),
                                 user=curator, max_annotators=2)


def api_labels(client, run):
    response = client.get(f"/api/labels/?run={run.pk}")
    assert response.status_code == 200
    body = response.json()
    return {(lab["annotator"], lab["category_key"]) for lab in (body["results"] if "results" in body else body)}


def export_labels(client, run):
    lines = b"".join(client.get(reverse("labels:export", args=[run.pk, "jsonl"])).streaming_content).splitlines()
    return {(row["annotator"], row["category"]) for row in map(json.loads, lines)}


def test_a_queue_with_two_annotators_is_blind_by_default_and_one_with_one_is_not(tiny_run, curator, queue):
    single = services.queue_create(run=tiny_run, name="single", user=curator, max_annotators=1,
                                   taxonomy_version=selectors.default_taxonomy_version())
    assert queue.is_blind and not single.is_blind


def test_others_labels_are_hidden_until_labelled_and_revealed_everywhere(annotators, tiny_run, queue, client):
    alice, bob, _ = annotators
    target = item(tiny_run, 2)
    services.label_toggle(item=target, category=category("selected_column"), user=alice)
    client.force_login(bob)
    # Before labelling: not on the queue page, the review page, the API, the export or the dashboard.
    assert "Selected Column · alice" not in client.get(queue.get_absolute_url()).content.decode()
    review = client.get(reverse("labels:review", args=[target.pk]) + f"?queue={queue.pk}").content.decode()
    assert "once you have labelled this question" in review and 'data-annotator="alice"' not in review
    assert api_labels(client, tiny_run) == set()
    assert export_labels(client, tiny_run) == set()
    assert selectors.category_distribution(run=tiny_run, user=bob)["labelled"] == 0
    listed = client.get(reverse("labels:questions", args=[tiny_run.pk]) + "?category=selected_column")
    assert "older than 35" not in listed.content.decode()
    # Revealing before labelling is refused.
    client.post(reverse("labels:reveal", args=[target.pk]))
    assert not policies.can_see_others_labels(bob, target)

    services.label_toggle(item=target, category=category("reasoning"), user=bob)
    services.label_toggle(item=target, category=category("filtered_column"), user=bob)
    assert Label.objects.filter(annotator=bob, blind=True).count() == 2  # a second key in the same sitting stays blind
    review = client.get(reverse("labels:review", args=[target.pk])).content.decode()
    assert 'id="reveal-others"' in review and 'data-annotator="alice"' not in review
    assert api_labels(client, tiny_run) == {("bob", "reasoning"), ("bob", "filtered_column")}

    client.post(reverse("labels:reveal", args=[target.pk]))
    review = client.get(reverse("labels:review", args=[target.pk])).content.decode()
    assert 'data-annotator="alice"' in review and "Selected Column" in review
    assert ("alice", "selected_column") in api_labels(client, tiny_run)
    assert ("alice", "selected_column") in export_labels(client, tiny_run)
    assert "Selected Column · alice" in client.get(queue.get_absolute_url()).content.decode()
    # A change after seeing the others' labels makes bob's rating of the question not blind: agreement drops it.
    services.label_toggle(item=target, category=category("filtered_column"), user=bob)
    assert not Label.objects.filter(annotator=bob, blind=True).exists()
    figures = selectors.run_agreement(run=tiny_run, annotator_ids=[alice.pk, bob.pk])
    assert figures["items"] == 0 and figures["not_blind"] == 1


def test_viewers_see_labels_only_after_adjudication_adjudicators_always(annotators, tiny_run, queue, viewer,
                                                                         curator, client):
    alice, bob, _ = annotators
    target = item(tiny_run, 2)
    services.label_toggle(item=target, category=category("selected_column"), user=alice)
    services.label_toggle(item=target, category=category("reasoning"), user=bob)
    client.force_login(viewer)
    assert api_labels(client, tiny_run) == set() and export_labels(client, tiny_run) == set()
    review = client.get(reverse("labels:review", args=[target.pk])).content.decode()
    assert "once the question is adjudicated" in review
    client.force_login(curator)
    assert api_labels(client, tiny_run) == {("alice", "selected_column"), ("bob", "reasoning")}
    services.label_adjudicate(item=target, user=curator, categories=[category("reasoning")])
    client.force_login(viewer)
    assert api_labels(client, tiny_run) == {("alice", "selected_column"), ("bob", "reasoning"), ("cora", "reasoning")}
    assert 'data-annotator="alice"' in client.get(reverse("labels:review", args=[target.pk])).content.decode()


def test_the_second_annotator_gets_a_question_the_first_labelled_and_still_holds(annotators, tiny_run, queue):
    alice, bob, carol = annotators
    first = item(tiny_run, 1)
    services.reservation_take(item=first, user=alice)
    services.label_toggle(item=first, category=category("distinct"), user=alice)
    assert selectors.queue_next_item(queue=queue, user=bob) == first  # alice counts once, not twice
    services.reservation_take(item=first, user=bob)
    assert selectors.queue_next_item(queue=queue, user=carol) == item(tiny_run, 2)  # two people on it: full


def test_the_queue_form_offers_blind_checked_and_the_api_says_which_labels_are_blind(annotators, tiny_run, curator,
                                                                                    client):
    client.force_login(curator)
    form = client.get(reverse("labels:queue_list")).content.decode()
    assert 'name="blind"' in form and "Blind double annotation" in form
    assert "checked" in form.split('name="blind"')[1].split(">")[0]  # on by default
    client.post(reverse("labels:queue_list"), {
        "name": "open double", "run": tiny_run.pk, "taxonomy_version": selectors.default_taxonomy_version().pk,
        "max_annotators": 2, "difficulty": "", "db_id": "", "join_count": ""})  # checkbox left unticked
    assert not tiny_run.label_queues.get(name="open double").is_blind
    services.label_toggle(item=item(tiny_run, 1), category=category("distinct"), user=annotators[0])
    client.force_login(annotators[0])
    [label] = client.get(f"/api/labels/?run={tiny_run.pk}").json()["results"]
    assert label["blind"] is True


def test_a_corrected_gold_on_a_blind_question_is_hidden_from_the_dashboard_too(annotators, tiny_run, queue,
                                                                             curator, client):
    alice, bob, _ = annotators
    target = item(tiny_run, 2)
    label = services.label_toggle(item=target, category=category("golden_wrong"), user=alice)
    services.label_update(label=label, user=alice, corrected_sql="SELECT country FROM singer WHERE age > 35")
    assert selectors.run_ex_with_corrections(run=tiny_run, user=bob)["corrected_items"] == 0
    client.force_login(bob)
    assert "Golden Wrong, alice" not in client.get(reverse("labels:dashboard", args=[tiny_run.pk])).content.decode()
    client.force_login(curator)
    assert "Golden Wrong, alice" in client.get(reverse("labels:dashboard", args=[tiny_run.pk])).content.decode()
