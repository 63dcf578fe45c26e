"""Files to upload in tests: a small Spider-shaped dataset built from the committed concert_singer slice."""

from __future__ import annotations

import io
import json
import sqlite3
import zipfile
from pathlib import Path

SLICE = Path(__file__).resolve().parent / "data" / "concert_singer.sql"
QUESTIONS = [
    {"db_id": "concert_singer", "question": "How many singers do we have?", "query": "SELECT count(*) FROM singer"},
    {"db_id": "concert_singer", "question": "How many concerts are there?", "query": "SELECT count(*) FROM concert"},
    {"db_id": "concert_singer", "question": "What are the names of the stadiums?", "query": "SELECT name FROM stadium"},
]


def sqlite_bytes(tmp_path: Path, name: str = "concert_singer") -> bytes:
    path = tmp_path / f"{name}-build.sqlite"
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(SLICE.read_text(encoding="utf-8"))
    conn.close()
    return path.read_bytes()


def spider_zip(tmp_path: Path, *, questions: list[dict] | str | None = None, top: str = "spider_small",
               db_bytes: bytes | None = None) -> bytes:
    """A zip as Spider ships it: <top>/dev.json and <top>/database/<db_id>/<db_id>.sqlite."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        raw = questions if isinstance(questions, str) else json.dumps(QUESTIONS if questions is None else questions)
        zf.writestr(f"{top}/dev.json", raw)  # a str: the file's text as given
        zf.writestr(f"{top}/database/concert_singer/concert_singer.sqlite",
                    sqlite_bytes(tmp_path) if db_bytes is None else db_bytes)
    return buffer.getvalue()
