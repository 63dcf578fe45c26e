"""Which SQLite files may become target databases: never the app's own data, and only data directories from the web.

Two rules, applied to the path after resolving symlinks and ``..``:

- **never** (every caller, the server-side commands included): the app database (and its ``-wal``/``-shm``
  files), the Celery broker file, the secret key and the encryption key, anything else under ``var/`` that is not
  a data directory, and anything inside the project tree except the bundled demo database;
- **from the web, the API and the admin**: only files inside a configured data directory
  (``T2S_DATA_DIRS``; by default ``var/uploads``, where browser uploads land) or the bundled demo database.

Every refusal from the web carries the same message, whether the file exists or not, so registration cannot be
used to probe the server's file system. A command (run by someone on the server) gets the specific reason.
"""

from __future__ import annotations

import os
from pathlib import Path

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
    files += [_real(var / "secret_key"), _real(var / "encryption_key")]
    return files


def forbidden_reason(path: Path) -> str | None:
    """Why this (resolved) path is never a target, or None."""
    if path in _app_files():
        return "it is the app's own data (database, broker or keys)"
    if path == _demo():
        return None
    if any(_inside(path, d) for d in data_dirs()):
        return None
    if _inside(path, _real(settings.VAR_DIR)):
        return "it is inside the app's var/ directory"
    if _inside(path, _real(settings.BASE_DIR)):
        return "it is inside the project tree"
    return None


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


def check_sqlite_target(location: str) -> None:
    """At every connection: a registered file that has become forbidden (e.g. a symlink re-pointed) is refused."""
    from agent.sql import ConnectionFailed

    if forbidden_reason(_real(location)):
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
