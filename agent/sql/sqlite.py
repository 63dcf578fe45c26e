"""Read-only SQLite connector.

Queries run in a child process (``sandbox.py``, ``_sqlite_child.py``) whose
memory the operating system caps and which is killed when a query overruns its
deadline, so one query cannot raise this process by more than its result
(``Limits.max_bytes``) nor run past its time limit plus half a second.

Writes are stopped by the engine, in layers: the file is opened with
``mode=ro``, ``PRAGMA query_only`` is on, and an authorizer denies every
action that is not a read (writes, ATTACH/DETACH, PRAGMA other than a few
introspection ones) and every function call not on the guard's allowlist
(``functions.py``: ``load_extension``, ``sqlite_*``...). A progress handler and a watchdog
interrupt a query past its deadline; ``SQLITE_LIMIT_LENGTH`` caps every value.
The sqlglot guard runs first, as an extra layer.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from ._sqlite_child import Child as _Child
from .base import (
    ColumnInfo,
    ConnectionFailed,
    Connector,
    ForeignKey,
    Limits,
    QueryResult,
    QueryTimeout,
    ReadOnlyViolation,
    ResultTooLarge,
    SchemaInfo,
    SQLError,
    TableInfo,
    human_bytes,
)
from .guard import check_read_only
from .sandbox import SQLiteSandbox
from .stats import column_stats
from .watchdog import WATCHDOG

# An answer from the child is at most the kept rows (max_bytes of Python memory, which marshal
# writes in fewer bytes) plus column names: anything larger means the child misbehaved.
_ANSWER_SLACK = 4 * 1024 * 1024


class SQLiteConnector(Connector):
    engine = "sqlite"

    def __init__(self, path: str | os.PathLike[str], *, limits: Limits | None = None,
                 sandbox: SQLiteSandbox | None = None) -> None:
        """``sandbox``: share one query process (e.g. one per thread in an evaluation); by default the
        connector starts its own on first use and stops it on ``close()``."""
        super().__init__(limits=limits)
        self.path = Path(path)
        if not self.path.is_file():
            raise ConnectionFailed(f"SQLite file not found: {self.path}")
        self._owns_sandbox = sandbox is None
        self._sandbox = sandbox or SQLiteSandbox()
        self._local: _Child | None = None

    @property
    def dialect(self) -> str:
        return "sqlite"

    # --- queries ------------------------------------------------------------

    def execute(self, sql: str, *, limits: Limits | None = None) -> QueryResult:
        limits = limits or self.limits
        text = check_read_only(sql, self.dialect)
        return self._run(text, limits)

    def _run(self, text: str, limits: Limits, params: Any = None) -> QueryResult:
        started = time.monotonic()
        request = {"path": str(self.path.resolve()), "sql": text,
                   "params": None if params is None else tuple(params), "timeout_s": float(limits.timeout_s),
                   "max_rows": int(limits.max_rows), "max_bytes": int(limits.max_bytes),
                   "count_cap": int(limits.count_cap)}
        answer = self._sandbox.request(request, timeout_s=limits.timeout_s,
                                       max_answer=limits.max_bytes + _ANSWER_SLACK)
        if answer is None:
            raise QueryTimeout(f"Query stopped after {limits.timeout_s:g} s (time limit).")
        if not answer.get("ok"):
            kind, message = answer.get("kind"), str(answer.get("message") or "query failed")
            raise _ERRORS.get(kind, SQLError)(message)
        rows = answer["rows"]
        if answer["truncated_bytes"] and not rows:
            raise ResultTooLarge(f"result too large (limit {human_bytes(limits.max_bytes)}): "
                                 "the first row alone is larger")
        return QueryResult(tuple(answer["columns"]), [tuple(r) for r in rows], int(answer["total"]),
                           bool(answer["exact"]), bool(answer["truncated_bytes"]),
                           (time.monotonic() - started) * 1000)

    def _internal(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Trusted introspection SQL (schema, statistics), run in this process: a round trip to the query
        process per statistic would make introspection several times slower. The SQL is ours, so the
        functions that escape SQLite's limits are never called; the data is not, so the same engine
        limits hold (read-only, value size capped, deadline) and the rows kept are capped at 20 MB,
        each value at 8 MB."""
        if self._local is None:
            self._local = _Child(watchdog=_SharedWatchdog())
        answer = self._local.run({"path": str(self.path.resolve()), "sql": sql,
                                  "params": None if params is None else tuple(params), "timeout_s": 60.0,
                                  "max_rows": 10_000, "max_bytes": 20_000_000, "count_cap": 0,
                                  "value_cap": 8 * 1024 * 1024})
        if not answer.get("ok"):
            raise _ERRORS.get(answer.get("kind"), SQLError)(str(answer.get("message") or "query failed"))
        return [tuple(r) for r in answer["rows"]]

    # --- introspection ------------------------------------------------------

    def introspect(self, *, with_stats: bool = True) -> SchemaInfo:
        names = [r[0] for r in self._internal(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite_%' ORDER BY type, name")]
        tables = []
        for name in names:
            q = self.quote_ident(name)
            info = self._internal(f"PRAGMA table_info({q})")
            pk = tuple(r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5]))
            fks = self._foreign_keys(name)
            try:
                row_count = int(self._internal(f"SELECT COUNT(*) FROM {q}")[0][0])
            except SQLError:
                row_count = None
            columns = []
            for _cid, col, ctype, notnull, _default, pk_pos in info:
                stats = None
                if with_stats:
                    stats = column_stats(self._internal, q, self.quote_ident(col), ctype or "", row_count)
                columns.append(ColumnInfo(table=name, name=col, type=(ctype or "").upper(),
                                          nullable=not notnull and not pk_pos, primary_key=bool(pk_pos),
                                          stats=stats, declared_type=ctype or ""))
            tables.append(TableInfo(name=name, columns=tuple(columns), primary_key=pk,
                                    foreign_keys=fks, row_count=row_count))
        return SchemaInfo(engine=self.engine, tables=tuple(tables), fingerprint=self.fingerprint())

    def _foreign_keys(self, table: str) -> tuple[ForeignKey, ...]:
        rows = self._internal(f"PRAGMA foreign_key_list({self.quote_ident(table)})")
        grouped: dict[int, list[tuple[Any, ...]]] = {}
        for row in rows:
            grouped.setdefault(row[0], []).append(row)
        fks = []
        # SQLite numbers foreign keys from the last declared one: reverse to get declaration order.
        for _id, parts in sorted(grouped.items(), reverse=True):
            parts.sort(key=lambda r: r[1])
            ref_table = parts[0][2]
            to_cols = [r[4] for r in parts]
            if any(c is None for c in to_cols):  # REFERENCES t without columns: the primary key
                ref_info = self._internal(f"PRAGMA table_info({self.quote_ident(ref_table)})")
                ref_pk = [r[1] for r in sorted((r for r in ref_info if r[5]), key=lambda r: r[5])]
                to_cols = ref_pk[: len(parts)] if ref_pk else to_cols
            fks.append(ForeignKey(table=table, columns=tuple(r[3] for r in parts),
                                  ref_table=ref_table, ref_columns=tuple(str(c) for c in to_cols)))
        return tuple(fks)

    def fingerprint(self) -> str:
        st = self.path.stat()
        return hashlib.sha1(f"{self.path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]

    def close(self) -> None:
        if self._owns_sandbox:
            self._sandbox.close()
        if self._local is not None:
            self._local.close()
            self._local = None


class _SharedWatchdog:
    """The process-wide watchdog thread, in the shape ``_sqlite_child.Child`` expects."""

    def __init__(self) -> None:
        self._token: int | None = None

    def arm(self, conn: sqlite3.Connection, deadline: float) -> None:
        self._token = WATCHDOG.arm(deadline, conn.interrupt)

    def disarm(self) -> None:
        if self._token is not None:
            WATCHDOG.disarm(self._token)
            self._token = None


_ERRORS: dict[Any, type[SQLError]] = {
    "timeout": QueryTimeout, "readonly": ReadOnlyViolation, "too_large": ResultTooLarge,
    "connect": ConnectionFailed,
}
