"""Uploading a dataset through the browser: a Spider-shaped zip, or dev.json plus database files, imported by a
worker task that reports progress into its job; malformed uploads end the job with a clear error and store
nothing."""

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils.html import escape

from agent.models import Database, DatabaseGrant, ImportJob
from agent.roles import OPERATOR, VIEWER
from annotations.runs import uploads
from annotations.runs.models import Dataset
from tests.conftest import give_roles
from tests.support.uploads import QUESTIONS, spider_zip, sqlite_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client, django_user_model):
    account = give_roles(django_user_model.objects.create_user("opal", password="pw-opal-123"), OPERATOR, VIEWER)
    client.force_login(account)
    return account


def upload(client, **files_and_fields):
    return client.post("/datasets/", files_and_fields)


def run_job(response) -> ImportJob:
    """What the worker does with the queued job (the test calls the task's service directly)."""
    assert response.status_code == 302, response.content.decode()[:2000]
    job = ImportJob.objects.get(pk=int(response["Location"].rstrip("/").rsplit("/", 1)[1]))
    uploads.dataset_upload_run(job=job)
    job.refresh_from_db()
    return job


def test_a_spider_zip_is_imported_with_its_database_and_the_uploader_sees_it(client, operator, upload_dir,
                                                                             tmp_path, django_capture_on_commit_callbacks):
    archive = SimpleUploadedFile("spider_small.zip", spider_zip(tmp_path))
    with django_capture_on_commit_callbacks() as queued:
        response = upload(client, kind="spider", name="small", archive=archive)
    assert len(queued) == 1  # the import task, sent after commit
    page = client.get(response["Location"])
    assert "Waiting for a worker" in page.content.decode()
    job = run_job(response)
    assert job.status == "done", job.error
    assert job.result_url == "/datasets/small/"
    assert job.done == job.total == 3
    dataset = Dataset.objects.get(name="small")
    assert dataset.question_count == dataset.executable_count == 3
    database = Database.objects.get(name="concert_singer")
    assert Path(database.location).is_relative_to(upload_dir.resolve())
    assert DatabaseGrant.objects.filter(database=database, user=operator).exists()
    assert client.get("/datasets/small/").status_code == 200
    finished = client.get(job.get_absolute_url(), HTTP_HX_REQUEST="true").content.decode()
    assert "Open small" in finished and "hx-trigger" not in finished  # polling stops
    assert not (upload_dir / "datasets" / "incoming").exists()
    assert not list(upload_dir.rglob("upload.zip"))


def test_a_questions_file_plus_database_files_is_imported(client, operator, tmp_path):
    response = upload(client, kind="spider", name="loose",
                      questions=SimpleUploadedFile("dev.json", json.dumps(QUESTIONS).encode()),
                      databases=[SimpleUploadedFile("concert_singer.sqlite", sqlite_bytes(tmp_path))])
    job = run_job(response)
    assert job.status == "done", job.error
    assert Dataset.objects.get(name="loose").executable_count == 3


def test_a_jsonl_file_plus_database_files_is_imported(client, operator, tmp_path):
    lines = "\n".join(json.dumps({"question": q["question"], "sql": q["query"], "db_id": q["db_id"]})
                      for q in QUESTIONS)
    response = upload(client, kind="jsonl", name="lines",
                      questions=SimpleUploadedFile("questions.jsonl", lines.encode()),
                      databases=[SimpleUploadedFile("concert_singer.sqlite", sqlite_bytes(tmp_path))])
    job = run_job(response)
    assert job.status == "done", job.error
    assert Dataset.objects.get(name="lines").executable_count == 3


