"""Registering target databases, introspecting them and building their tool indexes."""

from __future__ import annotations

import fcntl
import logging
import threading
from contextlib import contextmanager, nullcontext
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from agent.conf import agent_settings
from agent.dsn_secrets import DsnKeyError, reveal_dsn
from agent.models import NAME_UNAVAILABLE, Database
from agent.sql import Connector, Limits, SQLError, connect, with_foreign_keys
from agent.sql.pg_roles import RoleRefused
from agent.sql.sandbox import SQLiteSandbox
from agent.tools import BackendUnavailable, ToolBox, build_indexes, is_stale, read_manifest

from . import audit, locations
from .jobs import enqueue_on_commit
from .workspaces import default_workspace

logger = logging.getLogger(__name__)

REFRESH_TASK = "agent.tasks.refresh_database"
# What the indexes and the stored schema are built from: changing one means a new introspection and build.
_SOURCE_FIELDS = ("engine", "location", "column_descriptions", "column_backend")


def engine_for_location(location: str) -> str:
    return Database.Engine.POSTGRESQL if location.startswith(("postgres://", "postgresql://")) else Database.Engine.SQLITE


def normalise_location(engine: str, location: str, *, restricted: bool = True) -> str:
    """The stored form of a target's location (a resolved SQLite path, checked to be one); ValidationError if not.

    ``restricted`` (the web, the API, the admin): SQLite files only from a data directory; otherwise (commands)
    any readable file but the app's own data (``agent/services/locations.py``)."""
    location = location.strip()
    if engine == Database.Engine.POSTGRESQL:
        return location
    return locations.sqlite_location(location, restricted=restricted)


_threads = threading.local()
# Query processes started ahead (``prestart_sandboxes``), each handed to the first thread that needs one.
_spare_sandboxes: list[SQLiteSandbox] = []
_spares_lock = threading.Lock()


def thread_sandbox() -> SQLiteSandbox:
    """This thread's SQLite query process, started once and reused by every session the thread runs.

    A worker thread runs one session at a time, and a sandbox serves one thread (it is not thread-safe);
    starting a Python child for every session cost more than the session's own work on a busy machine.
    A thread takes a spare started by ``prestart_sandboxes`` when there is one.
    """
    sandbox = getattr(_threads, "sandbox", None)
    if sandbox is None:
        with _spares_lock:
            sandbox = _spare_sandboxes.pop() if _spare_sandboxes else None
        sandbox = _threads.sandbox = sandbox or SQLiteSandbox()
    return sandbox


def prestart_sandboxes(count: int) -> int:
    """Start query processes for ``count`` threads now (a threads-pool worker at start-up: one per thread).

    A fresh worker's first sessions would otherwise each boot one exactly while the worker receives and starts
    them, which delays their start (BENCHMARKS.md, "Runs"). Returns how many were started (spares already
    waiting count towards ``count``)."""
    with _spares_lock:
        missing = max(0, count - len(_spare_sandboxes))
        for _ in range(missing):
            sandbox = SQLiteSandbox()
            sandbox.start()
            _spare_sandboxes.append(sandbox)
    return missing


def open_connector(database: Database, *, limits: Limits | None = None,
                   sandbox: SQLiteSandbox | None = None) -> Connector:
    """A fresh read-only connector for one target database; the caller closes it.

    ``sandbox``: the SQLite query process to use (``thread_sandbox()`` in a worker); by default its own.
    The location is checked again at every connection: a file that has become the app's own data is refused."""
    limits = limits or Limits(timeout_s=agent_settings.QUERY_TIMEOUT_S, max_rows=agent_settings.QUERY_MAX_ROWS)
    if database.engine == Database.Engine.SQLITE:
        locations.check_sqlite_target(database.location)
        return connect(database.engine, database.location, limits=limits,
                       **({"sandbox": sandbox} if sandbox is not None else {}))
    try:
        dsn = reveal_dsn(database.location)  # the password is decrypted here only, for this connection
    except DsnKeyError as exc:
        raise SQLError(str(exc)) from None
    return connect(database.engine, dsn, limits=limits, refuse=locations.app_pg_identities())


def _shape(schema) -> set[tuple[str, str, str]]:
    return {(c.table.lower(), c.name.lower(), (c.type or "").lower()) for t in schema.tables for c in t.columns}


def schema_matches(*, database: Database, sqlite_path: str | Path) -> bool:
    """Whether the SQLite file has the same tables and columns (names and declared types, in any case) as the
    registered ``database``: a dataset upload may then use the registered one instead of its own copy."""
    limits = Limits(timeout_s=agent_settings.QUERY_TIMEOUT_S, max_rows=1)
    try:
        locations.check_sqlite_target(str(sqlite_path))
        with connect(Database.Engine.SQLITE, str(sqlite_path), limits=limits) as incoming, \
                open_connector(database, limits=limits) as registered:
            return _shape(incoming.introspect(with_stats=False)) == _shape(registered.introspect(with_stats=False))
    except SQLError:
        return False


