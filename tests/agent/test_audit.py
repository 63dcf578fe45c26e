"""The audit log: every change to databases, endpoints, access, budgets and roles is recorded with who did it,
through which door, and what changed; Data admins read it on /audit/ (filters) and in the admin (read-only)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse
from rest_framework.authtoken.models import Token

from agent.models import AuditEntry, Database, DatabaseGrant, LLMEndpoint
from agent.roles import ASKER, DATA_ADMIN, VIEWER
from agent.services import audit, budgets
from tests.conftest import give_roles

pytestmark = pytest.mark.django_db

A = AuditEntry.Action


@pytest.fixture
def data_admin(django_user_model):
    return give_roles(django_user_model.objects.create_user("dora", password="pw-dora-123"), VIEWER, DATA_ADMIN)


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser("root", password="pw-root-123")


def entries(action: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=action).order_by("id"))


def test_registering_through_the_api_by_token_names_the_account_and_the_door(client, data_admin, chinook_copy):
    token = Token.objects.create(user=data_admin)
    response = client.post("/api/databases/", {"name": "shop", "location": str(chinook_copy)},
                           HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 201, response.content
    [entry] = entries(A.DATABASE_REGISTER)
    assert entry.actor == data_admin and entry.actor_name == "dora" and entry.via == "api"
    assert entry.target == "shop" and entry.target_type == "database"
    assert entry.details["location"] == str(chinook_copy) and entry.details["engine"] == "sqlite"


def test_a_command_or_worker_is_recorded_as_the_system_and_dsn_passwords_are_masked(db):
    Database.objects.create(name="pg", engine="postgresql", location="postgresql://reader:s3cret@db:5432/sales")
    [entry] = entries(A.DATABASE_REGISTER)
    assert entry.actor is None and entry.actor_name == "" and entry.via == "system"
    assert "s3cret" not in str(entry.details) and "***" in entry.details["location"]


def test_changing_a_database_in_the_admin_records_the_changed_fields_only(client, superuser, chinook_copy):
    database = Database.objects.create(name="shop", engine="sqlite", location=str(chinook_copy))
    database.status = Database.Status.READY  # what workers write is not an audited change
    database.save()
    assert entries(A.DATABASE_CHANGE) == []
    client.force_login(superuser)
    url = reverse("admin:agent_database_change", args=[database.pk])
    form = client.get(url).context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and not isinstance(v, dict | list)}
    data.update({"name": "shop", "engine": "sqlite", "location": str(chinook_copy), "description": "Our shop",
                 "column_backend": database.column_backend, "column_descriptions": "{}",
                 "foreign_key_patches": "[]", "grants-TOTAL_FORMS": "0", "grants-INITIAL_FORMS": "0"})
    response = client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else ""
    [entry] = entries(A.DATABASE_CHANGE)
    assert entry.actor == superuser and entry.via == "admin"
    assert entry.details == {"changed": {"description": ["", "Our shop"]}}


def test_endpoint_added_changed_and_deleted(superuser):
    with audit.acting_as(superuser, via="admin"):
        endpoint = LLMEndpoint.objects.create(name="vllm", base_url="http://gpu:8000/v1", model="qwen",
                                              api_key_env="VLLM_API_KEY", max_concurrency=4)
        endpoint.max_concurrency = 2
        endpoint.allowed_models = ["qwen", "llama"]
        endpoint.save()
        endpoint.delete()
    [created] = entries(A.ENDPOINT_CREATE)
    assert created.target == "vllm" and created.details["model"] == "qwen"
    assert created.details["api_key_env"] == "VLLM_API_KEY" and created.actor == superuser
    [changed] = entries(A.ENDPOINT_CHANGE)
    assert changed.details["changed"] == {"max_concurrency": [4, 2], "allowed_models": [[], ["qwen", "llama"]]}
    assert [e.target for e in entries(A.ENDPOINT_DELETE)] == ["vllm"]


def test_grants_and_revokes_name_the_database_and_the_holder(demo_database, data_admin, user):
    group = Group.objects.create(name="analysts")
    with audit.acting_as(data_admin):
        to_user = DatabaseGrant.objects.create(database=demo_database, user=user)
        DatabaseGrant.objects.create(database=demo_database, group=group)
        to_user.delete()
    grants = entries(A.GRANT)
    assert [(e.target, e.details) for e in grants] == [(demo_database.name, {"user": "ana"}),
                                                        (demo_database.name, {"group": "analysts"})]
    [revoke] = entries(A.REVOKE)
    assert revoke.details == {"user": "ana"} and revoke.actor == data_admin


def test_role_membership_changes_from_either_side_and_clear(data_admin, django_user_model):
    bob = django_user_model.objects.create_user("bob", password="pw-bob-12345")
    AuditEntry.objects.all().delete()  # the default roles given at creation are recorded too (system)
    asker = Group.objects.get(name=ASKER)
    admins = Group.objects.get(name=DATA_ADMIN)
    with audit.acting_as(data_admin):
        bob.groups.add(admins)
        admins.user_set.remove(bob)
        bob.groups.clear()
    added = entries(A.ROLE_ADD)
    assert [(e.target, e.details["group"]) for e in added] == [("bob", DATA_ADMIN)]
    removed = entries(A.ROLE_REMOVE)
    assert sorted((e.target, e.details["group"]) for e in removed) == sorted(
        [("bob", DATA_ADMIN), ("bob", ASKER), ("bob", VIEWER)])
    assert all(e.actor == data_admin for e in added + removed) and asker.pk


def test_new_accounts_default_roles_are_recorded(django_user_model):
    django_user_model.objects.create_user("newbie", password="pw-newbie-123")
    assert sorted(e.details["group"] for e in entries(A.ROLE_ADD) if e.target == "newbie") == [ASKER, VIEWER]


def test_group_permissions_and_account_flags(superuser, user):
    group = Group.objects.create(name="helpers")
    perm = Permission.objects.get(codename="add_database")
    with audit.acting_as(superuser):
        group.permissions.add(perm)
        group.permissions.remove(perm)
        user.is_staff = True
        user.save()
    [added, removed] = [e for e in entries(A.ROLE_PERMISSIONS) if e.target == "helpers"]
    assert added.details == {"added": ["agent.add_database"]} and removed.details == {"removed": ["agent.add_database"]}
    [flags] = entries(A.ACCOUNT_FLAGS)
    assert flags.target == "ana" and flags.details == {"changed": {"is_staff": [False, True]}}


def test_budget_changes_are_recorded(superuser, user):
    with audit.acting_as(superuser):
        budgets.budget_set(user=user, tokens_per_day=1000, cost_per_day=1.5)
    [entry] = entries(A.BUDGET_CHANGE)
    assert entry.target == "ana" and entry.details == {"tokens_per_day": 1000, "cost_per_day": "1.5"}


def test_the_audit_page_is_for_data_admins_and_filters(client, data_admin, user, demo_database):
    with audit.acting_as(data_admin):
        DatabaseGrant.objects.create(database=demo_database, user=user)
    LLMEndpoint.objects.create(name="sys-endpoint", model="m", api_key_env="X_API_KEY")
    old = AuditEntry.objects.get(action=A.ENDPOINT_CREATE)
    AuditEntry.objects.filter(pk=old.pk).update(created_at=dt.datetime(2020, 1, 1, tzinfo=dt.UTC))

    client.force_login(user)
    assert client.get("/audit/").status_code == 403
    client.force_login(data_admin)
    page = client.get("/audit/")
    assert page.status_code == 200
    shown = [e.action for e in page.context["page"].object_list]
    assert A.GRANT in shown and A.ENDPOINT_CREATE in shown
    assert b'href="/audit/"' in page.content  # the nav links it for those who may read it

    def actions(query: str) -> set[str]:
        return {e.action for e in client.get(f"/audit/?{query}").context["page"].object_list}

    assert actions("action=access.grant") == {A.GRANT}
    assert actions("actor=dora") == {A.GRANT}
    assert A.ENDPOINT_CREATE in actions("actor=system")
    assert actions("target=sys-end") == {A.ENDPOINT_CREATE}
    assert A.ENDPOINT_CREATE not in actions("since=2021-01-01")
    assert actions("until=2020-01-01") == {A.ENDPOINT_CREATE}


def test_the_admin_lists_entries_read_only(client, superuser, demo_database):
    client.force_login(superuser)
    assert client.get(reverse("admin:agent_auditentry_changelist")).status_code == 200
    assert client.get(reverse("admin:agent_auditentry_add")).status_code == 403
    entry = AuditEntry.objects.first()
    client.post(reverse("admin:agent_auditentry_delete", args=[entry.pk]), {"post": "yes"})
    assert AuditEntry.objects.filter(pk=entry.pk).exists()
