"""Shared fixtures: real SQLite files, a real PostgreSQL target, logged-in clients.

Service-backed tests skip when a service is unreachable on a developer's
machine, but fail in CI (T2S_REQUIRE_SERVICES=1), so CI never passes by
skipping them.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from agent.conf import agent_settings

# Browser fixtures (one session-wide Chromium) are registered once, here, for every test module.
pytest_plugins = ["tests.browser"]

DEMO_DB = Path(agent_settings.DEMO_DATABASE)
# The shared folder of papers, data and reference scripts: a test setting, not the app's.
SHARED_DIR = Path(os.environ.get("T2S_SHARED_DIR") or Path(settings.BASE_DIR).parent / "shared")
PG_ADMIN_DSN = os.environ.get("T2S_TEST_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
REQUIRE_SERVICES = os.environ.get("T2S_REQUIRE_SERVICES") == "1"


def service_unavailable(what: str) -> None:
    if REQUIRE_SERVICES:
        pytest.fail(f"{what} is required (T2S_REQUIRE_SERVICES=1) but unreachable")
    pytest.skip(f"{what} unreachable")


# The one reason a test about the app database's vendor skips; .ci/run's embedded pass accepts only this one
# (and shared_data's) among its skips.
APP_DATABASE_SKIP = "about PostgreSQL as the app database; the app database here is SQLite"


def only_on_postgres_app_database(why: str) -> None:
    """Skip a test of what only PostgreSQL as the app's own database does (``why``); tests of PostgreSQL
    targets use ``pg_database`` instead and run on either app database."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip(f"{APP_DATABASE_SKIP}: {why}")


def redis_url_for_tests() -> str | None:
    """A Redis server for tests of Redis-backed code (the endpoints' slots) when the broker is not Redis:
    ``T2S_TEST_REDIS_URL``, else the broker's URL when it is Redis."""
    url = os.environ.get("T2S_TEST_REDIS_URL") or os.environ.get("CELERY_BROKER_URL", "")
    return url if url.startswith("redis://") else None


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, and at the end of the session the connections other threads left open
    to it closed first (a lease keeper or progress thread of an in-process worker holds its own): otherwise
    dropping the database warns that it "is being accessed by other users" and leaves it behind."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")


@pytest.fixture
def upload_dir() -> Path:
    """This test's data directory: SQLite files the web, the API and the admin may register."""
    return Path(agent_settings.DATA_DIRS[0])


@pytest.fixture
def chinook_copy(upload_dir: Path) -> Path:
    """A private copy of the demo database in the data directory, so a test can check it is unchanged."""
    target = upload_dir / "chinook.sqlite"
    shutil.copy(DEMO_DB, target)
    return target


@pytest.fixture
def grant():
    """Grant databases to users or groups: ``grant(database, user_or_group, ...)``."""
    from django.contrib.auth.models import Group

    from agent.models import DatabaseGrant

    def give(database, *holders):
        for holder in holders:
            key = {"group": holder} if isinstance(holder, Group) else {"user": holder}
            DatabaseGrant.objects.get_or_create(database=database, **key)
        return database

    return give


@pytest.fixture
def make_sqlite(tmp_path: Path):
    """Build a small real SQLite database from DDL/DML statements; returns its path."""

    def build(script: str, name: str = "fixture.sqlite") -> Path:
        path = tmp_path / name
        with sqlite3.connect(path) as conn:
            conn.executescript(script)
        conn.close()
        return path

    return build


