"""Workspaces: a team shares every database of a workspace (and what is built on them) in one step, managed on a
page, through the API and a command by the workspace's admins; per-database grants still work as exceptions."""

from __future__ import annotations

import pytest
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError

from agent import policies
from agent.models import AuditEntry, Database, Workspace, WorkspaceMembership
from agent.roles import ANNOTATOR, CURATOR, DATA_ADMIN, OPERATOR
from agent.services import workspaces as ws
from tests.conftest import give_roles

pytestmark = pytest.mark.django_db

SCHEMA = "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO t VALUES (1, 'a');"


@pytest.fixture
def team_dbs(make_sqlite):
    from agent import services

    workspace = Workspace.objects.create(slug="team", name="Team")
    dbs = [services.database_register(name=f"db{i}", location=str(make_sqlite(SCHEMA, f"db{i}.sqlite")),
                                      refresh="none", workspace=workspace) for i in range(19)]
    return workspace, dbs


@pytest.fixture
def people(django_user_model):
    def make(name, *roles):
        return give_roles(django_user_model.objects.create_user(name, password="pw-12345-x"), *roles)

    return make


def test_adding_a_group_to_a_workspace_shares_its_19_databases_in_one_step(team_dbs, people):
    workspace, dbs = team_dbs
    cur, ann = people("cur", CURATOR), people("ann", ANNOTATOR)
    annotators = Group.objects.create(name="annotators")
    ann.groups.add(annotators)
    assert policies.visible_databases(cur).filter(name__startswith="db").count() == 0
    ws.workspace_member_add(workspace=workspace, group=annotators)
    ws.workspace_member_add(workspace=workspace, user=cur)
    assert policies.visible_databases(ann).filter(name__startswith="db").count() == 19
    assert policies.access_database(cur, "db7") == dbs[7]
    # Both memberships are in the audit log, like grants.
    assert AuditEntry.objects.filter(action="access.grant", target_type="workspace", target="team").count() == 2

    ws.workspace_member_remove(workspace=workspace, group=annotators)
    assert policies.visible_databases(ann).filter(name__startswith="db").count() == 0
    assert policies.visible_databases(cur).filter(name__startswith="db").count() == 19


def test_a_database_grant_still_works_outside_any_workspace(team_dbs, people, grant):
    _, dbs = team_dbs
    op = people("op", OPERATOR)
    grant(dbs[3], op)
    assert list(policies.visible_databases(op).filter(name__startswith="db")) == [dbs[3]]


def test_new_databases_go_to_the_default_workspace_which_shares_nothing(make_sqlite, people):
    from agent import services

    db = services.database_register(name="solo", location=str(make_sqlite(SCHEMA, "solo.sqlite")), refresh="none")
    assert db.workspace.slug == Workspace.DEFAULT
    assert not policies.visible_databases(people("cur", CURATOR)).filter(pk=db.pk).exists()


def test_the_last_admin_cannot_leave(team_dbs, people):
    workspace, _ = team_dbs
    boss = people("boss", CURATOR)
    ws.workspace_member_add(workspace=workspace, user=boss, role="admin")
    with pytest.raises(Exception, match="last admin"):
        ws.workspace_member_remove(workspace=workspace, user=boss)


def test_workspace_admin_adds_a_member_on_the_page_and_a_plain_member_may_not(client, team_dbs, people):
    workspace, _ = team_dbs
    boss, plain, newcomer = people("boss", CURATOR), people("plain", ANNOTATOR), people("new", ANNOTATOR)
    ws.workspace_member_add(workspace=workspace, user=boss, role="admin")
    ws.workspace_member_add(workspace=workspace, user=plain)

    client.force_login(plain)
    page = client.get("/workspaces/team/").content.decode()
    assert "Add to the workspace" not in page and "db18" in page
    assert client.post("/workspaces/team/members/", {"kind": "user", "name": "new", "role": "member"}).status_code \
        == 403
    assert not policies.visible_databases(newcomer).filter(name="db0").exists()

    client.force_login(boss)
    assert "Add to the workspace" in client.get("/workspaces/team/").content.decode()
    response = client.post("/workspaces/team/members/", {"kind": "user", "name": "new", "role": "member"})
    assert response.status_code == 302
    assert policies.visible_databases(newcomer).filter(name__startswith="db").count() == 19
    # Someone outside the workspace sees no such workspace.
    client.force_login(people("outsider", DATA_ADMIN))
    assert client.get("/workspaces/team/").status_code == 404


