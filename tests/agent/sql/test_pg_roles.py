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
from agent.sql import QueryRejected, connect
from agent.sql.pg_roles import RoleRefused, readonly_role_sql
from tests.conftest import PG_ADMIN_DSN, give_roles, only_on_postgres_app_database

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
    ("ALTER ROLE {role} CREATEROLE", "may take CREATEROLE"),
    # Issue #27, finding 3: a column grant (has_table_privilege ignores it) and pg_signal_backend were accepted.
    ("GRANT INSERT (name) ON t TO {role}", "may write to public.t"),
    ("GRANT UPDATE (name) ON t TO {role}", "may write to public.t"),
    ("GRANT pg_signal_backend TO {role}", "pg_signal_backend"),
    ("GRANT pg_write_all_data TO {role}", "pg_write_all_data"),
])
def test_roles_that_could_write_or_reach_server_files_are_refused(client, django_user_model, target, make_role,
                                                                   grant, reason):
    dsn = make_role(grant)
    response = register_via_api(client, django_user_model, "probe", dsn)
    assert response.status_code == 400 and reason in response.json()["location"][0]
    with pytest.raises(RoleRefused, match=reason):
        connect("postgresql", dsn)
    assert not Database.objects.exists()


@pytest.fixture
def superuser_role():
    """A NOLOGIN superuser role (nobody signs in as it), dropped afterwards."""
    role = f"t2s_su_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" NOLOGIN SUPERUSER')
    yield role
    with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as admin:
        admin.execute(f'DROP ROLE IF EXISTS "{role}"')


def test_a_noinherit_member_of_a_superuser_role_is_refused(client, django_user_model, target, make_role,
                                                           superuser_role):
    """Issue #27, finding 1: ``LOGIN NOINHERIT ... IN ROLE <superuser>`` registered as ready, and a plain user's
    ``set_config('role', ...)`` behind an unparsable ``@ -5`` made it a superuser. Membership now counts on
    every path (SET ROLE needs no INHERIT), and the statement itself is refused by the guard."""
    dsn = make_role("ALTER ROLE {role} NOINHERIT", f'GRANT "{superuser_role}" TO {{role}}')
    response = register_via_api(client, django_user_model, "escalate", dsn)
    assert response.status_code == 400
    assert f"member of superuser {superuser_role}" in response.json()["location"][0]
    assert not Database.objects.exists()
    with pytest.raises(RoleRefused, match="member of superuser"):
        connect("postgresql", dsn)
    with connect("postgresql", dsn, check_role=False) as db, pytest.raises(QueryRejected, match="could not be checked"):
        db.execute(f"SELECT @ -5 AS a, \"set_config\"('role', '{superuser_role}', true) AS b, "
                   "\"query_to_xml\"('select pg_read_file(''/etc/hostname'') AS f', true, false, '') AS c")


def test_a_role_altered_after_registration_is_refused_at_the_next_query_of_a_running_session(target, make_role):
    """Issue #27, finding 4: after ``ALTER ROLE ... SUPERUSER`` a session's open connection went on and read a
    server file. The role is checked at the start of each query's transaction, and on every reconnection."""
    from agent.tools.execute_sql import run_query

    dsn = make_role()
    role = dsn.split("//")[1].split(":")[0]
    database = services.database_register(name="sales", location=dsn, refresh="none")
    with services.open_connector(database) as connector:  # a session's connection
        assert run_query(connector, "SELECT count(*) FROM t").ok
        with psycopg.connect(target, autocommit=True) as admin:
            admin.execute(f'ALTER ROLE "{role}" SUPERUSER')
        try:
            refused = run_query(connector, "SELECT count(*) FROM t")
            assert not refused.ok and "the role is a superuser" in refused.data.error
            with pytest.raises(RoleRefused, match="superuser"):  # the reconnection is checked too
                connector.execute("SELECT 1")
        finally:
            with psycopg.connect(target, autocommit=True) as admin:
                admin.execute(f'ALTER ROLE "{role}" NOSUPERUSER')
        assert connector.execute("SELECT count(*) FROM t").rows == [(2,)]  # reconnected, checked, reading again
        with psycopg.connect(target, autocommit=True) as admin:
            admin.execute(f'GRANT INSERT (name) ON t TO "{role}"')
        with pytest.raises(RoleRefused, match="may write to public.t"):
            connector.execute("SELECT count(*) FROM t")
    assert rows(target) == [(1, "one"), (2, "two")]


def test_a_connection_cut_at_the_hard_stop_is_checked_again_when_it_is_replaced(target, make_role):
    """The watchdog replaces a connection cut past a query's hard stop (``_reconnect``): the new one is checked
    like the first, and the app's own database stays refused there too."""
    dsn = make_role()
    role = dsn.split("//")[1].split(":")[0]
    with connect("postgresql", dsn) as db:
        db._abandon()  # what the watchdog does past the limit + HARD_STOP_S
        with psycopg.connect(target, autocommit=True) as admin:
            admin.execute(f"GRANT pg_read_server_files TO \"{role}\"")
        with pytest.raises(RoleRefused, match="pg_read_server_files"):
            db.execute("SELECT 1")


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


def test_the_apps_own_database_is_refused_even_through_a_read_only_role(client, django_user_model, make_role):
    only_on_postgres_app_database("the SQLite file rules cover a SQLite app database (test_registration_safety)")
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
