"""Taxonomy versions, labels, permissions, reservations and the per-question annotator limit, pages and API."""

import json

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from annotations.labels import selectors, services
from annotations.labels.models import Label, Reservation, SuggestionEvent, Taxonomy

pytestmark = pytest.mark.django_db


def category(key):
    return selectors.default_taxonomy_version().categories.get(key=key)


def item(run, index):
    return run.items.get(question__index=index)


def test_the_papers_nine_categories_are_seeded_with_shortcuts():
    version = selectors.default_taxonomy_version()
    cats = list(version.categories.all())
    assert [c.name for c in cats] == ["Golden Wrong", "Golden Empty", "Ambiguous", "Distinct", "Format",
                                      "Lacking Info", "Selected Column", "Filtered Column", "Reasoning"]
    assert [c.shortcut for c in cats] == list(range(1, 10))
    assert {c.group for c in cats[:6]} == {"Mismatch"} and {c.group for c in cats[6:]} == {"Error"}
    assert all(c.definition for c in cats)


def test_editing_a_taxonomy_makes_a_new_version_and_never_changes_the_old(annotators, tiny_run):
    old = selectors.default_taxonomy_version()
    label = services.label_toggle(item=item(tiny_run, 1), category=category("distinct"), user=annotators[0])
    new = services.taxonomy_version_create(
        taxonomy=old.taxonomy, note="merge", user=annotators[0],
        categories=[{"key": "mismatch", "name": "Mismatch", "group": "Mismatch", "definition": "d", "shortcut": 1},
                    {"key": "error", "name": "Error", "group": "Error", "definition": "d", "shortcut": 2}])
    assert new.number == old.number + 1 and selectors.default_taxonomy_version() == new
    assert old.categories.count() == 9
    label.refresh_from_db()
    assert label.taxonomy_version == old
    with pytest.raises(ValidationError):
        old.save()
    with pytest.raises(ValidationError):
        c = old.categories.first()
        c.name = "renamed"
        c.save()
    with pytest.raises(ValidationError):
        services.taxonomy_version_create(taxonomy=Taxonomy.objects.get(), categories=[
            {"key": "a", "name": "A", "shortcut": 1}, {"key": "b", "name": "B", "shortcut": 1}])


def test_a_viewer_without_the_label_permission_cannot_label(viewer, tiny_run, client):
    with pytest.raises(PermissionDenied):
        services.label_toggle(item=item(tiny_run, 1), category=category("distinct"), user=viewer)
    client.force_login(viewer)
    url = reverse("labels:toggle", args=[item(tiny_run, 1).pk, category("distinct").pk])
    assert client.post(url).status_code == 403
    page = client.get(reverse("labels:review", args=[item(tiny_run, 1).pk]))
    assert page.status_code == 200 and b"labelling needs the Annotator role" in page.content
    api = client.post("/api/labels/", {"item": item(tiny_run, 1).pk, "category": category("distinct").pk})
    assert api.status_code == 403
    assert not Label.objects.exists()


def test_an_annotator_cannot_edit_another_annotators_label(annotators, tiny_run, client):
    alice, bob = annotators[:2]
    label = services.label_toggle(item=item(tiny_run, 1), category=category("distinct"), user=alice, note="hers")
    with pytest.raises(PermissionDenied):
        services.label_update(label=label, user=bob, note="mine now")
    # Bob's toggle of the same category gives him his own label; hers is untouched.
    services.label_toggle(item=item(tiny_run, 1), category=category("distinct"), user=bob)
    assert Label.objects.filter(item=item(tiny_run, 1)).count() == 2
    client.force_login(bob)
    response = client.patch(f"/api/labels/{label.pk}/", data=json.dumps({"note": "x"}),
                            content_type="application/json")
    assert response.status_code == 403
    label.refresh_from_db()
    assert label.note == "hers"