def test_data_admin_creates_a_workspace_on_the_page_and_becomes_its_admin(client, people):
    admin = people("da", DATA_ADMIN)
    client.force_login(admin)
    response = client.post("/workspaces/", {"slug": "lab", "name": "Lab"})
    assert response.status_code == 302
    membership = WorkspaceMembership.objects.get(workspace__slug="lab")
    assert membership.user == admin and membership.role == "admin"
    client.force_login(people("cur", CURATOR))
    assert client.post("/workspaces/", {"slug": "lab2"}).status_code == 403


def test_api_adds_and_removes_a_member(client, team_dbs, people):
    workspace, _ = team_dbs
    boss, newcomer = people("boss", CURATOR), people("new", ANNOTATOR)
    ws.workspace_member_add(workspace=workspace, user=boss, role="admin")
    client.force_login(boss)
    added = client.post("/api/workspaces/team/members/", {"user": "new"}, content_type="application/json")
    assert added.status_code == 200, added.content
    assert {"user": "new", "group": None, "role": "member"} in added.json()["members"]
    assert len(added.json()["databases"]) == 19
    assert policies.visible_databases(newcomer).filter(name__startswith="db").count() == 19
    removed = client.post("/api/workspaces/team/members/remove/", {"user": "new"}, content_type="application/json")
    assert removed.status_code == 200
    assert not policies.visible_databases(newcomer).filter(name__startswith="db").exists()
    client.force_login(newcomer)
    assert client.get("/api/workspaces/team/").status_code == 404


def test_command_creates_a_workspace_adds_members_and_databases(make_sqlite, people, capsys):
    from agent import services

    for i in range(3):
        services.database_register(name=f"x{i}", location=str(make_sqlite(SCHEMA, f"x{i}.sqlite")), refresh="none")
    cur = people("cur", CURATOR)
    Group.objects.create(name="labellers")
    call_command("workspace", "lab", "--create", "--add", "cur:admin", "--add-group", "labellers",
                 "--database", "x0", "--database", "x2")
    out = capsys.readouterr().out
    assert "user cur: admin" in out and "group labellers: member" in out and "databases (2): x0, x2" in out
    assert set(policies.visible_databases(cur).values_list("name", flat=True)) >= {"x0", "x2"}
    assert not policies.visible_databases(cur).filter(name="x1").exists()
    moved = AuditEntry.objects.get(action="database.change", target="x0")
    assert moved.details == {"workspace": ["default", "lab"]}
    assert AuditEntry.objects.filter(action="access.grant", target_type="workspace", target="lab").count() == 2
    # On behalf of an account, its rules apply: a Curator admin may add members, not move databases.
    people("ann", ANNOTATOR)
    call_command("workspace", "lab", "--add", "ann", "--user", "cur")
    with pytest.raises(CommandError, match="Data admin"):
        call_command("workspace", "lab", "--database", "x1", "--user", "cur")
    assert Database.objects.get(name="x1").workspace.slug == Workspace.DEFAULT


def test_login_page_signed_in_offers_to_sign_in_as_someone_else(client, people):
    first, second = people("first", CURATOR), people("second", ANNOTATOR)
    client.force_login(first)
    page = client.get("/accounts/login/")
    text = page.content.decode()
    assert page.status_code == 200
    assert "Signed in as <strong>first</strong>; sign in as someone" in text
    assert 'name="username"' in text and 'name="password"' in text
    client.post("/accounts/login/", {"username": "second", "password": "pw-12345-x"})
    assert client.session[SESSION_KEY] == str(second.pk)


def test_signing_out_lands_on_the_login_page_saying_so(client, people):
    client.force_login(people("first", CURATOR))
    page = client.post("/accounts/logout/", follow=True)
    text = page.content.decode()
    assert "first signed out. Sign in again, or as someone else." in text and 'id="login-form"' in text
    assert SESSION_KEY not in client.session
