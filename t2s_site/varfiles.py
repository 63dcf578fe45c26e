"""``var/`` holds the app's secrets and data (secret key, encryption key, app database, broker, uploads, indexes):
only the account that runs the app may read it.

The web server, workers and commands all load the settings, which call ``make_private``: from then on the process
creates files 0600 and directories 0700 (umask 077), whatever code creates them (SQLite and its -wal/-shm files,
kombu's broker file, uploads, indexes, the file cache), and ``var/`` itself and what sits at its top are tightened
on every start, so an install made before this rule is fixed too.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

PRIVATE_UMASK = 0o077


def make_private(var_dir: Path) -> None:
    os.umask(PRIVATE_UMASK)
    var_dir.mkdir(parents=True, exist_ok=True)
    var_dir.chmod(0o700)
    for child in var_dir.iterdir():
        if child.is_symlink():
            continue  # never change what a link points to
        try:
            child.chmod(0o700 if child.is_dir() else 0o600)
        except OSError:
            pass  # a file owned by someone else (a shared mount): left as it is


def write_private(path: Path, data: bytes) -> None:
    """Create ``path`` with mode 0600 from the first byte (never readable by others, even for a moment)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def read_or_create_secret(path: Path, make=lambda: secrets.token_urlsafe(50).encode()) -> bytes:
    """The secret in ``path``, created (0600) on first use; two processes starting at once agree on one."""
    try:
        write_private(path, make())
    except FileExistsError:
        pass
    return path.read_bytes().strip()