def test_toggle_adds_and_removes_and_accepts_shown_suggestions(annotators, tiny_run):
    alice = annotators[0]
    it = item(tiny_run, 1)
    services.suggestions_record(item=it, user=alice, suggestions=[
        type("S", (), {"key": "distinct", "reason": "dedup"})(), type("S", (), {"key": "format", "reason": "f"})()])
    label = services.label_toggle(item=it, category=category("distinct"), user=alice, note="n")
    assert label.taxonomy_version == selectors.default_taxonomy_version() and label.note == "n"
    assert services.label_toggle(item=it, category=category("distinct"), user=alice) is None
    assert not Label.objects.exists()
    rates = {r["key"]: r for r in selectors.suggestion_acceptance(run=tiny_run, user=alice)}
    assert rates["distinct"]["accepted"] == 1 and rates["distinct"]["rate"] == 100.0
    assert rates["format"]["accepted"] == 0 and rates["format"]["rate"] == 0.0


def test_two_annotators_on_one_question_of_a_single_annotator_queue(annotators, tiny_run, staff):
    alice, bob = annotators[:2]
    queue = services.queue_create(run=tiny_run, name="q", taxonomy_version=selectors.default_taxonomy_version(),
                                  user=staff, max_annotators=1)
    it = item(tiny_run, 1)
    services.reservation_take(item=it, user=alice)
    # Bob opens the same question: refused, and he cannot label it either (server-side, not only the page).
    with pytest.raises(services.LabelConflict):
        services.reservation_take(item=it, user=bob)
    with pytest.raises(services.LabelConflict):
        services.label_toggle(item=it, category=category("distinct"), user=bob)
    # The queue hands Bob the next question instead.
    assert selectors.queue_next_item(queue=queue, user=bob) == item(tiny_run, 2)
    services.label_toggle(item=it, category=category("distinct"), user=alice)
    # Once Alice's reservation expires her label still holds the question.
    Reservation.objects.filter(user=alice).update(expires_at="2000-01-01T00:00:00Z")
    with pytest.raises(services.LabelConflict):
        services.label_toggle(item=it, category=category("format"), user=bob)
    assert selectors.queue_progress(queue=queue, user=alice) == {"total": 4, "complete": 1, "mine": 1, "left": 3, "needed": 1, "percent": 25}


