"""Files uploaded through the browser or the API: stored in the app's data folder, checked, then imported.

Nothing needs a path on the server: a SQLite file lands in ``<first data dir>/databases/``, a dataset archive is
unpacked into ``<first data dir>/datasets/`` (both inside ``T2S_DATA_DIRS``, so the registration rules of
``locations.py`` accept them). Every size is checked while the bytes are written, so an oversized or lying upload
(a zip whose members claim small sizes) stops at the limit, and whatever was written is removed: a refused upload
stores nothing.

Long imports run on a worker and report progress into an ``ImportJob`` (``job_progress``), which the page polls.

An upload that never finished (the request died while storing, the import's worker died or its message was lost)
is removed by the periodic sweep once nothing was written to it for ``UPLOAD_ABANDONED_AFTER_S``
(``upload_folders_sweep`` here; the dataset imports' jobs in ``annotations.runs.uploads``).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sqlite3
import stat
import tempfile
import time
import uuid
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.utils import timezone

from agent.conf import agent_settings
from agent.models import NAME_UNAVAILABLE, Database, DatabaseGrant, ImportJob, name_validator
from agent.sql.base import human_bytes
from agent.textclean import clean_text

from . import locations
from .databases import database_register

logger = logging.getLogger(__name__)

CHUNK = 1024 * 1024
SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
MAX_ARCHIVE_MEMBERS = 100_000
_JUNK = ("__MACOSX/", ".DS_Store")
UPLOAD_KINDS = ("databases", "datasets")  # the folders of the first data dir that ``new_folder`` writes into
_UPLOAD_FOLDER = re.compile(r".+-[0-9a-f]{8}")  # what ``new_folder`` names a folder


def too_large(size: int, limit: int, what: str) -> str | None:
    """The refusal for an upload of ``size`` bytes, or None when it fits."""
    if size > limit:
        return f"The {what} is {human_bytes(size)}; at most {human_bytes(limit)} is accepted."
    return None


def upload_root() -> Path:
    """Where browser uploads land: the first data directory (``T2S_DATA_DIRS``)."""
    dirs = locations.data_dirs()
    if not dirs:
        raise ValidationError("No data directory is configured (T2S_DATA_DIRS).")
    dirs[0].mkdir(parents=True, exist_ok=True)
    return dirs[0]


def new_folder(kind: str, name: str) -> Path:
    """A fresh folder ``<data dir>/<kind>/<name>-<random>`` (never an existing one)."""
    folder = upload_root() / kind / f"{name}-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    return folder


def scratch_root() -> Path:
    """Where an upload handled within its request is kept while it is read (Django's temporary upload files,
    ``FILE_UPLOAD_TEMP_DIR``, and ``scratch_folder``): inside var/, which is never a database location, rather
    than the system's temporary directory, so that ``scratch_sweep`` finds what a killed request left there."""
    root = Path(settings.VAR_DIR) / "scratch"
    root.mkdir(mode=0o700, exist_ok=True)
    return root


