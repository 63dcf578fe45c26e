"""Registration cannot reach the app's own data (issue #12's findings, reproduced and refused).

A Data admin (not staff) tries the app database, a ``..`` path to it, a symlink to it, the broker file and the
secret key through the API, the page and the admin; every refusal reads the same whether the file exists or not,
nothing is registered, and the app database is unchanged. Commands may name other files, never those.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse

from agent.models import Database
from agent.roles import DATA_ADMIN
from agent.services.locations import REFUSED
from tests.conftest import DEMO_DB, give_roles

pytestmark = pytest.mark.django_db


@pytest.fixture
def data_admin(django_user_model):
    return give_roles(django_user_model.objects.create_user("dora", password="pw-dora-123"), DATA_ADMIN)


@pytest.fixture
def embedded_app_files(settings):
    """The embedded mode's own files, as real SQLite files where the settings say they are: an app database with
    an auth_user table, the broker file and the secret key in var/."""
    var = Path(settings.VAR_DIR)
    app_db = var / "app-under-test.sqlite3"
    with sqlite3.connect(app_db) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS auth_user (id INTEGER PRIMARY KEY, password TEXT)")
        conn.execute("INSERT INTO auth_user (password) VALUES ('pbkdf2_sha256$secret-hash')")
        conn.execute("CREATE TABLE IF NOT EXISTS django_migrations (id INTEGER PRIMARY KEY, app TEXT, name TEXT)")
        conn.execute("INSERT INTO django_migrations (app, name) VALUES ('auth', '0001_initial'), "
                     "('agent', '0001_initial'), ('annotations', '0001_initial')")
    conn.close()
    broker = var / "broker-under-test.sqlite"
    with sqlite3.connect(broker) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS kombu_queue (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("CREATE TABLE IF NOT EXISTS kombu_message (id INTEGER PRIMARY KEY, payload TEXT)")
        conn.execute("INSERT INTO kombu_message (payload) VALUES ('{\"session\": 1}')")
    conn.close()
    settings.DATABASES = {**settings.DATABASES, "embedded": {"ENGINE": "django.db.backends.sqlite3", "NAME": app_db}}
    settings.CELERY_BROKER_URL = f"sqla+sqlite:///{broker}"
    yield {"app": app_db, "broker": broker, "secret": var / "secret_key"}
    app_db.unlink(missing_ok=True)
    broker.unlink(missing_ok=True)


def attempts(upload_dir: Path, files: dict[str, Path]) -> list[str]:
    link = upload_dir / "innocent.sqlite"
    link.symlink_to(files["app"])
    dotdot = upload_dir / ".." / ".." / Path(*files["app"].parts[1:])
    return [str(files["app"]), f"{upload_dir}/../{files['app'].name}", str(dotdot), str(link),
            str(files["broker"]), str(files["secret"]), "/etc/shadow", "/etc/passwd", "/no/such/file.sqlite",
            str(Path(django_settings.BASE_DIR) / "pyproject.toml"), f"{django_settings.BASE_DIR}/../{Path(django_settings.BASE_DIR).name}/x.sqlite"]


def test_the_api_refuses_the_apps_own_files_with_one_message(client, data_admin, upload_dir, embedded_app_files):
    before = embedded_app_files["app"].read_bytes()
    client.force_login(data_admin)
    bodies = set()
    for i, location in enumerate(attempts(upload_dir, embedded_app_files)):
        response = client.post("/api/databases/", {"name": f"x{i}", "location": location},
                               content_type="application/json")
        assert response.status_code == 400, location
        bodies.add(response.content)
    assert bodies == {b'{"location":["' + REFUSED.encode() + b'"]}'}  # no existence oracle
    assert not Database.objects.exists()
    assert embedded_app_files["app"].read_bytes() == before


def test_the_page_and_the_admin_refuse_them_too(client, data_admin, upload_dir, embedded_app_files, django_user_model):
    from django.utils.html import escape

    client.force_login(data_admin)
    for i, location in enumerate(attempts(upload_dir, embedded_app_files)):
        page = client.post(reverse("database_register"), {"name": f"x{i}", "location": location})
        assert page.status_code == 200 and escape(REFUSED) in page.content.decode(), location
    superuser = django_user_model.objects.create_superuser("root", "r@example.com", "pw-root-123")
    client.force_login(superuser)
    response = client.post(reverse("admin:agent_database_add"), {
        "name": "sneaky", "engine": "sqlite", "location": str(embedded_app_files["app"]), "column_backend": "bm25",
        "column_descriptions": "{}", "index_status": "none", "grants-TOTAL_FORMS": "0",
        "grants-INITIAL_FORMS": "0"})
    assert response.status_code == 200 and escape(REFUSED) in response.content.decode()
    assert not Database.objects.exists()


def test_a_file_in_a_data_directory_registers(client, data_admin, chinook_copy):
    client.force_login(data_admin)
    response = client.post("/api/databases/", {"name": "shop", "location": str(chinook_copy)},
                           content_type="application/json")
    assert response.status_code == 201, response.content
    assert Database.objects.get(name="shop").location == str(chinook_copy)


def test_staff_without_the_role_cannot_register(client, django_user_model, chinook_copy):
    staff = django_user_model.objects.create_user("stef", password="pw-stef-123", is_staff=True)
    client.force_login(staff)
    assert client.post("/api/databases/", {"name": "x", "location": str(chinook_copy)},
                       content_type="application/json").status_code == 403
    assert client.get(reverse("database_register")).status_code == 403
    assert not Database.objects.exists()


def test_commands_may_name_other_files_but_never_the_apps_own(tmp_path, embedded_app_files):
    elsewhere = tmp_path / "elsewhere.sqlite"
    shutil.copy(DEMO_DB, elsewhere)
    call_command("register_database", "elsewhere", str(elsewhere), "--no-introspect")
    assert Database.objects.filter(name="elsewhere").exists()
    for location in (embedded_app_files["app"], embedded_app_files["broker"], embedded_app_files["secret"]):
        with pytest.raises(CommandError, match="app's own data"):
            call_command("register_database", "sneaky", str(location), "--no-introspect")
    with pytest.raises(CommandError, match="project tree"):
        call_command("register_database", "sneaky", str(Path(django_settings.BASE_DIR) / "manage.py"))
    assert not Database.objects.filter(name="sneaky").exists()


def test_a_registered_file_that_becomes_the_app_database_is_refused_at_connection(upload_dir, chinook_copy,
                                                                                 embedded_app_files):
    """A symlink registered while innocent, re-pointed at the app database afterwards: every connection re-checks."""
    from agent import services
    from agent.sql import SQLError

    link = upload_dir / "moving.sqlite"
    link.symlink_to(chinook_copy)
    database = services.database_register(name="moving", location=str(link), refresh="none",
                                          user=User(username="web"))
    assert database.location == str(chinook_copy)  # stored resolved: re-pointing the link changes nothing
    Database.objects.filter(pk=database.pk).update(location=str(link))  # as if stored unresolved by an old version
    link.unlink()
    link.symlink_to(embedded_app_files["app"])
    database.refresh_from_db()
    with pytest.raises(SQLError, match="Refused"):
        services.open_connector(database)


def test_dsn_passwords_are_masked_in_every_form():
    from agent.models import mask_dsn

    assert mask_dsn("postgresql://u:pw@h:5432/d") == "postgresql://u:***@h:5432/d"
    assert mask_dsn("postgresql://u@h/d?password=s3cret&sslmode=require") == \
        "postgresql://u@h/d?password=***&sslmode=require"
    assert mask_dsn("postgresql://h/d?PassWord=s3cret") == "postgresql://h/d?PassWord=***"
    assert mask_dsn("host=h PASSWORD = 'p w\\' x' dbname=d") == "host=h PASSWORD=*** dbname=d"
    assert mask_dsn("postgresql://u:p@[::1]:5/d") == "postgresql://u:***@[::1]:5/d"


def test_a_query_parameter_password_is_never_shown(client, django_user_model, grant):
    viewer = django_user_model.objects.create_user("vic", password="pw-vic-123")
    grant(Database.objects.create(name="pgq", engine="postgresql", status="error",
                                  location="postgresql://reader@127.0.0.1:1/nowhere?password=s3cret-pw"), viewer)
    client.force_login(viewer)
    for url in [reverse("database_list"), reverse("database_detail", args=["pgq"]), "/api/databases/",
                "/api/databases/pgq/"]:
        response = client.get(url)
        assert response.status_code == 200 and "s3cret-pw" not in response.content.decode(), url


def _backup(source: Path, target: Path) -> None:
    """A copy made with SQLite's backup API (page by page, a new file: not a hard link)."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


