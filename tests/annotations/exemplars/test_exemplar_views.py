import json

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from agent.models import AgentSession, Turn
from agent.roles import CURATOR
from annotations.exemplars import services
from annotations.models import Exemplar, ExemplarSetVersion

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_console_flow_over_http(client, demo_database, author, reviewer):
    client.force_login(author)
    response = client.post(reverse("exemplars:exemplar_new"),
                           {"database": "chinook", "question": "How many albums has AC/DC?"})
    exemplar = Exemplar.objects.get(database=demo_database)
    assert response.url == exemplar.get_absolute_url()
    page = client.get(exemplar.get_absolute_url()).content.decode()
    assert 'id="add-step"' in page and '<option value="Artist.Name">' in page  # schema autocomplete
    response = client.post(reverse("exemplars:step_add", args=[exemplar.pk]),
                           {"thought": "Find the artist.", "tool": "SearchValue", "value": "AC/DC", "table": "Artist"},
                           **HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and 'id="console"' in html
    assert "SearchValue(&quot;AC/DC&quot;, table=&quot;Artist&quot;)" in html and "Artist.Name" in html
    client.post(reverse("exemplars:step_add", args=[exemplar.pk]),
                {"thought": "Count.", "tool": "ExecuteSQL",
                 "sql": "SELECT COUNT(*) FROM Album WHERE ArtistId = 1"}, **HTMX)
    html = client.post(reverse("exemplars:step_add", args=[exemplar.pk]), {"thought": "", "tool": "Done"},
                       **HTMX).content.decode()
    assert "Final SQL" in html and "executes" in html
    html = client.post(reverse("exemplars:final_sql", args=[exemplar.pk]), {"final_sql": "SELECT nope FROM Album"},
                       **HTMX).content.decode()
    assert "It does not execute" in html
    client.post(reverse("exemplars:final_sql", args=[exemplar.pk]),
                {"final_sql": "SELECT COUNT(*) FROM Album WHERE ArtistId = 1"}, **HTMX)
    bad = client.post(reverse("exemplars:step_add", args=[exemplar.pk]),
                      {"thought": "", "tool": "Raw", "action": "ExecuteSQL("}, **HTMX).content.decode()
    assert "flash-error" in bad
    client.post(reverse("exemplars:exemplar_submit", args=[exemplar.pk]))
    exemplar.refresh_from_db()
    assert exemplar.state == Exemplar.State.IN_REVIEW
    # the author is no reviewer: 403
    assert client.post(reverse("exemplars:exemplar_review", args=[exemplar.pk]),
                       {"decision": "approve"}).status_code == 403
    client.force_login(reviewer)
    client.post(reverse("exemplars:exemplar_review", args=[exemplar.pk]), {"decision": "approve", "comment": "ok"})
    exemplar.refresh_from_db()
    assert exemplar.state == Exemplar.State.APPROVED
    lint = client.get(reverse("exemplars:exemplar_lint", args=[exemplar.pk])).content.decode()
    assert "no drift" in lint and "estimate" in lint


def test_a_stranger_cannot_edit_someone_elses_steps(client, demo_database, author, django_user_model,
                                                   build_exemplar):
    exemplar = build_exemplar(demo_database, author)
    client.force_login(django_user_model.objects.create_user("eve", password="x"))
    step = exemplar.steps.first()
    response = client.post(reverse("exemplars:step_op", args=[exemplar.pk, step.pk, "delete"]), **HTMX)
    assert response.status_code == 403 and exemplar.steps.count() == 3


def test_publish_version_diff_preview_and_export_pages(client, demo_database, reviewer, approved):
    one, two = approved(demo_database), approved(demo_database, question="Second?")
    client.force_login(reviewer)
    client.post(reverse("exemplars:set_new"), {"name": "demo 2-shot"})
    exemplar_set = reviewer.exemplar_sets.get()
    url = reverse("exemplars:set_publish", args=[exemplar_set.pk])
    client.post(url, {f"position_{one.pk}": "1", "note": "one"})
    response = client.post(url, {f"position_{two.pk}": "1", f"position_{one.pk}": "2", "note": "two"})
    v2 = ExemplarSetVersion.objects.get(number=2)
    assert response.url == v2.get_absolute_url()
    assert [e["exemplar_id"] for e in v2.exemplars] == [two.pk, one.pk]
    page = client.get(v2.get_absolute_url()).content.decode()
    assert "tokens" in page and "estimate" in page
    diff = client.get(reverse("exemplars:version_diff", args=[exemplar_set.pk]) + "?a=1&b=2").content.decode()
    assert 'class="add">+Q: Second?' in diff
    preview = client.get(reverse("exemplars:version_preview", args=[exemplar_set.pk, 2]),
                         {"database": "chinook", "question": "How many tracks?"}).content.decode()
    assert 'id="message-system"' in preview and 'id="message-user"' in preview
    assert "Q: How many tracks?" in preview and "Q: Second?" in preview and "estimate" in preview
    exported = client.get(reverse("exemplars:version_export", args=[exemplar_set.pk, 2]))
    assert json.loads(exported.content)["version"]["number"] == 2


def test_publishing_a_draft_through_the_page_is_refused(client, demo_database, reviewer, author, build_exemplar):
    draft = build_exemplar(demo_database, author)
    exemplar_set = services.set_create(name="s", user=reviewer)
    client.force_login(reviewer)
    client.post(reverse("exemplars:set_publish", args=[exemplar_set.pk]), {f"position_{draft.pk}": "1"})
    assert not ExemplarSetVersion.objects.filter(exemplar_set=exemplar_set).exists()


def test_promote_session_url(client, demo_database, author):
    session = AgentSession.objects.create(database=demo_database, question="How many genres?")
    Turn.objects.create(session=session, index=0, thought="t", action='ExecuteSQL("SELECT COUNT(*) FROM Genre")',
                        tool="ExecuteSQL", observation="[(25,)]", tool_ok=True)
    client.force_login(author)
    url = f"/exemplars/promote/session/{session.pk}/"
    assert client.get(url).status_code == 405
    response = client.post(url)
    exemplar = Exemplar.objects.get(database=demo_database)
    assert response.url == exemplar.get_absolute_url() and exemplar.author == author


def test_admin_shows_exemplars_and_versions_read_only(staff_client, demo_database, reviewer, approved):
    exemplar = approved(demo_database)
    exemplar_set = services.set_create(name="s", user=reviewer)
    version = services.set_publish(exemplar_set=exemplar_set, exemplars=[exemplar], user=reviewer)
    assert staff_client.get(f"/admin/annotations/exemplar/{exemplar.pk}/change/").status_code == 200
    page = staff_client.get(f"/admin/annotations/exemplarsetversion/{version.pk}/change/")
    assert page.status_code == 200 and b'name="note"' not in page.content
    assert staff_client.get("/admin/annotations/exemplarset/").status_code == 200
    assert staff_client.post(f"/admin/annotations/exemplarsetversion/{version.pk}/delete/",
                             {"post": "yes"}).status_code == 403


def test_a_waiting_author_is_told_who_reviews_and_which_role_it_takes(client, demo_database, author,
                                                                      build_exemplar, django_user_model):
    exemplar = build_exemplar(demo_database, author)
    services.exemplar_submit(exemplar=exemplar, user=author)
    client.force_login(author)
    page = client.get(reverse("exemplars:exemplar_detail", args=[exemplar.pk])).content.decode()
    assert "Nobody can review it yet: no account has the Curator role." in page
    assert "needs the <strong>Curator</strong> role" in page
    curator = django_user_model.objects.create_user("rita", "rita@example.com", "pw-rita-123")
    curator.groups.add(Group.objects.get(name=CURATOR))
    django_user_model.objects.create_user("staffer", "s@example.com", "pw-s-123", is_staff=True)
    page = client.get(reverse("exemplars:exemplar_detail", args=[exemplar.pk])).content.decode()
    assert "Reviewers (Curators): <strong>rita</strong>." in page and "staffer" not in page


def test_the_new_exemplar_and_new_set_addresses_opened_directly_lead_to_their_forms(client, author, reviewer):
    client.force_login(author)
    response = client.get("/exemplars/new/")
    assert response.status_code == 302 and response.url == "/exemplars/#new-exemplar"
    assert 'id="new-exemplar"' in client.get(response.url).content.decode()
    assert client.get("/exemplars/sets/new/").status_code == 403  # an Annotator creates no sets
    client.force_login(reviewer)
    response = client.get("/exemplars/sets/new/")
    assert response.status_code == 302 and response.url == "/exemplars/sets/#new-set"
    assert 'id="new-set"' in client.get(response.url).content.decode()


def test_checks_say_the_final_sql_is_missing_for_want_of_a_done_step_not_of_a_database(
        client, demo_database, author, build_exemplar):
    exemplar = build_exemplar(demo_database, author, actions=[
        ("Count the genres.", 'ExecuteSQL("SELECT COUNT(*) FROM Genre")')])
    client.force_login(author)
    page = client.get(reverse("exemplars:exemplar_lint", args=[exemplar.pk])).content.decode()
    assert "no registered database" not in page
    assert "there is no final SQL yet" in page and "set when a Done step ends it" in page
