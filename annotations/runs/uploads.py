"""Datasets uploaded through the browser or the API: a Spider- or BIRD-shaped zip archive, or a questions file
(Spider/BIRD JSON, JSONL or CSV) plus SQLite files, imported on a worker with progress.

``dataset_upload_start`` (in the request) stores the files in the app's data folder and queues the import;
``dataset_upload_run`` (the Celery task) unpacks, checks every database file, and calls ``dataset_import`` with
its progress going to the job. A failure at any step removes every file and registration it made: a refused
upload stores nothing. An upload that never finished is removed by ``abandoned_uploads_sweep``.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from agent import policies as agent_policies
from agent.conf import agent_settings
from agent.models import NAME_UNAVAILABLE, Database, DatabaseGrant, ImportJob, Workspace, name_validator
from agent.services import leases, uploads
from agent.services.jobs import enqueue_on_commit
from annotations.runs.models import Dataset
from annotations.runs.services import dataset_import

logger = logging.getLogger(__name__)
TASK = "annotations.tasks.import_uploaded_dataset"
QUESTION_SUFFIXES = (".json", ".jsonl", ".csv")
_DB_FOLDERS = ("database", "dev_databases", "databases")


@dataclass
class UploadedFile:
    """One file of a request, as plain data (the service never sees Django's upload objects)."""

    name: str
    size: int
    chunks: Iterable[bytes]


def import_summary(dataset: Dataset) -> str:
    """What an import ends with: its questions and, at once, how many of them can run here (a database file)."""
    return f"imported {dataset.question_count} questions, {dataset.executable_count} executable here"


def check_dataset_name(name: str) -> None:
    try:
        name_validator(name)
    except ValidationError as exc:
        raise ValidationError({"name": exc.messages}) from None
    if Dataset.objects.filter(name=name).exists():
        raise ValidationError({"name": [NAME_UNAVAILABLE]})


def dataset_upload_start(*, kind: str, name: str, user, archive: UploadedFile | None = None,
                         questions: UploadedFile | None = None,
                         database_files: Sequence[UploadedFile] = (), workspace: Workspace | None = None,
                         ) -> ImportJob:
    """Store the uploaded files and queue their import; returns the job the progress page follows.

    Either ``archive`` (a zip holding e.g. ``dev.json`` and ``database/<db_id>/<db_id>.sqlite``) or ``questions``
    plus ``database_files`` (each named ``<db_id>.sqlite``). ``workspace``: one the uploader belongs to; the
    dataset and its new databases go there, so its members see them (and its runs) at once."""
    if kind not in Dataset.Kind.values:
        raise ValidationError({"kind": [f"Choose one of {', '.join(Dataset.Kind.values)}."]})
    if workspace is not None and not agent_policies.member_workspaces(user).filter(pk=workspace.pk).exists():
        raise ValidationError({"workspace": ["You are not in this workspace."]})
    check_dataset_name(name)
    if (archive is None) == (questions is None):
        raise ValidationError("Upload either a zip archive, or a questions file (with its database files).")
    limit = agent_settings.UPLOAD_MAX_DATASET_BYTES
    files = [archive] if archive is not None else [questions, *database_files]
    refusal = uploads.too_large(sum(f.size for f in files), limit, "upload")
    if refusal:
        raise ValidationError(refusal)
    if questions is not None:
        suffix = Path(questions.name).suffix.lower()
        if suffix not in QUESTION_SUFFIXES:
            raise ValidationError({"questions": [f"A questions file ends in {', '.join(QUESTION_SUFFIXES)}."]})
        db_names = [Path(f.name).stem for f in database_files]
        for f in database_files:
            if not f.name.lower().endswith(uploads.SQLITE_SUFFIXES):
                raise ValidationError({"databases": [f"{f.name}: a database file ends in "
                                                     f"{', '.join(uploads.SQLITE_SUFFIXES)}."]})
            try:
                name_validator(Path(f.name).stem)
            except ValidationError:
                raise ValidationError({"databases": [f"{f.name}: its name (the db_id) may hold letters, digits, "
                                                     "'_', '.' or '-' only."]}) from None
        if len(set(db_names)) != len(db_names):
            raise ValidationError({"databases": ["Two database files have the same name."]})
    incoming = uploads.new_folder("datasets", name)
    try:
        if archive is not None:
            uploads.store_upload(archive.chunks, incoming / "upload.zip", limit=limit, what="archive")
        else:
            suffix = Path(questions.name).suffix.lower()
            stored = "dev.json" if kind != Dataset.Kind.JSONL and suffix == ".json" else f"questions{suffix}"
            uploads.store_upload(questions.chunks, incoming / stored, limit=limit, what="questions file")
            for f in database_files:
                db_id = Path(f.name).stem
                uploads.store_upload(f.chunks, incoming / "database" / db_id / f"{db_id}.sqlite", limit=limit,
                                     what=f"database file {f.name}")
        with transaction.atomic():
            job = uploads.job_create(kind=ImportJob.Kind.DATASET, name=name, staging=incoming, user=user,
                                     params={"kind": kind, "archive": archive is not None,
                                             "workspace": workspace.pk if workspace is not None else None})
            enqueue_on_commit(TASK, job.pk)
    except BaseException:
        shutil.rmtree(incoming, ignore_errors=True)
        raise
    return job


def _dataset_root(folder: Path, kind: str) -> Path:
    """The file or folder ``dataset_import`` reads, found in an unpacked archive (at most 3 levels down)."""
    def depth(p: Path) -> int:
        return len(p.relative_to(folder).parts)

    files = [p for p in folder.rglob("*") if p.is_file() and depth(p) <= 4]
    if kind in (Dataset.Kind.SPIDER, Dataset.Kind.BIRD):
        devs = sorted((p for p in files if p.name == "dev.json"), key=depth)
        if not devs:  # e.g. BIRD's dev.json under another name: a JSON file beside a databases folder
            devs = sorted((p for p in files if p.suffix == ".json"
                           and any((p.parent / d).is_dir() for d in _DB_FOLDERS)), key=depth)
        if not devs:
            raise ValidationError(f"No dev.json found in the archive (a {kind} dataset holds dev.json and "
                                  f"{'database/' if kind == Dataset.Kind.SPIDER else 'dev_databases/'}).")
        return devs[0].parent if devs[0].name == "dev.json" else devs[0]
    found = sorted((p for p in files if p.suffix.lower() in (".jsonl", ".csv")), key=depth)
    if not found:
        raise ValidationError("No .jsonl or .csv questions file found in the archive.")
    return found[0]


def _unpack_nested_databases(root: Path, reporter: uploads.JobReporter, budget: int) -> None:
    """BIRD ships ``dev_databases.zip`` inside its archive: unpack it in place when no folder is there."""
    base = root if root.is_dir() else root.parent
    for nested in sorted(base.glob("*databases*.zip")):
        if not (base / nested.stem).is_dir():
            reporter.begin(f"unpacking {nested.name}")
            uploads.extract_zip(nested, base, max_bytes=budget, progress=reporter)
            nested.unlink()


def _database_files(root: Path) -> list[Path]:
    base = root if root.is_dir() else root.parent
    return sorted(p for d in _DB_FOLDERS if (base / d).is_dir() for p in (base / d).glob("*/*")
                  if p.is_file() and p.suffix.lower() in uploads.SQLITE_SUFFIXES)


def dataset_upload_run(*, job: ImportJob) -> None:
    """Unpack, check and import one uploaded dataset, reporting into ``job``. Never raises for bad input: the job
    says what was wrong and nothing stays stored."""
    if job.status in (ImportJob.Status.DONE, ImportJob.Status.FAILED):
        return  # a redelivered task whose import ended
    incoming = Path(job.staging)
    kind = job.params.get("kind", Dataset.Kind.SPIDER)
    reporter = uploads.JobReporter(job)
    existing_dbs = set(Database.objects.values_list("pk", flat=True))
    folder = incoming / "data"
    try:
        shutil.rmtree(folder, ignore_errors=True)  # a re-run after a dead worker starts clean
        folder.mkdir(parents=True)
        budget = agent_settings.UPLOAD_MAX_EXTRACTED_BYTES
        if job.params.get("archive"):
            reporter.begin("unpacking the archive")
            uploads.extract_zip(incoming / "upload.zip", folder, max_bytes=budget, progress=reporter)
            (incoming / "upload.zip").unlink(missing_ok=True)
        else:
            for entry in incoming.iterdir():
                if entry != folder:
                    entry.rename(folder / entry.name)
        root = _dataset_root(folder, kind)
        _unpack_nested_databases(root, reporter, budget)
        files = _database_files(root)
        reporter.begin("checking the database files", len(files))
        problems = []
        for n, path in enumerate(files, start=1):
            problem = uploads.sqlite_problem(path)
            if problem:
                problems.append(f"{path.relative_to(folder)}: {problem}")
            reporter(n, len(files))
        if problems:
            raise ValidationError(["Nothing was imported; these database files are not usable:", *problems])
        check_dataset_name(job.name)
        reporter.begin("registering databases and importing questions")
        workspace = Workspace.objects.filter(pk=job.params.get("workspace")).first() \
            if job.params.get("workspace") else None
        dataset = dataset_import(kind=kind, path=root, name=job.name, user=job.created_by, build_indexes=False,
                                 progress=reporter, repoint=False, workspace=workspace)
        if job.created_by is not None and not job.created_by.is_superuser:
            # The uploader sees what they uploaded (a dataset is visible when all its databases are).
            for database in Database.objects.filter(pk__in=dataset.questions.exclude(database=None)
                                                    .values("database")).exclude(pk__in=existing_dbs):
                DatabaseGrant.objects.get_or_create(database=database, user=job.created_by,
                                                    defaults={"granted_by": job.created_by})
        uploads.job_finish(job=job, result_url=dataset.get_absolute_url(),
                           stage=import_summary(dataset))
    except ValidationError as exc:
        _undo(folder, existing_dbs)
        # Paths inside the upload, not on the server.
        uploads.job_fail(job=job, error=" ".join(exc.messages).replace(f"{folder.resolve()}/", "")
                         .replace(str(folder.resolve()), "the upload"))
    except Exception as exc:  # the job must end either way; the log has the traceback
        logger.exception("import of uploaded dataset %s failed", job.pk)
        _undo(folder, existing_dbs)
        uploads.job_fail(job=job, error=f"The import failed: {exc}")


def _undo(folder: Path, existing_dbs: set[int]) -> None:
    """Remove what a failed import registered in ``folder`` and the files themselves."""
    for database in Database.objects.exclude(pk__in=existing_dbs).filter(location__startswith=str(folder.resolve())):
        database.delete()
    shutil.rmtree(folder.parent, ignore_errors=True)


# --- abandoned uploads --------------------------------------------------------------------------


def abandoned_uploads_sweep(*, older_than_s: float | None = None) -> dict[str, int]:
    """Remove what uploads that never finished left behind, once nothing was written to them for ``older_than_s``
    (default ``UPLOAD_ABANDONED_AFTER_S``): a dataset import whose job stayed queued or importing (its message
    was lost, its worker died) is failed and its files and the databases it registered are removed; failed jobs
    that old are deleted (their files went when they failed); folders of uploads whose request died while
    storing are removed (``uploads.upload_folders_sweep``), and so are the temporary files of requests that died
    while reading an upload (``uploads.scratch_sweep``: exemplar sets, prediction files). A finished import, a registered upload, and the
    files of a dataset are never touched. Returns how many of each were removed."""
    if older_than_s is None:
        older_than_s = float(agent_settings.UPLOAD_ABANDONED_AFTER_S)
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    abandoned = 0
    for job in ImportJob.objects.filter(kind=ImportJob.Kind.DATASET, updated_at__lt=cutoff,
                                        status__in=[ImportJob.Status.QUEUED, ImportJob.Status.RUNNING]):
        abandoned += _abandon(job)
    old_failed, _ = ImportJob.objects.filter(status=ImportJob.Status.FAILED, updated_at__lt=cutoff).delete()
    folders = uploads.upload_folders_sweep(
        older_than_s=older_than_s, in_use=Dataset.objects.exclude(source_path="").values_list("source_path", flat=True))
    scratch = uploads.scratch_sweep(older_than_s=older_than_s)
    return {"abandoned_jobs": abandoned, "failed_jobs_deleted": old_failed, "folders": len(folders),
            "scratch": len(scratch)}


def _abandon(job: ImportJob) -> int:
    """End a dataset import nobody carries on: 1 when it was cleaned up, 0 when it is left (it had finished after
    all, or what it wrote is in use)."""
    staging = Path(job.staging).resolve() if job.staging else None
    dataset = Dataset.objects.filter(name=job.name).first()
    ours = (dataset is not None and staging is not None
            and Path(dataset.source_path).resolve().is_relative_to(staging))  # names are checked free at upload
    if ours and dataset.question_count:
        # Imported (its last step counts the questions): the worker stopped before saying so. Its files are the
        # dataset's now.
        uploads.job_finish(job=job, result_url=dataset.get_absolute_url(),
                           stage=import_summary(dataset))
        return 0
    if ours and dataset.runs.exists():
        return 0  # half imported, yet a run uses it: left as it is
    # Claimed only if untouched since read: a job a worker has just taken up again is left to it.
    now = timezone.now()
    if not ImportJob.objects.filter(pk=job.pk, status=job.status, updated_at=job.updated_at).update(
            status=ImportJob.Status.FAILED, finished_at=now, updated_at=now,
            error="The import was abandoned: nothing happened to it for "
                  f"{agent_settings.UPLOAD_ABANDONED_AFTER_S / 3600:g} hours (its worker stopped, or the queue "
                  "lost it). Its files were removed; upload the dataset again."):
        return 0
    if ours:
        dataset.delete()  # half written (an import on the embedded database stopped mid-way)
    if staging is not None:
        _undo(staging / "data", set())  # the databases it registered (in its own folder), then the folder
    logger.info("dataset upload %s (%s) abandoned: removed", job.pk, job.name)
    return 1


def abandoned_uploads_sweep_if_due() -> None:
    """The periodic sweep's hook (``annotations.apps``): one process an hour (or a quarter of the threshold)."""
    period = min(3600.0, float(agent_settings.UPLOAD_ABANDONED_AFTER_S) / 4)
    if leases.sweep_turn("abandoned-uploads", period):
        abandoned_uploads_sweep()