def test_the_limit_is_shown_as_a_clear_message_on_the_page(annotators, tiny_run, staff, client):
    alice, bob = annotators[:2]
    services.queue_create(run=tiny_run, name="q", taxonomy_version=selectors.default_taxonomy_version(),
                          user=staff, max_annotators=1)
    it = item(tiny_run, 1)
    client.force_login(alice)
    assert client.get(reverse("labels:review", args=[it.pk])).status_code == 200
    assert client.post(reverse("labels:review_start", args=[it.pk])).status_code == 204  # the page's POST on load
    client.force_login(bob)
    page = client.get(reverse("labels:review", args=[it.pk]))
    assert b"already being labelled by 1 other annotator" in page.content
    assert b"review_start" not in page.content and b"/start/" not in page.content
    refused = client.post(reverse("labels:review_start", args=[it.pk]))
    assert refused.status_code == 409 and b"already being labelled" in refused.content
    response = client.post(reverse("labels:toggle", args=[it.pk, category("format").pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and b"already being labelled" in response.content
    assert client.post(reverse("labels:toggle", args=[it.pk, category("format").pk])).status_code == 409
    assert not Label.objects.filter(annotator=bob).exists()


def test_review_page_shows_results_suggestions_and_records_them(annotators, tiny_run, client):
    client.force_login(annotators[0])
    it = item(tiny_run, 2)
    page = client.get(reverse("labels:review", args=[it.pk]))
    html = page.content.decode()
    assert "Names of singers older than 35?" in html and "Selected Column" in html
    assert 'data-suggestion="selected_column"' in html and "diff-row" in html
    # The GET writes nothing; the page's own POST takes the reservation and records what it showed.
    assert not SuggestionEvent.objects.exists() and not Reservation.objects.exists()
    assert reverse("labels:review_start", args=[it.pk]) in html
    assert client.post(reverse("labels:review_start", args=[it.pk])).status_code == 204
    assert SuggestionEvent.objects.filter(category_key="selected_column").exists()
    assert Reservation.objects.filter(item=it, user=annotators[0]).exists()
    assert client.post(reverse("labels:review_leave", args=[it.pk])).status_code == 204
    assert not Reservation.objects.exists()
    golden_empty = client.get(reverse("labels:review", args=[item(tiny_run, 4).pk])).content.decode()
    assert 'data-suggestion="golden_empty"' in golden_empty


def test_note_is_saved_on_its_own_and_corrected_gold_runs_and_changes_ex(annotators, tiny_run, client):
    alice = annotators[0]
    client.force_login(alice)
    it = item(tiny_run, 4)  # gold asks for Peru (empty); the prediction lists every singer
    note_url = reverse("labels:note", args=[it.pk])
    assert b"saved with your first label" in client.post(note_url, {"note": "gold is odd"}).content
    client.post(reverse("labels:toggle", args=[it.pk, category("golden_empty").pk]), {"note": "gold is odd"})
    assert client.post(note_url, {"note": "gold asks for Peru"}).content == b"Note saved on 1 label."
    label = Label.objects.get()
    assert label.note == "gold asks for Peru"
    response = client.post(reverse("labels:corrected", args=[it.pk]), {"corrected_sql": "SELECT name FROM singer"})
    assert b"3 rows" in response.content
    label.refresh_from_db()
    assert label.corrected_ok and label.corrected_row_count == 3
    figures = selectors.run_ex_with_corrections(run=tiny_run)
    assert figures["original"] == 20.0 and figures["ex"] == 40.0 and len(figures["changes"]) == 1
    bad = client.post(reverse("labels:corrected", args=[it.pk]), {"corrected_sql": "DELETE FROM singer"})
    assert b"failed" in bad.content
    with pytest.raises(ValidationError):
        distinct = services.label_toggle(item=it, category=category("distinct"), user=alice)
        services.label_update(label=distinct, user=alice, corrected_sql="SELECT 1")


def blind_queue(run, user, annotators=2):
    return services.queue_create(run=run, name="double", taxonomy_version=selectors.default_taxonomy_version(),
                                 user=user, max_annotators=annotators)


def test_agreement_disagreements_and_adjudication(annotators, tiny_run, staff, client):
    alice, bob, _ = annotators
    blind_queue(tiny_run, staff)
    for user, idx, key in [(alice, 1, "distinct"), (bob, 1, "distinct"), (alice, 2, "selected_column"),
                           (bob, 2, "reasoning"), (alice, 3, "reasoning"), (bob, 3, "reasoning")]:
        services.label_toggle(item=item(tiny_run, idx), category=category(key), user=user)
    assert not Label.objects.filter(blind=False).exists()  # nobody saw another's labels
    figures = selectors.run_agreement(run=tiny_run, annotator_ids=[alice.pk, bob.pk])
    rows = {r["category"].key: r for r in figures["rows"]}
    assert figures["items"] == 3 and figures["not_blind"] == 0
    assert rows["distinct"]["alpha"] == pytest.approx(1.0) and rows["distinct"]["items"] == 3
    # reasoning: alice [0,0,1], bob [0,1,1]: units [0,0],[0,1],[1,1] -> o01 = o10 = 1, n0 = 3, n1 = 3, n = 6:
    # alpha = 1 - (6-1) * 2 / (2*3*3) = 4/9
    assert rows["reasoning"]["alpha"] == pytest.approx(4 / 9)
    [pair] = figures["pairs"]
    assert (pair["first"], pair["second"], pair["items"], pair["agreed"]) == ("alice", "bob", 3, 2)
    client.force_login(staff)
    page = client.get(reverse("labels:agreement", args=[tiny_run.pk])).content.decode()
    assert "Krippendorff" in page and 'id="alpha"' in page
    board = client.get(reverse("labels:adjudication", args=[tiny_run.pk])).content.decode()
    assert board.count("<tr data-item=") == 1 and "Selected Column" in board and "selected_column" not in board
    assert reverse("labels:review", args=[item(tiny_run, 2).pk]) + "?mode=adjudicate" in board
    client.post(reverse("labels:adjudicate", args=[item(tiny_run, 2).pk]), {"category": [category("reasoning").pk]})
    final = Label.objects.get(is_final=True)
    assert final.annotator == staff and final.category.key == "reasoning"
    assert selectors.item_categories(run=tiny_run)[item(tiny_run, 2).pk] == {"reasoning"}
    client.force_login(alice)
    assert client.post(reverse("labels:adjudicate", args=[item(tiny_run, 2).pk])).status_code == 403
    assert client.get(reverse("labels:adjudication", args=[tiny_run.pk])).status_code == 403
    # An annotator can adjudicate a question they labelled: the final row is apart from their own label,
    # and the agreement figures do not move.
    alice.user_permissions.add(Permission.objects.get(codename="adjudicate_label"))
    alice = type(alice).objects.get(pk=alice.pk)  # fresh permission cache
    services.label_adjudicate(item=item(tiny_run, 2), user=alice, categories=[category("selected_column")])
    assert Label.objects.filter(item=item(tiny_run, 2), annotator=alice).count() == 2
    assert list(Label.objects.filter(is_final=True).values_list("category__key", flat=True)) == ["selected_column"]
    again = {r["category"].key: r for r in selectors.run_agreement(
        run=tiny_run, annotator_ids=[alice.pk, bob.pk])["rows"]}
    assert again["reasoning"]["alpha"] == pytest.approx(4 / 9)


def test_adjudication_mode_sets_final_labels_one_key_at_a_time(annotators, tiny_run, staff, client):
    alice, bob, _ = annotators
    blind_queue(tiny_run, staff)
    services.label_toggle(item=item(tiny_run, 2), category=category("selected_column"), user=alice)
    services.label_toggle(item=item(tiny_run, 2), category=category("reasoning"), user=bob)
    client.force_login(staff)
    page = client.get(reverse("labels:review", args=[item(tiny_run, 2).pk]) + "?mode=adjudicate").content.decode()
    assert "Adjudication mode" in page and 'data-annotator="alice"' in page and "Selected Column" in page
    assert reverse("labels:final_toggle", args=[item(tiny_run, 2).pk, category("reasoning").pk]) in page
    client.post(reverse("labels:final_toggle", args=[item(tiny_run, 2).pk, category("reasoning").pk]))
    assert list(Label.objects.filter(is_final=True).values_list("category__key", flat=True)) == ["reasoning"]
    client.post(reverse("labels:final_toggle", args=[item(tiny_run, 2).pk, category("reasoning").pk]))
    assert not Label.objects.filter(is_final=True).exists()
    client.force_login(alice)
    assert client.get(reverse("labels:review", args=[item(tiny_run, 2).pk]) + "?mode=adjudicate").status_code == 403
    assert client.post(reverse("labels:final_toggle", args=[item(tiny_run, 2).pk,
                                                            category("reasoning").pk])).status_code == 403


def test_without_a_blind_queue_a_second_annotators_labels_are_not_blind(annotators, tiny_run):
    alice, bob, _ = annotators
    services.label_toggle(item=item(tiny_run, 1), category=category("distinct"), user=alice)
    services.label_toggle(item=item(tiny_run, 1), category=category("format"), user=bob)
    assert Label.objects.get(annotator=alice).blind and not Label.objects.get(annotator=bob).blind
    figures = selectors.run_agreement(run=tiny_run, annotator_ids=[alice.pk, bob.pk])
    assert figures["items"] == 0 and figures["not_blind"] == 1 and figures["alpha"] is None


def test_queue_pages_dashboard_chart_csv_and_exports(annotators, tiny_run, staff, client):
    client.force_login(staff)
    response = client.post(reverse("labels:queue_list"), {
        "name": "hard ones", "run": tiny_run.pk, "taxonomy_version": selectors.default_taxonomy_version().pk,
        "max_annotators": 1, "difficulty": "", "db_id": "", "join_count": ""})
    queue = tiny_run.label_queues.get()
    assert response.status_code == 302
    first = client.get(reverse("labels:queue_next", args=[queue.pk]))
    assert first.url == reverse("labels:review", args=[item(tiny_run, 1).pk]) + f"?queue={queue.pk}"
    services.label_toggle(item=item(tiny_run, 1), category=category("distinct"), user=staff)
    assert b"1 / 4 complete" in client.get(queue.get_absolute_url()).content
    todo = client.get(queue.get_absolute_url() + "?show=todo").content.decode()
    assert "Which countries" not in todo and "older than 35" in todo
    dashboard = client.get(reverse("labels:dashboard", args=[tiny_run.pk])).content.decode()
    assert "chart-categories" in dashboard and "chartjs/chart.umd.min.js" in dashboard
    csv_text = client.get(reverse("labels:chart_csv", args=[tiny_run.pk, "categories"])).content.decode()
    assert "distinct,Distinct,1,Mismatch · 100.0%" in csv_text
    tables = client.get(reverse("labels:chart_csv", args=[tiny_run.pk, "tables"])).content.decode()
    assert "1,1,25.0,1/4 · 80.00% of questions" in tables and "2,2,0.0,0/1 · 20.00% of questions" in tables
    by_tables = client.get(reverse("labels:questions", args=[tiny_run.pk]) + "?tables=2").content.decode()
    assert "concert in 2014" in by_tables and "older than 35" not in by_tables
    listed = client.get(reverse("labels:questions", args=[tiny_run.pk]) + "?category=distinct").content.decode()
    assert "Which countries" in listed and "older than 35" not in listed
    rows = [json.loads(line) for line in b"".join(
        client.get(reverse("labels:export", args=[tiny_run.pk, "jsonl"])).streaming_content).splitlines()]
    assert rows[0]["annotator"] == "sam" and rows[0]["taxonomy_version"] == 1 and rows[0]["category"] == "distinct"
    assert rows[0]["created_at"]
    csv_export = b"".join(client.get(reverse("labels:export", args=[tiny_run.pk, "csv"])).streaming_content).decode()
    assert csv_export.splitlines()[0].startswith("run,item,question_index") and "sam" in csv_export
    assert client.get(reverse("labels:overview")).status_code == 200


def test_api_labels_page_by_cursor_through_every_label_once(annotators, tiny_run, client):
    alice, bob = annotators[:2]
    for n in (1, 2, 3):
        for who in (alice, bob):
            services.label_toggle(item=item(tiny_run, n), category=category("distinct"), user=who)
        services.label_toggle(item=item(tiny_run, n), category=category("golden_empty"), user=alice)
    client.force_login(alice)
    seen, url = [], "/api/labels/?page_size=2"
    while url:
        body = client.get(url).json()
        assert "count" not in body and len(body["results"]) <= 2  # a cursor page: no COUNT over every label
        seen += [lab["id"] for lab in body["results"]]
        url = body["next"]
    ordered = Label.objects.order_by("item_id", "category__position", "id").values_list("pk", flat=True)
    assert seen == list(ordered) and len(seen) == 9


def test_api_lists_with_filters_creates_and_updates(annotators, tiny_run, client):
    alice, bob = annotators[:2]
    client.force_login(alice)
    created = client.post("/api/labels/", {"item": item(tiny_run, 4).pk, "category": category("golden_empty").pk,
                                           "note": "n", "corrected_sql": "SELECT name FROM singer"})
    assert created.status_code == 201, created.content
    assert created.json()["corrected_row_count"] == 3 and created.json()["taxonomy_version_number"] == 1
    services.label_toggle(item=item(tiny_run, 1), category=category("distinct"), user=bob)
    listed = client.get("/api/labels/", {"run": tiny_run.pk, "annotator": "bob"}).json()
    assert [lab["category_key"] for lab in listed["results"]] == ["distinct"]
    assert len(client.get("/api/labels/", {"category": "golden_empty"}).json()["results"]) == 1
    label_id = created.json()["id"]
    updated = client.patch(f"/api/labels/{label_id}/", data=json.dumps({"note": "better"}),
                           content_type="application/json")
    assert updated.status_code == 200 and updated.json()["note"] == "better"


def test_a_corrected_gold_or_prediction_the_guard_cannot_check_is_refused_not_run(annotators, tiny_run):
    """Issue #27, finding 2 on the annotation paths: a corrected gold and a run item's re-executed queries go
    through the same guard, which refuses what it cannot read instead of letting the engine have it."""
    from annotations.runs.selectors import run_item_with_results

    attack = 'SELECT CAST(1 AS) AS a, "sqlite_source_id"() AS b'
    it = item(tiny_run, 4)
    label = services.label_toggle(item=it, category=category("golden_empty"), user=annotators[0])
    label = services.label_update(label=label, user=annotators[0], corrected_sql=attack)
    assert label.corrected_ok is False and "could not be checked" in label.corrected_error
    assert not selectors.run_ex_with_corrections(run=tiny_run)["changes"]
    it.predicted_sql = attack
    results = run_item_with_results(item=it)
    assert results["pred"] is None and "could not be checked" in results["pred_error"]
