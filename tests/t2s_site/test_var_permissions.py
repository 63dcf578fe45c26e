"""Files the app creates under var/ are 0600 and its directories 0700: no other account on the machine reads them."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.cache import cache
from django.db import connection

from agent.services import uploads

pytestmark = pytest.mark.django_db


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_var_dir_secret_key_app_database_and_cache_are_private():
    var = Path(settings.VAR_DIR)
    assert mode(var) == 0o700
    if not os.environ.get("SECRET_KEY"):
        assert mode(var / "secret_key") == 0o600
    if connection.vendor == "sqlite":
        database = Path(connection.settings_dict["NAME"])
        assert database.is_relative_to(var)
        for path in (database, Path(f"{database}-wal"), Path(f"{database}-shm")):
            if path.exists():
                assert mode(path) == 0o600, path
    cache.set("t2s:probe", 1)
    cache_dir = var / "cache"
    if cache_dir.is_dir():
        assert mode(cache_dir) == 0o700
        assert {mode(p) for p in cache_dir.iterdir()} == {0o600}


def test_broker_file_is_private():
    from kombu import Connection

    url = settings.CELERY_BROKER_URL
    if not url.startswith("sqla+sqlite"):
        # A server broker here (CI): the embedded one's file is made the same way, under var/ by this process.
        url = f"sqla+sqlite:///{Path(settings.VAR_DIR) / 'probe-broker.sqlite3'}"
    with Connection(url) as conn:  # a message through a queue of its own creates the broker's file
        queue = conn.SimpleQueue("t2s-permissions-probe")
        queue.put({"probe": 1})
        queue.get(timeout=10).ack()
        queue.close()
    broker = Path(url.removeprefix("sqla+sqlite:///"))
    assert mode(broker) == 0o600


def test_browser_uploads_are_private():
    folder = uploads.new_folder("databases", "probe")
    target = folder / "shop.sqlite"
    uploads.store_upload([b"SQLite format 3\x00", b"rest"], target, limit=1024, what="file")
    assert mode(folder) == 0o700 and mode(folder.parent) == 0o700
    assert mode(target) == 0o600


def test_an_older_install_is_tightened_on_start(tmp_path):
    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    var.chmod(0o755)
    (var / "secret_key").write_text("k" * 60)
    (var / "secret_key").chmod(0o644)
    (var / "app.sqlite3").write_bytes(b"")
    (var / "app.sqlite3").chmod(0o644)
    (var / "uploads").mkdir(mode=0o755)
    environ = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DJANGO_SETTINGS_MODULE")}
    subprocess.run([sys.executable, "manage.py", "check"], cwd=settings.BASE_DIR, check=True, timeout=300,
                   env={**environ, "T2S_VAR_DIR": str(var)}, capture_output=True)
    assert mode(var) == 0o700 and mode(var / "uploads") == 0o700
    assert mode(var / "secret_key") == 0o600 and mode(var / "app.sqlite3") == 0o600
    # A key made afresh is private from its first byte.
    (var / "secret_key").unlink()
    subprocess.run([sys.executable, "manage.py", "check"], cwd=settings.BASE_DIR, check=True, timeout=300,
                   env={**environ, "T2S_VAR_DIR": str(var)}, capture_output=True)
    assert mode(var / "secret_key") == 0o600