def database_register(
    *, name: str, location: str, description: str = "", engine: str | None = None, is_demo: bool = False,
    column_descriptions: dict[str, str] | None = None, refresh: str = "async", must_be_new: bool = False,
    user=None,
    foreign_key_patches: list[dict] | None = None, workspace=None,
) -> Database:
    """Register (or re-point) a target database and schedule its introspection.

    ``refresh`` is ``"async"`` (a Celery task after commit), ``"sync"`` (now, in
    this process: the CLI and bootstrap use it) or ``"none"``. ``must_be_new``
    refuses a name already registered (the web form and the API) instead of re-pointing it.

    ``user``: the account registering through the web, the API or the admin. Their SQLite files must come from a
    data directory (``agent/services/locations.py``); without one (a server-side command) any readable file but
    the app's own data may be named.

    ``workspace``: where a new database goes (its members see it); without one, the default workspace. A
    database already registered stays in its workspace.
    """
    existing = Database.objects.filter(name=name).first()
    if existing is not None and must_be_new:
        raise ValidationError({"name": [NAME_UNAVAILABLE]})
    engine = engine or engine_for_location(location)
    location = normalise_location(engine, location, restricted=user is not None)
    database = existing or Database(name=name)
    changed = database.pk is None or not _same_location(database, location) or database.engine != engine
    if column_descriptions is not None and column_descriptions != database.column_descriptions:
        database.column_descriptions = column_descriptions
        changed = True
    if foreign_key_patches is not None and foreign_key_patches != database.foreign_key_patches:
        database.foreign_key_patches = foreign_key_patches
        changed = True
    database.engine = engine
    database.location = location
    if description or database.pk is None:
        database.description = description
    database.is_demo = is_demo or database.is_demo
    if database.workspace_id is None:
        database.workspace = workspace or default_workspace()
    if changed:
        database.status = Database.Status.PENDING
        database.status_message = ""
    database.full_clean()
    if engine == Database.Engine.POSTGRESQL:
        _check_pg_role(location)
    with transaction.atomic(), audit.acting_as(user) if user is not None else nullcontext():
        database.save()
        if refresh == "async" and changed:
            # force: new descriptions change the column index even when the target file did not change
            enqueue_on_commit(REFRESH_TASK, database.pk, force=True)
    if refresh == "sync" and (changed or database.status != Database.Status.READY):
        database_refresh(database=database, force=changed)
    return database


def _same_location(database: Database, location: str) -> bool:
    if database.engine != Database.Engine.POSTGRESQL:
        return database.location == location
    try:
        return reveal_dsn(database.location) == location
    except DsnKeyError:
        return False  # a password that cannot be read any more: the new one replaces it


def _check_pg_role(dsn: str) -> None:
    """Registration connects once: a role that is not read-only, or the app's own database, is refused now."""
    try:
        connect(Database.Engine.POSTGRESQL, dsn, limits=Limits(timeout_s=5, max_rows=1),
                refuse=locations.app_pg_identities()).close()
    except RoleRefused as exc:
        raise ValidationError({"location": [str(exc)]}) from None
    except SQLError:
        pass  # unreachable now: registered, and introspection reports the error on the database's page


def index_dir_for(database: Database) -> Path:
    return Path(agent_settings.INDEX_DIR) / f"db-{database.pk}"


def toolbox_for(database: Database, *, connector: Connector | None = None, **options) -> ToolBox:
    """The agent's tools on one database; use it as a context manager (``with toolbox_for(db) as tools:``)
    so its connector is closed.

    A target changed since its indexes were built is queued for a rebuild; the
    tools keep answering from the previous build meanwhile.
    """
    connector = connector or open_connector(database)
    try:
        if database.index_status == Database.IndexStatus.READY and is_stale(read_manifest(index_dir_for(database)),
                                                                             connector):
            _queue_rebuild(database)
        return ToolBox(connector, index_dir_for(database), **{"database_name": database.name, **options})
    except BaseException:
        connector.close()
        raise


def _queue_rebuild(database: Database) -> None:
    updated = Database.objects.filter(pk=database.pk, index_status=Database.IndexStatus.READY).update(
        index_status=Database.IndexStatus.STALE)
    if updated:
        database.index_status = Database.IndexStatus.STALE
        enqueue_on_commit(REFRESH_TASK, database.pk)


def database_refresh_queue(*, database: Database) -> None:
    """Mark the target pending and queue its re-introspection and index check (after commit)."""
    with transaction.atomic():
        Database.objects.filter(pk=database.pk).update(status=Database.Status.PENDING)
        enqueue_on_commit(REFRESH_TASK, database.pk)


