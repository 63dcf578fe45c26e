"""A real ToolRunner for loop tests: ExecuteSQL runs on a small SQLite file, the other tools answer canned text."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agent.sql import SchemaInfo, SQLError, connect
from agent.tools import tool_names as registered_tools
from agent.tools.base import ToolResult

SCHOOL_SQL = """
CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT);
CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, singer_id INTEGER REFERENCES singer(singer_id),
                      year INTEGER);
CREATE TABLE enrollment (student_id INTEGER, course_id INTEGER, PRIMARY KEY (student_id, course_id));
CREATE TABLE grade (student_id INTEGER, course_id INTEGER, score REAL,
                    FOREIGN KEY (student_id, course_id) REFERENCES enrollment(student_id, course_id));
INSERT INTO singer VALUES (1, 'Adele', 'UK'), (2, 'Shakira', 'Colombia'), (3, 'Sting', 'UK');
INSERT INTO concert VALUES (10, 1, 2016), (11, 1, 2017), (12, 2, 2017), (13, 3, 2019);
INSERT INTO enrollment VALUES (1, 100), (1, 101), (2, 100);
INSERT INTO grade VALUES (1, 100, 3.5), (1, 101, 4.0), (2, 100, 2.5);
"""


def build_school_db(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHOOL_SQL)
    conn.close()
    return path


class ToolDouble:
    """Implements the ToolRunner protocol. ``canned`` maps a tool name to its observation text,
    or to an exception instance to raise (a buggy tool), or to a ToolResult (e.g. ok=False)."""

    def __init__(self, db_path: Path, canned: Mapping[str, Any] | None = None,
                 tool_names: Sequence[str] | None = None) -> None:
        self._db = connect("sqlite", str(db_path))
        self.schema: SchemaInfo = self._db.introspect(with_stats=False)
        self.tool_names = tuple(registered_tools() if tool_names is None else tool_names)
        self.canned = dict(canned or {})
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def run(self, name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> ToolResult:
        kwargs = dict(kwargs or {})
        self.calls.append((name, tuple(args), kwargs))
        started = time.monotonic()
        if name == "ExecuteSQL":
            sql = args[0] if args else kwargs["sql"]
            try:
                result = self._db.execute(sql)
            except SQLError as exc:
                return ToolResult(f"SQL error: {exc}", False, _ms(started), sql=sql)
            return ToolResult(repr(result.rows), True, _ms(started), sql=sql, result=result)
        answer = self.canned.get(name, f"{name} canned answer")
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, ToolResult):
            return answer
        return ToolResult(str(answer), True, _ms(started))

    def close(self) -> None:
        self._db.close()


def _ms(started: float) -> float:
    return (time.monotonic() - started) * 1000
