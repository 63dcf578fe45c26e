"""Tiny real SQLite databases laid out as Spider/BIRD expect: ``<root>/<db_id>/<file>.sqlite``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest


@pytest.fixture
def make_db(tmp_path: Path):
    def build(db_id: str, script: str, *, filename: str | None = None, root: Path | None = None) -> Path:
        folder = (root or tmp_path / "database") / db_id
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / (filename or f"{db_id}.sqlite")
        conn = sqlite3.connect(path)
        conn.executescript(script)
        conn.commit()
        conn.close()
        return path

    return build
