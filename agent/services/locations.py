"""Which SQLite files may become target databases: never the app's own data, and only data directories from the web.

Two rules, applied to the path after resolving symlinks and ``..``:

- **never** (every caller, the server-side commands included): the app database (and its ``-wal``/``-shm``
  files), the Celery broker file, the secret key and the encryption keys, anything else under ``var/`` that is
  not a data directory, and anything inside the project tree except the bundled demo database. By identity too,
  wherever the file is: a hard link to any of those files (or to anything in ``var/``, the cache, the index and
  gold-cache folders) is the same file (same device and inode), and a copy of the app database or the broker
  (``cp``, SQLite's backup API) is recognised by its content: a ``django_migrations`` table naming this
  project's apps, or the broker's ``kombu_message`` table;
- **from the web, the API and the admin**: only files inside a configured data directory
  (``T2S_DATA_DIRS``; by default ``var/uploads``, where browser uploads land) or the bundled demo database.

Every refusal from the web carries the same message, whether the file exists or not, so registration cannot be
used to probe the server's file system. A command (run by someone on the server) gets the specific reason.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import time
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ValidationError

from agent.conf import agent_settings

_SQLITE_MAGIC = b"SQLite format 3\x00"

REFUSED = ("This location cannot be registered. Use a SQLite file inside a data directory "
           "(ask a Data admin where uploads go) or a PostgreSQL DSN.")


def _real(path: str | os.PathLike) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def data_dirs() -> list[Path]:
    """The folders whose SQLite files the web, the API and the admin may register."""
    return [_real(d) for d in agent_settings.DATA_DIRS]


def _demo() -> Path:
    return _real(agent_settings.DEMO_DATABASE)


def _app_files() -> list[Path]:
    """Files that are the app's own data, wherever they live."""
    files: list[Path] = []
    for alias in settings.DATABASES.values():
        if alias.get("ENGINE") == "django.db.backends.sqlite3":
            for name in (alias.get("NAME"), (alias.get("TEST") or {}).get("NAME")):
                if name and str(name) != ":memory:":
                    base = _real(name)
                    files += [base, Path(f"{base}-wal"), Path(f"{base}-shm"), Path(f"{base}-journal")]
    broker = str(getattr(settings, "CELERY_BROKER_URL", "") or "")
    if broker.startswith("sqla+sqlite:///"):
        files.append(_real(broker.removeprefix("sqla+sqlite:///")))
    var = Path(settings.VAR_DIR)
    files += [_real(var / "secret_key"), _real(var / "encryption_key"), _real(agent_settings.DSN_KEY_FILE)]
    return files


def _app_folders() -> list[Path]:
    """Folders whose every file is the app's own: var/, the file cache, the tool indexes, the gold cache."""
    folders = [_real(settings.VAR_DIR), _real(agent_settings.INDEX_DIR)]
    for cache in settings.CACHES.values():
        if cache.get("BACKEND", "").endswith("FileBasedCache") and cache.get("LOCATION"):
            folders.append(_real(cache["LOCATION"]))
    gold = getattr(settings, "T2S", {}).get("GOLD_CACHE_DIR")
    if gold:
        folders.append(_real(gold))
    return folders


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _app_identities(app_files: list[Path]) -> set[tuple[int, int]]:
    """(device, inode) of every app file: the named ones and everything in the app's folders but data dirs."""
    found = {i for i in map(_identity, app_files) if i is not None}
    skip = data_dirs()
    for folder in _app_folders():
        for root, dirs, names in os.walk(folder):
            here = Path(root)
            dirs[:] = [d for d in dirs if not any(_inside(_real(here / d), s) for s in skip)]
            found.update(i for i in (_identity(here / n) for n in names) if i is not None)
    return found


def _is_app_file(path: Path, app_files: list[Path]) -> bool:
    """The file is one of the app's own under another name: the same inode (a hard link)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if (st.st_dev, st.st_ino) in {i for i in map(_identity, app_files) if i is not None}:
        return True
    # Only a file with another link can be an app file elsewhere: the folder walk is skipped for the rest.
    return st.st_nlink > 1 and (st.st_dev, st.st_ino) in _app_identities(app_files)


@functools.cache
def project_apps() -> frozenset[str]:
    """The labels of this project's Django apps (those whose code lives in the project tree)."""
    base = _real(settings.BASE_DIR)
    return frozenset(c.label for c in apps.get_app_configs() if _inside(_real(c.path), base))


