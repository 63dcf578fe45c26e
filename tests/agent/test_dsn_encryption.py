"""PostgreSQL DSN passwords are encrypted at rest, decrypted only to connect, and masked wherever shown."""

from __future__ import annotations

import importlib
import stat

import pytest
from cryptography.fernet import Fernet
from django.apps import apps as django_apps
from django.db import connection

from agent import dsn_secrets, services
from agent.models import Database, mask_dsn
from agent.sql import SQLError

pytestmark = pytest.mark.django_db

MIGRATION = importlib.import_module("agent.migrations.0016_encrypt_dsn_passwords")


@pytest.fixture
def key_file(settings, tmp_path):
    path = tmp_path / "keys" / "dsn_key"
    path.parent.mkdir()
    settings.T2S = {**settings.T2S, "DSN_KEY": "", "DSN_KEY_FILE": path}
    return path


def raw_location(pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT location FROM agent_database WHERE id = %s", [pk])
        return cursor.fetchone()[0]


@pytest.mark.parametrize("dsn", [
    "postgresql://reader:p%40ss%3Aw%2Frd@db.example:5432/shop?sslmode=require",
    "postgresql://reader@db.example/shop?password=s3cret%20pw&application_name=t2s",
    "postgres://reader:plain@db.example/shop",
])
def test_the_password_is_sealed_and_comes_back_only_when_revealed(key_file, dsn):
    sealed = dsn_secrets.seal_dsn(dsn)
    for secret in ("p%40ss", "p@ss", "s3cret", "plain"):
        assert secret not in sealed
    assert dsn_secrets.MARK in sealed and "reader" in sealed and "db.example" in sealed
    assert dsn_secrets.seal_dsn(sealed) == sealed  # sealing twice changes nothing
    assert dsn_secrets.reveal_dsn(sealed) == dsn
    assert "***" in mask_dsn(sealed) and dsn_secrets.MARK not in mask_dsn(sealed)


def test_the_key_file_is_made_on_first_use_readable_by_the_owner_only(key_file):
    assert not key_file.exists()
    dsn_secrets.seal_dsn("postgresql://u:pw@h/db")
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_bytes()
    dsn_secrets.seal_dsn("postgresql://u:pw@h/db")
    assert key_file.read_bytes() == key


def test_a_key_from_the_environment_is_used_and_can_be_rotated(settings, key_file):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.T2S = {**settings.T2S, "DSN_KEY": old}
    sealed = dsn_secrets.seal_dsn("postgresql://u:pw@h/db")
    assert not key_file.exists()
    settings.T2S = {**settings.T2S, "DSN_KEY": f"{new},{old}"}  # new key first: still opens the old password
    assert dsn_secrets.reveal_dsn(sealed) == "postgresql://u:pw@h/db"
    settings.T2S = {**settings.T2S, "DSN_KEY": new}
    with pytest.raises(dsn_secrets.DsnKeyError, match="register the database again"):
        dsn_secrets.reveal_dsn(sealed)


def test_every_save_stores_the_password_encrypted(key_file):
    database = Database.objects.create(name="shop", engine="postgresql",
                                       location="postgresql://reader:hunter2@db.example/shop")
    assert "hunter2" not in raw_location(database.pk)
    assert "hunter2" not in database.display_location


def test_the_data_migration_encrypts_rows_stored_before_it_and_decrypts_backwards(key_file):
    database = Database.objects.create(name="old", engine="postgresql", location="postgresql://r@h/db")
    plain = "postgresql://reader:hunter2@db.example/shop?password=hunter3"
    Database.objects.filter(pk=database.pk).update(location=plain)  # as a row written before encryption
    sqlite_db = Database.objects.create(name="file", engine="sqlite", location="/data/x.sqlite")
    MIGRATION.encrypt(django_apps, None)
    stored = raw_location(database.pk)
    assert "hunter2" not in stored and "hunter3" not in stored
    assert raw_location(sqlite_db.pk) == "/data/x.sqlite"
    MIGRATION.decrypt(django_apps, None)
    assert raw_location(database.pk) == plain


@pytest.mark.postgres
def test_a_registered_postgres_target_connects_with_no_password_in_the_app_database(
        key_file, pg_database, pg_reader, staff_client, settings):
    import psycopg

    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE artist (id integer PRIMARY KEY, name text)")
        conn.execute("INSERT INTO artist VALUES (1, 'Kraftwerk'), (2, 'Can')")
    dsn = pg_reader()
    database = services.database_register(name="pgshop", location=dsn, refresh="sync")
    database.refresh_from_db()
    assert database.status == Database.Status.READY, database.status_message
    stored = raw_location(database.pk)
    assert "pw-reader" not in stored and dsn_secrets.MARK in stored
    with services.open_connector(database) as conn:
        assert conn.execute("SELECT count(*) AS n FROM artist").rows == [(2,)]
    # Shown masked on the page and in the API; registering the same DSN again is no change.
    for url in (database.get_absolute_url(), "/api/databases/pgshop/"):
        shown = staff_client.get(url)
        assert shown.status_code == 200 and ":***@" in shown.content.decode()
        assert "pw-reader" not in shown.content.decode()
    again = services.database_register(name="pgshop", location=dsn, refresh="none")
    assert again.status == Database.Status.READY
    # A lost key gives a clear error, never a crash or a wrong connection.
    settings.T2S = {**settings.T2S, "DSN_KEY": Fernet.generate_key().decode()}
    with pytest.raises(SQLError, match="cannot be decrypted"):
        services.open_connector(Database.objects.get(pk=database.pk))