def test_hard_links_and_copies_of_the_apps_data_in_a_data_directory_are_refused(client, data_admin, upload_dir,
                                                                              embedded_app_files):
    """Issue #27, finding 5: a hard link to the broker file, or a backup-API copy of the app database, placed in
    a data directory registered as ready. They are refused by identity (device and inode) and by content
    (``django_migrations`` naming this project's apps, the broker's ``kombu_message``), with the one message."""
    import os

    innocent = upload_dir / "innocent.sqlite"
    shutil.copy(DEMO_DB, innocent)
    os.link(embedded_app_files["broker"], upload_dir / "broker-link.sqlite")
    os.link(embedded_app_files["app"], upload_dir / "app-link.sqlite")
    _backup(embedded_app_files["app"], upload_dir / "app-backup.sqlite")
    _backup(embedded_app_files["broker"], upload_dir / "broker-backup.sqlite")
    shutil.copy(embedded_app_files["app"], upload_dir / "app-copy.sqlite")
    client.force_login(data_admin)
    for name in ("broker-link", "app-link", "app-backup", "broker-backup", "app-copy"):
        response = client.post("/api/databases/", {"name": name, "location": str(upload_dir / f"{name}.sqlite")},
                               content_type="application/json")
        assert response.status_code == 400 and response.json() == {"location": [REFUSED]}, name
    assert not Database.objects.exists()
    for name in ("broker-link", "app-backup"):  # server-side commands too
        with pytest.raises(CommandError, match="app's own"):
            call_command("register_database", name, str(upload_dir / f"{name}.sqlite"), "--no-introspect")
    response = client.post("/api/databases/", {"name": "innocent", "location": str(innocent)},
                           content_type="application/json")
    assert response.status_code == 201, response.content


