"""Refusals are pages of the app: navigation, the reason in words and who can grant access; JSON on the API."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from agent.models import AgentSession, Turn
from agent.roles import DATA_ADMIN
from tests.annotations.labels.conftest import make_annotator
from tests.browser import log_in


@pytest.fixture
def data_admin(django_user_model):
    account = django_user_model.objects.create_user("dora", "dora@example.com", "pw-dora-123")
    account.groups.add(Group.objects.get(name=DATA_ADMIN))
    return account


def test_an_annotator_refused_adjudication_gets_a_page_with_the_reason_and_whom_to_ask(
        client, tiny_run, django_user_model, data_admin):
    client.force_login(make_annotator(django_user_model, "alice"))
    response = client.get(reverse("labels:adjudication", args=[tiny_run.pk]))
    page = response.content.decode()
    assert response.status_code == 403
    assert "Adjudicating labels needs the Curator role." in page
    assert "ask <strong>dora</strong>" in page
    assert 'href="/runs/"' in page and "Log out alice" in page  # the app's navigation, signed in


def test_a_run_not_granted_is_a_page_saying_whom_to_ask(client, tiny_run, django_user_model, data_admin):
    outsider = django_user_model.objects.create_user("olga", "olga@example.com", "pw-olga-123")
    client.force_login(outsider)
    response = client.get(tiny_run.get_absolute_url())
    page = response.content.decode()
    assert response.status_code == 404
    assert "ask for access to its database" in page and "ask <strong>dora</strong>" in page
    assert "Log out olga" in page


def test_the_api_still_answers_refusals_and_unknown_routes_in_json(client, tiny_run, django_user_model):
    client.force_login(make_annotator(django_user_model, "alice"))
    refused = client.post("/api/labels/final/", {"item": 1, "category": 1, "final": True},
                          content_type="application/json")
    assert refused.status_code == 403 and "detail" in refused.json()
    missing = client.get("/api/no-such-route/")
    assert missing.status_code == 404 and missing["Content-Type"] == "application/json"
    assert missing.json() == {"detail": "Not found."}


def test_promote_to_exemplar_is_not_offered_to_an_asker(client, demo_database, user, django_user_model):
    from agent.roles import CURATOR
    from tests.conftest import give_roles

    session = AgentSession.objects.create(database=demo_database, question="How many genres?", status="answered",
                                          created_by=user)
    Turn.objects.create(session=session, index=0, thought="t", action='ExecuteSQL("SELECT 1")',
                        tool="ExecuteSQL", observation="[(1,)]", tool_ok=True)
    client.force_login(user)
    assert "Promote to exemplar" not in client.get(session.get_absolute_url()).content.decode()
    give_roles(user, CURATOR)
    assert "Promote to exemplar" in client.get(session.get_absolute_url()).content.decode()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_403_page_in_a_browser_names_the_reason_and_keeps_the_navigation(
        page, live_server, tiny_run, django_user_model, data_admin):
    make_annotator(django_user_model, "alice")
    log_in(page, live_server, "alice", "pw-alice-123")
    response = page.goto(f"{live_server.url}/labels/runs/{tiny_run.pk}/adjudication/")
    assert response.status == 403
    assert page.inner_text("#refusal-reason") == "Adjudicating labels needs the Curator role."
    assert "dora" in page.inner_text("#who-grants")
    page.click("nav >> text=Labels")  # the app goes on from the refusal
    page.wait_for_url("**/labels/")


def test_run_and_session_controls_are_offered_only_to_those_who_may_use_them(client, tiny_run, user, demo_database):
    from agent.roles import OPERATOR
    from tests.conftest import give_roles

    type(tiny_run).objects.filter(pk=tiny_run.pk).update(source="agent")
    client.force_login(user)  # Viewer and Asker
    page = client.get(tiny_run.get_absolute_url()).content.decode()
    assert "Resume</button>" not in page and "Re-evaluate</button>" not in page
    give_roles(user, OPERATOR)
    page = client.get(tiny_run.get_absolute_url()).content.decode()
    assert "Resume</button>" in page and "Re-evaluate</button>" in page
    # A session someone else asked, still running: no Cancel for a bystander.
    session = AgentSession.objects.create(database=demo_database, question="Still thinking?", status="running")
    assert "Cancel</button>" not in client.get(session.get_absolute_url()).content.decode()


def test_a_server_error_is_a_page_of_the_app_and_json_on_the_api(rf):
    from agent.views.errors import server_error

    page = server_error(rf.get("/runs/1/"))
    assert page.status_code == 500 and b"Something went wrong on our side" in page.content
    assert b"t2s-studio</strong>" in page.content  # the app's header
    api = server_error(rf.get("/api/runs/1/"))
    assert api.status_code == 500 and api["Content-Type"] == "application/json"