def scratch_folder(prefix: str) -> Path:
    """A fresh private folder under ``scratch_root``; the caller removes it when done."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_root()))


def store_upload(chunks: Iterable[bytes], target: Path, *, limit: int, what: str) -> int:
    """Write ``chunks`` to ``target``, refusing (and removing the file) past ``limit`` bytes; returns the size."""
    written = 0
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with target.open("wb") as out:
            for chunk in chunks:
                written += len(chunk)
                if written > limit:
                    raise ValidationError(f"The {what} is larger than {human_bytes(limit)}, the most accepted.")
                out.write(chunk)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return written


def sqlite_problem(path: Path) -> str | None:
    """Why ``path`` is not a SQLite database with at least one table, or None.

    Opened read-only; the header, the schema and one page read of every table are checked (a truncated or
    corrupt file fails here rather than at its first query)."""
    try:
        with path.open("rb") as fh:
            if fh.read(16) != b"SQLite format 3\x00":
                return "it is not a SQLite database file"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            tables = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
            if not tables:
                return "it holds no table"
            for table in tables:
                conn.execute(f'SELECT * FROM "{table.replace(chr(34), chr(34) * 2)}" LIMIT 1').fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return f"SQLite cannot read it ({exc})"
    return None


def database_upload(*, chunks: Iterable[bytes], size: int, filename: str, name: str, description: str = "",
                    user) -> Database:
    """A SQLite file uploaded through the web or the API, registered under ``name`` through the usual registration.

    Stored in ``<data dir>/databases/``, checked as a real SQLite database, then ``database_register`` (same rules
    as any registration; introspection and indexes on a worker). The uploader is granted the database. Any refusal
    removes the stored file."""
    errors: dict[str, list[str]] = {}
    try:
        name_validator(name)
    except ValidationError as exc:
        errors["name"] = exc.messages
    if not errors and Database.objects.filter(name=name).exists():
        errors["name"] = [NAME_UNAVAILABLE]
    refusal = too_large(size, agent_settings.UPLOAD_MAX_DATABASE_BYTES, "file")
    if refusal:
        errors["file"] = [refusal]
    if errors:
        raise ValidationError(errors)
    folder = new_folder("databases", name)
    target = folder / f"{name}.sqlite"
    try:
        try:
            store_upload(chunks, target, limit=agent_settings.UPLOAD_MAX_DATABASE_BYTES, what="file")
        except ValidationError as exc:
            raise ValidationError({"file": exc.messages}) from None
        problem = sqlite_problem(target)
        if problem:
            raise ValidationError({"file": [f"{clean_text(filename)[:200]} was not registered: {problem}."]})
        with transaction.atomic():
            database = database_register(name=name, location=str(target), description=description,
                                         must_be_new=True, user=user)
            if user is not None and not user.is_superuser:
                DatabaseGrant.objects.get_or_create(database=database, user=user, defaults={"granted_by": user})
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return database


# --- archives -----------------------------------------------------------------------------------


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def extract_zip(archive: Path, dest: Path, *, max_bytes: int,
                progress: Callable[[int, int], None] | None = None) -> None:
    """Unpack ``archive`` into ``dest`` safely: no member outside ``dest`` (absolute paths, ``..``), no symlinks,
    at most ``MAX_ARCHIVE_MEMBERS`` members and ``max_bytes`` unpacked, counted as written (a member lying about
    its size stops at the limit too). ``progress(bytes_done, bytes_total)`` as it goes. ValidationError otherwise;
    the caller removes ``dest``."""
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ValidationError(f"The archive is not a zip file ({exc}).") from None
    with zf:
        members = [i for i in zf.infolist() if not any(j in i.filename for j in _JUNK)]
        if len(members) > MAX_ARCHIVE_MEMBERS:
            raise ValidationError(f"The archive holds {len(members)} files; at most {MAX_ARCHIVE_MEMBERS}.")
        declared = sum(i.file_size for i in members)
        if declared > max_bytes:
            raise ValidationError(f"The archive unpacks to {human_bytes(declared)}; at most {human_bytes(max_bytes)}.")
        root = dest.resolve()
        written = 0
        for info in members:
            target = (root / info.filename).resolve()
            if info.filename.startswith(("/", "\\")) or (target != root and root not in target.parents):
                raise ValidationError(f"The archive member {clean_text(info.filename)[:200]!r} points outside it.")
            if _is_symlink(info):
                raise ValidationError(f"The archive member {clean_text(info.filename)[:200]!r} is a symbolic link.")
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with zf.open(info) as src, target.open("wb") as out:
                    while chunk := src.read(CHUNK):
                        written += len(chunk)
                        if written > max_bytes:
                            raise ValidationError(f"The archive unpacks to more than {human_bytes(max_bytes)}.")
                        out.write(chunk)
                        if progress:
                            progress(written, declared)
            except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError, EOFError) as exc:
                raise ValidationError(f"The archive is damaged at {clean_text(info.filename)[:200]!r} ({exc}).") \
                    from None


# --- jobs ---------------------------------------------------------------------------------------


def job_create(*, kind: str, name: str, params: dict, staging: Path, user) -> ImportJob:
    return ImportJob.objects.create(kind=kind, name=name, params=params, staging=str(staging),
                                    created_by=user if user is not None and user.is_authenticated else None)


class JobReporter:
    """``progress(done, total)`` for an import service, written to the job at most every ``every_s`` seconds
    (and at every change of stage), each write its own short transaction."""

    def __init__(self, job: ImportJob, *, every_s: float = 0.5) -> None:
        self.job_id = job.pk
        self.every_s = every_s
        self._last = 0.0
        self.stage = ""

    def begin(self, stage: str, total: int | None = None) -> None:
        self.stage = stage
        self._write(stage=stage, done=0, total=total, status=ImportJob.Status.RUNNING)
        self._last = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - self._last >= self.every_s:
            self._last = now
            self._write(done=done, total=total)

    def _write(self, **fields) -> None:
        fields["updated_at"] = timezone.now()  # the job is alive: the sweep of abandoned uploads leaves it
        self._write_fields(**fields)

    def _write_fields(self, **fields) -> None:
        """Inside an import's transaction (PostgreSQL writes a dataset's questions in one), progress goes through a
        connection of its own, committed at once, so the page sees it while the import runs. A job row that
        connection cannot see (created in the same open transaction) is updated in that transaction instead."""
        if connection.vendor == "postgresql" and connection.in_atomic_block:
            own = connections.create_connection(DEFAULT_DB_ALIAS)
            try:
                columns = ", ".join(f"{own.ops.quote_name(k)} = %s" for k in fields)
                with own.cursor() as cursor:
                    cursor.execute(f"UPDATE {own.ops.quote_name(ImportJob._meta.db_table)} SET {columns} "
                                   "WHERE id = %s", [*fields.values(), self.job_id])
                    if cursor.rowcount:
                        return
            finally:
                own.close()
        ImportJob.objects.filter(pk=self.job_id).update(**fields)


def job_finish(*, job: ImportJob, result_url: str, stage: str = "") -> None:
    now = timezone.now()
    ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.DONE, result_url=result_url,
                                               stage=stage or "finished", finished_at=now, updated_at=now)


def job_fail(*, job: ImportJob, error: str) -> None:
    now = timezone.now()
    ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.FAILED, error=clean_text(error)[:5000],
                                               finished_at=now, updated_at=now)


# --- abandoned uploads --------------------------------------------------------------------------


def upload_folders_sweep(*, older_than_s: float, in_use: Iterable[str] = ()) -> list[Path]:
    """Remove the folders ``new_folder`` made for uploads that never finished: no registered database and no
    import job points into one, nor any path of ``in_use`` (the caller's: e.g. datasets' source paths), and
    nothing in it was written for ``older_than_s``. Returns the folders removed.

    A finished upload is always pointed at (a database upload by its database, a dataset upload by its job);
    one being stored is being written. What is left is an upload whose request or worker died mid-way."""
    dirs = locations.data_dirs()
    if not dirs:
        return []
    candidates = [folder for kind in UPLOAD_KINDS if (dirs[0] / kind).is_dir()
                  for folder in (dirs[0] / kind).iterdir()
                  if _UPLOAD_FOLDER.fullmatch(folder.name) and folder.is_dir() and not folder.is_symlink()]
    if not candidates:
        return []
    pointed = [*Database.objects.filter(engine=Database.Engine.SQLITE).values_list("location", flat=True),
               *ImportJob.objects.exclude(staging="").values_list("staging", flat=True), *in_use]
    used = [Path(os.path.realpath(p)) for p in pointed if p]
    cutoff = time.time() - older_than_s
    removed = []
    for folder in candidates:
        real = folder.resolve()
        if any(p == real or real in p.parents for p in used) or _written_since(folder, cutoff):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        logger.info("removed the abandoned upload %s", folder)
        removed.append(folder)
    return removed


def scratch_sweep(*, older_than_s: float) -> list[Path]:
    """Remove what requests that died while handling an upload left in ``scratch_root``: every entry nothing
    was written to for ``older_than_s`` (a request lasts minutes; the threshold is hours). Returns what was
    removed."""
    root = Path(settings.VAR_DIR) / "scratch"
    if not root.is_dir():
        return []
    cutoff = time.time() - older_than_s
    removed = []
    for entry in root.iterdir():
        if _written_since(entry, cutoff):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        logger.info("removed the abandoned upload %s", entry)
        removed.append(entry)
    return removed


def _written_since(folder: Path, cutoff: float) -> bool:
    """Whether anything in ``folder`` (itself included) was written after ``cutoff`` (a timestamp)."""
    for parent, dirnames, filenames in os.walk(folder):
        for name in [".", *dirnames, *filenames]:
            try:
                if os.lstat(os.path.join(parent, name)).st_mtime > cutoff:
                    return True
            except OSError:  # removed meanwhile
                continue
    return False