def test_a_hard_link_to_a_file_under_var_or_the_indexes_is_refused_too(upload_dir, settings):
    """Identity covers every file under var/ (keys, caches, tool indexes), not only the named ones."""
    import os

    from agent.services import locations

    index = Path(settings.T2S["INDEX_DIR"]) / "db-1" / "values.sqlite"
    index.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(DEMO_DB, index)
    os.link(index, upload_dir / "index-link.sqlite")
    assert locations.is_forbidden(upload_dir / "index-link.sqlite")
    shutil.copy(DEMO_DB, upload_dir / "own-copy.sqlite")  # an ordinary copy of a target is fine
    assert not locations.is_forbidden(upload_dir / "own-copy.sqlite")


def test_a_registered_file_replaced_by_a_link_or_copy_of_app_data_is_refused_at_connection(upload_dir,
                                                                                           chinook_copy,
                                                                                           embedded_app_files):
    import os

    from agent import services
    from agent.sql import SQLError

    database = services.database_register(name="shop", location=str(chinook_copy), refresh="none",
                                          user=User(username="web"))
    services.open_connector(database).close()
    for replace in (lambda: os.link(embedded_app_files["app"], chinook_copy),
                    lambda: _backup(embedded_app_files["app"], chinook_copy)):
        chinook_copy.unlink()
        replace()
        with pytest.raises(SQLError, match="Refused"):
            services.open_connector(database)
