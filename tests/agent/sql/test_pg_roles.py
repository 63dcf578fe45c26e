"""PostgreSQL targets must be read by a role that can only read, checked at registration and every connection.

Reproduces issue #12's finding (a superuser DSN read server files, wrote through dblink, ended other backends)
and shows such roles refused, through the API as a Data admin and in the connector, with the target unchanged.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest
from django.db import connection

from agent import services
from agent.models import Database
from agent.roles import DATA_ADMIN
from agent.sql import connect
from agent.sql.pg_roles import RoleRefused, readonly_role_sql
from tests.conftest import PG_ADMIN_DSN, give_roles

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

SETUP = "CREATE TABLE t (id integer PRIMARY KEY, name text); INSERT INTO t VALUES (1, 'one'), (2, 'two');"


@pytest.fixture
def target(pg_database):
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(SETUP)
    return pg_database


@pytest.fixture
def make_role(target):
    """A login role on the target built from the read-only statements plus ``extra`` grants; dropped afterwards."""
    made: list[tuple[str, str]] = []

    def make(*extra: str, dsn: str | None = None) -> str:
        dsn = dsn or target
        role = f"t2s_probe_{uuid.uuid4().hex[:8]}"
        database = dsn.rsplit("/", 1)[1]
        with psycopg.connect(dsn, autocommit=True) as conn:
            for stmt in readonly_role_sql(role, database, password="pw-probe"):
                conn.execute(stmt)
            for grant in extra:
                conn.execute(grant.format(role=role))
        made.append((role, dsn))
        host = PG_ADMIN_DSN.split("@", 1)[1].rsplit("/", 1)[0]
        return f"postgresql://{role}:pw-probe@{host}/{database}"

    yield make
    with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as admin:
        for role, dsn in made:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')


def rows(dsn: str):
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT id, name FROM t ORDER BY id").fetchall()


def register_via_api(client, django_user_model, name: str, dsn: str):
    admin = give_roles(django_user_model.objects.create_user(f"da-{name}", password="pw-da-123"), DATA_ADMIN)
    client.force_login(admin)
    return client.post("/api/databases/", {"name": name, "location": dsn}, content_type="application/json")


def test_a_superuser_dsn_is_refused_at_registration_and_connection(client, django_user_model, target):
    response = register_via_api(client, django_user_model, "su", target)
    assert response.status_code == 400 and "superuser" in response.json()["location"][0]
    assert not Database.objects.exists()
    with pytest.raises(RoleRefused, match="superuser"):
        connect("postgresql", target)
    assert rows(target) == [(1, "one"), (2, "two")]


@pytest.mark.parametrize(("grant", "reason"), [
    ("GRANT pg_read_server_files TO {role}", "pg_read_server_files"),
    ("GRANT pg_write_server_files TO {role}", "pg_write_server_files"),
    ("GRANT pg_execute_server_program TO {role}", "pg_execute_server_program"),
    ("GRANT INSERT ON t TO {role}", "may write to public.t"),
    ("GRANT DELETE ON t TO {role}", "may write to public.t"),
    ("GRANT TRUNCATE ON t TO {role}", "may write to public.t"),
    ("GRANT CREATE ON SCHEMA public TO {role}", "CREATE in schema public"),
    ("ALTER ROLE {role} CREATEROLE", "may create roles"),
])
def test_roles_that_could_write_or_reach_server_files_are_refused(client, django_user_model, target, make_role,
                                                                   grant, reason):
    dsn = make_role(grant)
    response = register_via_api(client, django_user_model, "probe", dsn)
    assert response.status_code == 400 and reason in response.json()["location"][0]
    with pytest.raises(RoleRefused, match=reason):
        connect("postgresql", dsn)
    assert not Database.objects.exists()


def test_a_read_only_role_registers_and_reads(client, django_user_model, target, make_role):
    dsn = make_role()
    response = register_via_api(client, django_user_model, "sales", dsn)
    assert response.status_code == 201, response.content
    database = services.database_refresh(database=Database.objects.get(name="sales"))
    assert database.status == Database.Status.READY and database.table_count == 1
    assert "pw-probe" not in response.content.decode()


def test_the_role_is_checked_again_on_every_new_connection(target, make_role):
    dsn = make_role()
    database = services.database_register(name="sales", location=dsn, refresh="sync")
    assert database.status == Database.Status.READY
    with psycopg.connect(target, autocommit=True) as admin:
        admin.execute(f"GRANT UPDATE ON t TO {dsn.split('//')[1].split(':')[0]}")
    with pytest.raises(RoleRefused, match="may write"):
        services.open_connector(database)
    assert rows(target) == [(1, "one"), (2, "two")]


@pytest.mark.skipif(connection.vendor != "postgresql",
                    reason="the app's own database is SQLite here: the SQLite file rules cover it (test_registration_safety)")
def test_the_apps_own_database_is_refused_even_through_a_read_only_role(client, django_user_model, make_role):
    app_dsn = f"{PG_ADMIN_DSN.rsplit('/', 1)[0]}/{connection.settings_dict['NAME']}"
    reader = make_role(dsn=app_dsn)
    response = register_via_api(client, django_user_model, "mirror", reader)
    assert response.status_code == 400 and "app's own database" in response.json()["location"][0]
    assert not Database.objects.filter(name="mirror").exists()


def test_create_readonly_role_makes_a_role_that_passes(target):
    from django.core.management import call_command

    role = f"t2s_cmd_{uuid.uuid4().hex[:8]}"
    try:
        from io import StringIO

        out = StringIO()
        call_command("create_readonly_role", target, role, "--password", "pw-cmd-123", stdout=out)
        dsn = out.getvalue().strip().splitlines()[-1].strip()
        assert dsn.startswith(f"postgresql://{role}:pw-cmd-123@")
        with connect("postgresql", dsn) as db:
            assert db.execute("SELECT count(*) FROM t").rows == [(2,)]
    finally:
        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
            with psycopg.connect(target, autocommit=True) as conn:
                conn.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')