def _nothing_stored(upload_dir: Path) -> None:
    assert not Dataset.objects.exists()
    assert not Database.objects.filter(name="concert_singer").exists()
    assert [p for p in upload_dir.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize(("make", "message"), [
    (lambda tmp: spider_zip(tmp, questions=[{"db_id": "concert_singer", "question": "q"}]), "entry 1: needs 'query'"),
    (lambda tmp: spider_zip(tmp, questions="[" + "[" * 300 + "]" * 300 + "]"), "nested deeper than 100"),
    (lambda tmp: spider_zip(tmp, db_bytes=b"not a database"), "not usable"),
    (lambda tmp: b"PK\x03\x04 truncated", "not a zip file"),
])
def test_a_malformed_upload_fails_its_job_clearly_and_stores_nothing(client, operator, upload_dir, tmp_path,
                                                                    make, message):
    job = run_job(upload(client, kind="spider", name="broken",
                         archive=SimpleUploadedFile("broken.zip", make(tmp_path))))
    assert job.status == "failed"
    assert message in job.error
    page = client.get(job.get_absolute_url()).content.decode()
    assert escape(message) in page and "Nothing was stored" in page
    assert str(upload_dir) not in job.error  # paths inside the upload, never the server's
    _nothing_stored(upload_dir)


def test_an_upload_never_re_points_a_registered_database(client, operator, upload_dir, tmp_path, make_sqlite):
    theirs = make_sqlite("CREATE TABLE t (x INT);", "theirs.sqlite")
    Database.objects.create(name="concert_singer", engine="sqlite", location=str(theirs))
    job = run_job(upload(client, kind="spider", name="small",
                         archive=SimpleUploadedFile("s.zip", spider_zip(tmp_path))))
    assert job.status == "failed" and "names are not available" in job.error
    assert Database.objects.get(name="concert_singer").location == str(theirs)
    assert not Dataset.objects.exists()


def test_an_oversized_upload_is_refused_before_anything_is_stored(client, operator, upload_dir, tmp_path,
                                                                 settings):
    settings.T2S = {**settings.T2S, "UPLOAD_MAX_DATASET_BYTES": 1024}
    response = upload(client, kind="spider", name="big", archive=SimpleUploadedFile("s.zip", spider_zip(tmp_path)))
    assert "at most 1 KB is accepted" in response.content.decode()
    assert not ImportJob.objects.exists()
    _nothing_stored(upload_dir)


def test_a_taken_name_or_no_file_is_a_form_error(client, operator, tmp_path):
    Dataset.objects.create(name="taken", kind="spider", source_path="/x")
    response = upload(client, kind="spider", name="taken", archive=SimpleUploadedFile("s.zip", spider_zip(tmp_path)))
    assert "This name is not available" in response.content.decode()
    response = upload(client, kind="spider", name="none")
    assert "Upload either a zip archive" in response.content.decode()
    assert not ImportJob.objects.exists()


def test_viewers_cannot_upload_datasets(user_client, tmp_path):
    response = user_client.post("/datasets/", {"kind": "spider", "name": "x",
                                               "archive": SimpleUploadedFile("s.zip", spider_zip(tmp_path))})
    assert response.status_code == 403


def test_birds_own_archive_with_its_inner_databases_zip_is_imported(client, operator, tmp_path):
    import io
    import zipfile

    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zf:
        zf.writestr("dev_databases/concert_singer/concert_singer.sqlite", sqlite_bytes(tmp_path))
        zf.writestr("dev_databases/concert_singer/database_description/singer.csv",
                    "original_column_name,column_description,value_description\nName,the singer's name,\n")
    outer = io.BytesIO()
    with zipfile.ZipFile(outer, "w") as zf:
        zf.writestr("dev_20240627/dev.json", json.dumps([
            {"question": q["question"], "SQL": q["query"], "db_id": q["db_id"], "evidence": "",
             "difficulty": "simple"} for q in QUESTIONS]))
        zf.writestr("dev_20240627/dev_databases.zip", inner.getvalue())
    job = run_job(upload(client, kind="bird", name="bird-small",
                         archive=SimpleUploadedFile("dev.zip", outer.getvalue())))
    assert job.status == "done", job.error
    assert Dataset.objects.get(name="bird-small").executable_count == 3
    database = Database.objects.get(name="concert_singer")
    assert database.column_descriptions == {"singer.Name": "the singer's name"}
