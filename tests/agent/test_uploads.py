"""Uploading a SQLite database through the browser: stored in the data folder, checked, registered; refusals
store nothing. And the safety of unpacking uploaded archives."""

import io
import stat
import zipfile
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile

from agent.models import Database, DatabaseGrant, ImportJob
from agent.roles import ASKER, DATA_ADMIN, VIEWER
from agent.services import uploads
from tests.conftest import give_roles, only_on_postgres_app_database
from tests.support.uploads import sqlite_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture
def data_admin(client, django_user_model):
    account = give_roles(django_user_model.objects.create_user("dora", password="pw-dora-123"), DATA_ADMIN, ASKER,
                         VIEWER)
    client.force_login(account)
    return account


def files_in(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def test_a_sqlite_upload_is_stored_in_the_data_folder_registered_and_granted(client, data_admin, upload_dir,
                                                                              tmp_path):
    upload = SimpleUploadedFile("concert.sqlite", sqlite_bytes(tmp_path))
    response = client.post("/databases/upload/", {"name": "concerts", "file": upload, "description": "mine"})
    assert response.status_code == 302 and response["Location"] == "/databases/concerts/"
    database = Database.objects.get(name="concerts")
    assert Path(database.location).is_relative_to(upload_dir.resolve())
    assert Path(database.location).read_bytes()[:16] == b"SQLite format 3\x00"
    assert DatabaseGrant.objects.filter(database=database, user=data_admin).exists()
    assert client.get("/databases/concerts/").status_code == 200


@pytest.mark.parametrize(("content", "message"), [
    (b"name,country\nJoe,France\n", "it is not a SQLite database file"),
    (b"SQLite format 3\x00" + b"\x00" * 500, "SQLite cannot read it"),
])
def test_a_file_that_is_not_a_sqlite_database_is_refused_and_nothing_is_stored(client, data_admin, upload_dir,
                                                                               content, message):
    response = client.post("/databases/upload/", {"name": "bad", "file": SimpleUploadedFile("bad.sqlite", content)})
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Database.objects.filter(name="bad").exists()
    assert files_in(upload_dir) == []


def test_an_empty_database_is_refused(client, data_admin, upload_dir, make_sqlite):
    path = make_sqlite("PRAGMA user_version = 1;", "empty.sqlite")
    response = client.post("/databases/upload/", {"name": "empty",
                                                  "file": SimpleUploadedFile("empty.sqlite", path.read_bytes())})
    assert "it holds no table" in response.content.decode()
    assert files_in(upload_dir) == []


def test_an_oversized_upload_is_refused_with_the_limit_and_nothing_is_stored(client, data_admin, upload_dir,
                                                                            tmp_path, settings):
    settings.T2S = {**settings.T2S, "UPLOAD_MAX_DATABASE_BYTES": 4096}
    response = client.post("/databases/upload/", {"name": "big",
                                                  "file": SimpleUploadedFile("big.sqlite", sqlite_bytes(tmp_path))})
    assert "at most 4 KB is accepted" in response.content.decode()
    assert not Database.objects.filter(name="big").exists()
    assert files_in(upload_dir) == []


def test_a_name_already_registered_is_refused_before_storing(client, data_admin, demo_database, upload_dir,
                                                            tmp_path):
    response = client.post("/databases/upload/", {"name": "chinook",
                                                  "file": SimpleUploadedFile("x.sqlite", sqlite_bytes(tmp_path))})
    assert "This name is not available" in response.content.decode()
    assert files_in(upload_dir) == []
    assert Database.objects.get(name="chinook").is_demo


def test_only_data_admins_upload_databases(user_client, tmp_path):
    response = user_client.post("/databases/upload/", {"name": "x",
                                                       "file": SimpleUploadedFile("x.sqlite", sqlite_bytes(tmp_path))})
    assert response.status_code == 403
    assert not Database.objects.filter(name="x").exists()


def test_an_import_job_is_visible_to_its_uploader_only(client, user, staff, django_user_model):
    job = ImportJob.objects.create(kind="dataset", name="d", created_by=staff)
    client.force_login(user)
    assert client.get(f"/imports/{job.pk}/").status_code == 404
    client.force_login(staff)
    assert client.get(f"/imports/{job.pk}/").status_code == 200


# --- unpacking archives -----------------------------------------------------------------------------------------


def _zip(entries: dict[str, bytes], *, symlink: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, "/etc/passwd")
    return buffer.getvalue()


@pytest.mark.parametrize(("archive", "message"), [
    (_zip({"../escape.txt": b"x"}), "points outside it"),
    (_zip({"/abs.txt": b"x"}), "points outside it"),
    (_zip({"ok.txt": b"x"}, symlink="link"), "is a symbolic link"),
    (_zip({"big.txt": b"0" * 5000}), "unpacks to"),
    (b"not a zip at all", "not a zip file"),
])
def test_unpacking_refuses_escapes_links_bombs_and_garbage(tmp_path, archive, message):
    (tmp_path / "a.zip").write_bytes(archive)
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(ValidationError, match=message):
        uploads.extract_zip(tmp_path / "a.zip", dest, max_bytes=1000)
    assert not (tmp_path / "escape.txt").exists()


def test_a_member_lying_about_its_size_stops_at_the_limit(tmp_path):
    data = _zip({"big.txt": b"0" * 50_000})
    # Rewrite the declared uncompressed size (central directory and local header) to 10 bytes.
    patched = bytearray(data)
    central = data.rfind(b"PK\x01\x02")
    patched[central + 24:central + 28] = (10).to_bytes(4, "little")
    patched[22:26] = (10).to_bytes(4, "little")
    (tmp_path / "a.zip").write_bytes(bytes(patched))
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(ValidationError):
        uploads.extract_zip(tmp_path / "a.zip", dest, max_bytes=1000)
    assert sum(p.stat().st_size for p in dest.rglob("*") if p.is_file()) <= 1000


def test_a_request_larger_than_the_limit_is_refused_from_its_length_alone(client, data_admin, upload_dir, settings):
    settings.T2S = {**settings.T2S, "UPLOAD_MAX_DATABASE_BYTES": 4096}
    response = client.post("/databases/upload/", {"name": "huge",
                                                  "file": SimpleUploadedFile("h.sqlite", b"0" * (1200 * 1024))})
    assert response.status_code == 413
    assert "at most 4 KB is accepted" in response.content.decode()
    assert files_in(upload_dir) == []


@pytest.mark.django_db(transaction=True)
def test_progress_inside_an_open_import_transaction_is_visible_at_once_on_postgresql(staff):
    from django.db import DEFAULT_DB_ALIAS, connections, transaction

    only_on_postgres_app_database("the embedded app database writes questions in short transactions")
    job = ImportJob.objects.create(kind="dataset", name="d", created_by=staff)
    reporter = uploads.JobReporter(job, every_s=0)
    other = connections.create_connection(DEFAULT_DB_ALIAS)
    try:
        with transaction.atomic():  # as dataset_import holds one on PostgreSQL
            reporter.begin("importing questions", 10)
            reporter(4, 10)
            with other.cursor() as cursor:  # another session, e.g. the page polling the job
                cursor.execute(f"SELECT done, total, stage FROM {ImportJob._meta.db_table} WHERE id = %s", [job.pk])
                assert cursor.fetchone() == (4, 10, "importing questions")
    finally:
        other.close()