@pytest.fixture
def pg_database():
    """A throwaway PostgreSQL database: yields (dsn, admin_connection_factory); dropped afterwards."""
    psycopg = pytest.importorskip("psycopg")
    try:
        admin = psycopg.connect(PG_ADMIN_DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError:
        service_unavailable("PostgreSQL")
    name = f"t2s_target_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_DSN.rsplit("/", 1)[0]
    dsn = f"{base}/{name}"
    try:
        yield dsn
    finally:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.close()


@pytest.fixture
def pg_reader(pg_database):
    """Call after creating the target's tables: a least-privilege role on it (create_readonly_role's statements);
    returns that role's DSN. The role is dropped after the target database."""
    psycopg = pytest.importorskip("psycopg")
    from agent.sql.pg_roles import readonly_role_sql

    role = f"t2s_reader_{uuid.uuid4().hex[:10]}"
    database = pg_database.rsplit("/", 1)[1]
    created = []

    def make(schemas: tuple[str, ...] = ("public",)) -> str:
        with psycopg.connect(pg_database, autocommit=True) as conn:
            for stmt in readonly_role_sql(role, database, schemas=schemas, password="pw-reader"):
                conn.execute(stmt)
        created.append(role)
        host = PG_ADMIN_DSN.split("@", 1)[1].rsplit("/", 1)[0]
        return f"postgresql://{role}:pw-reader@{host}/{database}"

    yield make
    if created:
        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
            with psycopg.connect(pg_database, autocommit=True) as conn:
                conn.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')


def give_roles(user, *roles: str):
    """Add role groups (``agent.roles``) to an account; returns it."""
    from django.contrib.auth.models import Group

    from agent.roles import ensure_roles

    if Group.objects.filter(name__in=roles).count() < len(set(roles)):
        ensure_roles()  # a transactional test flushed them
    user.groups.add(*Group.objects.filter(name__in=roles))
    return user


@pytest.fixture(autouse=True)
def seeded_taxonomy(request):
    """Every database test starts with the error taxonomy the migrations seed: a transactional test that ran
    before it in the same process flushed it, and pytest-xdist makes which tests ran before vary."""
    if request.node.get_closest_marker("django_db") is None:
        return
    import importlib

    from django.apps import apps

    request.getfixturevalue("db")
    importlib.import_module("annotations.migrations.0005_seed_error_taxonomy").seed(apps, None)


def seed_taxonomy_and_roles() -> None:
    """The paper's error taxonomy and the role groups, as the migrations seed them (a transactional test
    elsewhere may have flushed them)."""
    import importlib

    from django.apps import apps

    from agent.roles import ensure_roles

    importlib.import_module("annotations.migrations.0005_seed_error_taxonomy").seed(apps, None)
    ensure_roles()


def group_of_testers():
    """The group the ``user`` fixture belongs to; fixtures that register databases grant them to it."""
    from django.contrib.auth.models import Group

    return Group.objects.get_or_create(name="testers")[0]


@pytest.fixture
def user(django_user_model):
    """A new account: the default roles (Viewer and Asker), in the group granted the fixtures' databases."""
    account = django_user_model.objects.create_user("ana", "ana@example.com", "pw-ana-123")
    account.groups.add(group_of_testers())
    return account


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("sam", "sam@example.com", "pw-sam-123", is_staff=True,
                                                 is_superuser=True)


@pytest.fixture
def user_client(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def staff_client(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture
def demo_database(db):
    from agent import services

    return services.database_register(name="chinook", location=str(DEMO_DB), is_demo=True, refresh="sync")


@pytest.fixture(autouse=True)
def isolated_index_dir(settings, tmp_path_factory):
    """Each test builds tool indexes in its own directory (index dirs are keyed by database id), and has its own
    data directory (``upload_dir``)."""
    settings.T2S = {**settings.T2S, "INDEX_DIR": tmp_path_factory.mktemp("indexes"),
                    "DATA_DIRS": [tmp_path_factory.mktemp("uploads")]}


@pytest.fixture(autouse=True)
def fresh_cache():
    """Sign-in failures and API rate counters live in the cache: each test starts with none."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture
def replay_llm(settings):
    """Start a replay LLM server and point the app at it; call with a script, get the server."""
    from tests.support.replay_server import ReplayServer

    servers = []

    def start(script, **kwargs) -> ReplayServer:
        server = ReplayServer(script, **kwargs).start()
        servers.append(server)
        settings.T2S = {**settings.T2S, "LLM_BASE_URL": server.url, "LLM_MODEL": "replay-model"}
        return server

    yield start
    for server in servers:
        server.stop()


SPIDER_DIR = SHARED_DIR / "data" / "spider_dev"
# Small licensed slices committed with the tests (SQL dumps), so a clone without ../shared runs them.
SLICE_DIR = Path(__file__).resolve().parent / "support" / "data"


def pytest_collection_modifyitems(config, items):
    """Tests marked shared_data need the full ../shared folder (T2S_SHARED_DIR): skipped only when it is absent.

    The fault tests go first: under xdist (``--dist loadfile``) the tests of a file run one after another on
    one process, and the fault files are the longest stretches of the suite, so they start at once while the
    other processes share out everything else."""
    items.sort(key=lambda item: "faults" not in item.keywords)  # stable: the rest keeps its order
    if (SPIDER_DIR / "dev.json").is_file():
        return
    skip = pytest.mark.skip(reason=f"needs the shared data folder, not found at {SHARED_DIR}")
    for item in items:
        if "shared_data" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def spider_database(db, tmp_path_factory):
    """A Spider dev database registered under its db_id, with its indexes built, granted to ``testers``.

    Built from the committed slice (tests/support/data/<db_id>.sql) when there is one, else read
    from the shared Spider folder (tests using such a database must be marked shared_data).
    """
    from agent import services
    from agent.models import DatabaseGrant

    def register(db_id: str):
        dump = SLICE_DIR / f"{db_id}.sql"
        if dump.is_file():
            path = tmp_path_factory.mktemp(db_id) / f"{db_id}.sqlite"
            with sqlite3.connect(path) as conn:
                conn.executescript(dump.read_text(encoding="utf-8"))
            conn.close()
        else:
            path = SPIDER_DIR / "database" / db_id / f"{db_id}.sqlite"
            if not path.exists():
                pytest.fail(f"{db_id} is neither a committed slice nor in the shared data ({path})")
        database = services.database_register(name=db_id, location=str(path), refresh="sync")
        DatabaseGrant.objects.get_or_create(database=database, group=group_of_testers())
        return database

    return register
