"""Uploads that never finished (the request died while storing, the import's message was lost, its worker died)
are removed by the periodic sweep once nothing was written to them for T2S_UPLOAD_ABANDONED_AFTER_H; an upload
being stored or imported, a finished import and a registered database are never touched."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from agent import signals as agent_signals
from agent.models import Database, ImportJob
from agent.roles import OPERATOR, VIEWER
from agent.services import uploads as agent_uploads
from annotations.runs import uploads
from annotations.runs.models import Dataset
from tests.conftest import give_roles
from tests.support.uploads import spider_zip, sqlite_bytes

pytestmark = pytest.mark.django_db
DAY = 24 * 3600


@pytest.fixture
def operator(client, django_user_model):
    account = give_roles(django_user_model.objects.create_user("opal", password="pw-opal-123"), OPERATOR, VIEWER)
    client.force_login(account)
    return account


def age(path: Path, seconds: float) -> Path:
    """Make everything in ``path`` last written ``seconds`` ago."""
    then = time.time() - seconds
    for parent, dirnames, filenames in os.walk(path):
        for name in [*dirnames, *filenames]:
            os.utime(os.path.join(parent, name), (then, then))
    os.utime(path, (then, then))
    return path


def age_job(job: ImportJob, seconds: float) -> None:
    ImportJob.objects.filter(pk=job.pk).update(updated_at=timezone.now() - timedelta(seconds=seconds))


def upload_dataset(client, name: str, tmp_path) -> ImportJob:
    response = client.post("/datasets/", {"kind": "spider", "name": name,
                                          "archive": SimpleUploadedFile(f"{name}.zip", spider_zip(tmp_path))})
    assert response.status_code == 302, response.content.decode()[:500]
    return ImportJob.objects.get(pk=int(response["Location"].rstrip("/").rsplit("/", 1)[1]))


def test_a_dataset_upload_whose_import_never_ran_is_failed_and_its_files_removed(client, operator, tmp_path):
    lost = upload_dataset(client, "lost", tmp_path)  # its message was lost: never imported
    recent = upload_dataset(client, "waiting", tmp_path)  # queued an hour ago: a busy worker may still take it
    assert lost.status == recent.status == ImportJob.Status.QUEUED
    age_job(lost, 2 * DAY)
    age(Path(lost.staging), 2 * DAY)
    age_job(recent, 3600)

    assert uploads.abandoned_uploads_sweep()["abandoned_jobs"] == 1
    lost.refresh_from_db()
    assert lost.status == ImportJob.Status.FAILED and "abandoned" in lost.error
    assert not Path(lost.staging).exists()
    assert Path(recent.staging, "upload.zip").is_file()
    page = client.get(lost.get_absolute_url()).content.decode()
    assert "abandoned" in page  # the uploader is told why

    uploads.dataset_upload_run(job=recent)  # the worker takes it late: the import works
    recent.refresh_from_db()
    assert recent.status == ImportJob.Status.DONE and Dataset.objects.filter(name="waiting").exists()


def test_an_import_whose_worker_died_loses_its_registrations_and_files_and_a_finished_one_is_kept(
        client, operator, tmp_path, monkeypatch):
    def die_after_registering(**kwargs):
        agent_uploads.database_register(name="half", location=str(next(Path(kwargs["path"]).rglob("*.sqlite"))),
                                        refresh="none")
        raise KeyboardInterrupt  # the worker is stopped mid-import: nothing after this runs

    died = upload_dataset(client, "died", tmp_path)
    done = upload_dataset(client, "done", tmp_path)
    uploads.dataset_upload_run(job=done)
    real_import = uploads.dataset_import
    monkeypatch.setattr(uploads, "dataset_import", die_after_registering)
    with pytest.raises(KeyboardInterrupt):
        uploads.dataset_upload_run(job=died)
    monkeypatch.setattr(uploads, "dataset_import", real_import)
    died.refresh_from_db()
    done.refresh_from_db()
    assert died.status == ImportJob.Status.RUNNING and done.status == ImportJob.Status.DONE
    kept = Database.objects.get(name="concert_singer").location
    for job in (died, done):
        age_job(job, 2 * DAY)
        age(Path(job.staging), 2 * DAY)

    assert uploads.abandoned_uploads_sweep()["abandoned_jobs"] == 1
    died.refresh_from_db()
    assert died.status == ImportJob.Status.FAILED and not Path(died.staging).exists()
    assert not Database.objects.filter(name="half").exists()
    done.refresh_from_db()
    assert done.status == ImportJob.Status.DONE  # a finished import: its databases live in its folder
    assert Path(kept).is_file() and Database.objects.get(name="concert_singer").location == kept
    assert Dataset.objects.get(name="done").question_count == 3

    # a day later the failed job's record goes too; the finished one stays
    age_job(died, 2 * DAY)
    assert uploads.abandoned_uploads_sweep()["failed_jobs_deleted"] == 1
    assert not ImportJob.objects.filter(pk=died.pk).exists() and ImportJob.objects.filter(pk=done.pk).exists()
    assert Path(kept).is_file()


def test_an_import_that_finished_but_was_not_marked_done_is_marked_done(client, operator, tmp_path, monkeypatch):
    job = upload_dataset(client, "unmarked", tmp_path)
    monkeypatch.setattr(agent_uploads, "job_finish", lambda **kwargs: None)  # the worker died right before
    uploads.dataset_upload_run(job=job)
    monkeypatch.undo()
    age_job(job, 2 * DAY)
    age(Path(job.staging), 2 * DAY)
    assert uploads.abandoned_uploads_sweep()["abandoned_jobs"] == 0
    job.refresh_from_db()
    assert job.status == ImportJob.Status.DONE and job.result_url == "/datasets/unmarked/"
    assert Path(Database.objects.get(name="concert_singer").location).is_file()


def test_folders_of_uploads_whose_request_died_are_removed_and_nothing_else(upload_dir, tmp_path, staff):
    registered = agent_uploads.database_upload(chunks=[sqlite_bytes(tmp_path)], size=10, filename="shop.sqlite",
                                               name="shop", user=staff)
    half = agent_uploads.new_folder("databases", "cut")  # the request died while the file was being written
    (half / "cut.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    storing = agent_uploads.new_folder("datasets", "slow")  # being stored right now
    (storing / "upload.zip").write_bytes(b"PK")
    dead_dataset = agent_uploads.new_folder("datasets", "gone")
    (dead_dataset / "upload.zip").write_bytes(b"PK")
    by_hand = upload_dir / "datasets" / "spider"  # put there by someone, not an upload's folder
    by_hand.mkdir(parents=True)
    (by_hand / "dev.json").write_text("[]")
    imported = agent_uploads.new_folder("datasets", "byhand")  # a dataset imported from it by a command
    (imported / "questions.jsonl").write_text("{}")
    Dataset.objects.create(name="byhand", kind="jsonl", source_path=str(imported / "questions.jsonl"))
    for folder in (Path(registered.location).parent, half, dead_dataset, by_hand, imported):
        age(folder, 2 * DAY)

    swept = uploads.abandoned_uploads_sweep()
    assert swept["folders"] == 2 and not half.exists() and not dead_dataset.exists()
    assert Path(registered.location).is_file() and (storing / "upload.zip").is_file()
    assert (by_hand / "dev.json").is_file() and (imported / "questions.jsonl").is_file()


def test_files_of_requests_that_died_while_reading_an_upload_are_removed_once_old(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    old_folder = age(agent_uploads.scratch_folder("exemplars-"), 2 * DAY)  # an exemplar import killed mid-way
    (old_folder / "set.zip").write_bytes(b"PK")
    age(old_folder, 2 * DAY)
    old_file = agent_uploads.scratch_root() / "tmpab12.upload.json"  # Django's spooled upload of a killed request
    old_file.write_bytes(b"[]")
    age(old_file, 2 * DAY)
    current = agent_uploads.scratch_folder("exemplars-")  # a request reading its upload right now
    (current / "set.zip").write_bytes(b"PK")

    swept = uploads.abandoned_uploads_sweep()
    assert swept["scratch"] == 2 and not old_folder.exists() and not old_file.exists()
    assert (current / "set.zip").is_file()


def test_uploads_read_within_a_request_are_kept_where_the_sweep_looks(staff, monkeypatch):
    """Django spools a large upload to FILE_UPLOAD_TEMP_DIR and the exemplar import unpacks into a scratch folder:
    both under var/scratch, not the system's temporary directory, which nothing of ours sweeps."""
    from django.core.files.uploadedfile import TemporaryUploadedFile

    from annotations.exemplars import importer

    spooled = TemporaryUploadedFile("big.json", "application/json", 0, None)
    try:
        assert Path(spooled.temporary_file_path()).parent == agent_uploads.scratch_root()
    finally:
        spooled.close()
    seen = []

    def fake_import(path, **_kwargs):
        seen.append(Path(path))
        raise importer.ImportProblem(["not a set"])

    monkeypatch.setattr(importer, "import_json", fake_import)
    with pytest.raises(importer.ImportProblem):
        importer.import_upload(chunks=[b"{}"], size=2, filename="set.json", user=staff)
    assert seen and seen[0].parent.parent == agent_uploads.scratch_root() and not seen[0].parent.exists()


def test_the_periodic_sweep_runs_it_once_an_hour(settings):
    settings.T2S = {**settings.T2S, "UPLOAD_ABANDONED_AFTER_S": 2 * 3600.0}
    first = age(agent_uploads.new_folder("databases", "first"), 3 * 3600)
    agent_signals.sweep.send_robust(sender=None)  # what the sweep of Beat's task or a worker's keeper sends
    assert not first.exists()
    second = age(agent_uploads.new_folder("databases", "second"), 3 * 3600)
    agent_signals.sweep.send_robust(sender=None)  # within the hour: another process's turn was taken
    assert second.exists()