def database_save(*, database: Database, changed: list[str] | tuple[str, ...]) -> Database:
    """Save an edited registration (the admin); a changed source (location, engine, descriptions, column
    backend) marks it pending and queues its refresh after commit, forced so the indexes are rebuilt."""
    database.location = normalise_location(database.engine, database.location)
    if database.engine == Database.Engine.POSTGRESQL and (database.pk is None or "location" in changed):
        _check_pg_role(database.location)
    rebuild = database.pk is None or any(f in _SOURCE_FIELDS for f in changed)
    if rebuild:
        database.status = Database.Status.PENDING
        database.status_message = ""
    database.full_clean()
    with transaction.atomic():
        database.save()
        if rebuild:
            enqueue_on_commit(REFRESH_TASK, database.pk, force=True)
    return database


def _stored_schema_is_current(schema: dict) -> bool:
    """A schema stored before statistics kept whitespace (and declared types were kept) has no declared types:
    it is introspected again rather than reused."""
    return all(c.get("declared_type") is not None for t in schema.get("tables", ()) for c in t.get("columns", ()))


def database_refresh(*, database: Database, force: bool = False) -> Database:
    """Introspect the target (schema, keys, row counts, statistics), store it, and (re)build its tool indexes.

    Skips the work when the target's fingerprint is unchanged, unless ``force``.
    """
    Database.objects.filter(pk=database.pk).update(status=Database.Status.INTROSPECTING, status_message="")
    Database.objects.filter(pk=database.pk).exclude(index_status=Database.IndexStatus.READY).update(
        index_status=Database.IndexStatus.QUEUED)
    try:
        with open_connector(database) as conn:
            fingerprint = conn.fingerprint()
            if not force and database.schema and fingerprint == database.schema_fingerprint \
                    and _stored_schema_is_current(database.schema):
                schema = database.schema_info()
            else:
                schema = conn.introspect(with_stats=True)
    except SQLError as exc:
        database.status = Database.Status.ERROR
        database.status_message = str(exc)
        database.save(update_fields=["status", "status_message", "updated_at"])
        logger.warning("introspection of %s failed: %s", database.name, exc)
        return database
    assert schema is not None
    # A dataset's patch (keys the target does not declare) joins the schema, the prompt and the join graph.
    schema = with_foreign_keys(schema, database.patched_foreign_keys())
    database.schema = schema.to_dict()
    database.schema_fingerprint = schema.fingerprint
    database.table_count = len(schema.tables)
    database.column_count = len(schema.columns)
    database.introspected_at = timezone.now()
    database.status = Database.Status.READY
    database.status_message = ""
    # Not a full save: index_status was set by the update above and is the index build's to change.
    database.save(update_fields=["schema", "schema_fingerprint", "table_count", "column_count", "introspected_at",
                                 "status", "status_message", "updated_at"])
    return database_build_indexes(database=database, schema=schema, force=force)


@contextmanager
def _build_lock(index_dir: Path):
    """One build per index directory at a time (two concurrent builds could delete each other's result)."""
    index_dir.mkdir(parents=True, exist_ok=True)
    with open(index_dir / ".build.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def database_build_indexes(*, database: Database, schema=None, force: bool = False) -> Database:
    """Build the tool indexes (column documents, value index, FK graph) unless they match the target."""
    index_dir = index_dir_for(database)
    try:
        with _build_lock(index_dir), open_connector(database) as conn:
            manifest = read_manifest(index_dir)
            if not force and manifest is not None and not is_stale(manifest, conn) \
                    and manifest.column_backend == database.column_backend:
                database.index_status = Database.IndexStatus.READY
                database.index_manifest = manifest.to_dict()
                database.index_error = ""
                database.save(update_fields=["index_status", "index_manifest", "index_error", "updated_at"])
                return database
            Database.objects.filter(pk=database.pk).update(index_status=Database.IndexStatus.BUILDING)
            manifest = build_indexes(conn, index_dir, schema=schema, column_backend=database.column_backend,
                                     descriptions=database.descriptions())
    except (SQLError, BackendUnavailable, OSError, ValueError) as exc:
        database.index_status = Database.IndexStatus.FAILED
        database.index_error = f"{type(exc).__name__}: {exc}"
        database.save(update_fields=["index_status", "index_error", "updated_at"])
        logger.warning("index build of %s failed: %s", database.name, exc)
        return database
    database.index_status = Database.IndexStatus.READY
    database.index_manifest = manifest.to_dict()
    database.index_error = ""
    database.save(update_fields=["index_status", "index_manifest", "index_error", "updated_at"])
    return database