_CONTENT_DEADLINE_S = 2.0


def _copy_reason(path: Path) -> str | None:
    """Why a SQLite file is a copy of the app's data: the app database (its ``django_migrations`` names this
    project's apps) or the broker file (``kombu_message``), made with ``cp`` or SQLite's backup API. A SQLite
    file that cannot be read for this check is refused too (it fails closed)."""
    if not _is_sqlite(path):
        return None
    copy = "it is a copy of the app's own database or broker"
    unreadable = "it could not be read to check that it is not a copy of the app's own data"
    deadline = time.monotonic() + _CONTENT_DEADLINE_S
    try:
        conn = sqlite3.connect(path.as_uri() + "?mode=ro", uri=True, timeout=1)
    except sqlite3.Error:
        return unreadable
    try:
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 1000)
        tables = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('django_migrations', 'kombu_message')")}
        if "kombu_message" in tables:
            return copy
        if "django_migrations" in tables:
            labels = sorted(project_apps())
            marks = ", ".join("?" * len(labels))
            if conn.execute(f"SELECT 1 FROM django_migrations WHERE app IN ({marks}) LIMIT 1", labels).fetchone():
                return copy
        return None
    except sqlite3.Error:
        return unreadable
    finally:
        conn.close()


def forbidden_reason(path: Path) -> str | None:
    """Why this (resolved) path is never a target, or None."""
    app_files = _app_files()
    if path in app_files or _is_app_file(path, app_files):
        return "it is the app's own data (database, broker or keys)"
    if path == _demo():
        return None
    if not any(_inside(path, d) for d in data_dirs()):
        if _inside(path, _real(settings.VAR_DIR)):
            return "it is inside the app's var/ directory"
        if _inside(path, _real(settings.BASE_DIR)):
            return "it is inside the project tree"
    return _copy_reason(path) if path.is_file() else None


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


def sqlite_location(location: str, *, restricted: bool) -> str:
    """The resolved path of a SQLite file that may be registered, or a ``ValidationError`` on ``location``.

    ``restricted`` (a request through the web, the API or the admin): only data directories, and one message for
    every refusal. Otherwise (a server-side command): any readable SQLite file but the app's own data.
    """
    path = _real(location.strip())
    reason = forbidden_reason(path)
    if restricted:
        allowed = path == _demo() or any(_inside(path, d) for d in data_dirs())
        if reason or not allowed or not path.is_file() or not _is_sqlite(path):
            raise ValidationError({"location": [REFUSED]})
        return str(path)
    if reason:
        raise ValidationError({"location": [f"Refused: {path} cannot be a target ({reason})."]})
    if not path.is_file():
        raise ValidationError({"location": [f"No such file: {path}"]})
    if not _is_sqlite(path):
        raise ValidationError({"location": [f"Not a SQLite database file: {path}"]})
    return str(path)


def data_path(location: str) -> Path:
    """A file or folder inside a data directory (a dataset imported through the web), or the one refusal."""
    path = _real(location.strip())
    if forbidden_reason(path) or not any(_inside(path, d) for d in data_dirs()) or not path.exists():
        raise ValidationError({"path": [REFUSED]})
    return path


def is_forbidden(location: str | os.PathLike) -> bool:
    """The file (symlinks and ``..`` resolved) is never a target: the app's own data, by path or identity."""
    return forbidden_reason(_real(location)) is not None


def check_sqlite_target(location: str) -> None:
    """At every connection: a registered file that has become forbidden (a symlink re-pointed, a hard link, a
    copy of the app database put in its place) is refused."""
    from agent.sql import ConnectionFailed

    if is_forbidden(location):
        raise ConnectionFailed("Refused: this location cannot be a target database.")


_app_identity: dict[str, frozenset] = {}


def app_pg_identities() -> frozenset[tuple[str, int]]:
    """The app's own PostgreSQL database as ``pg_roles.server_identity`` sees it (empty for a SQLite app database).

    Asked of the app's connection once per process and database name (tests switch to a test database)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return frozenset()
    name = connection.settings_dict["NAME"]
    if name not in _app_identity:
        from agent.sql.pg_roles import server_identity

        _app_identity[name] = frozenset({server_identity(connection)})
    return _app_identity[name]
