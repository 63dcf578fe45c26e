"""Read-only SQLite connector.

Writes are stopped by the engine, in layers: the file is opened with
``mode=ro``, ``PRAGMA query_only`` is on, and an authorizer denies every
action that is not a read (writes, ATTACH/DETACH, PRAGMA other than a few
introspection ones, ``load_extension``). A progress handler interrupts a
query past its deadline. The sqlglot guard runs first, as an extra layer.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from .base import (
    ColumnInfo,
    ConnectionFailed,
    Connector,
    ForeignKey,
    Limits,
    QueryResult,
    QueryTimeout,
    ReadOnlyViolation,
    SchemaInfo,
    SQLError,
    TableInfo,
    ms_since,
    row_size,
)
from .guard import check_read_only
from .stats import column_stats

_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}
_INTROSPECTION_PRAGMAS = {"table_info", "table_xinfo", "foreign_key_list", "index_list", "index_info"}
_DENIED_FUNCTIONS = {"load_extension", "writefile", "readfile", "edit", "fts3_tokenizer"}
_PROGRESS_STEPS = 5_000


class SQLiteConnector(Connector):
    engine = "sqlite"

    def __init__(self, path: str | os.PathLike[str], *, limits: Limits | None = None) -> None:
        super().__init__(limits=limits)
        self.path = Path(path)
        if not self.path.is_file():
            raise ConnectionFailed(f"SQLite file not found: {self.path}")
        uri = self.path.resolve().as_uri() + "?mode=ro"
        try:
            self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA query_only = ON")
        except sqlite3.Error as exc:
            raise ConnectionFailed(f"Cannot open {self.path}: {exc}") from exc
        self._conn.text_factory = _lenient_text
        self._deadline = float("inf")
        self._conn.set_authorizer(self._authorize)
        self._conn.set_progress_handler(self._progress, _PROGRESS_STEPS)

    @property
    def dialect(self) -> str:
        return "sqlite"

    # --- engine-level guards ------------------------------------------------

    def _authorize(self, action: int, arg1: Any, arg2: Any, db_name: Any, trigger: Any) -> int:
        if action == sqlite3.SQLITE_FUNCTION:
            return sqlite3.SQLITE_DENY if str(arg2).lower() in _DENIED_FUNCTIONS else sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA:
            return sqlite3.SQLITE_OK if str(arg1).lower() in _INTROSPECTION_PRAGMAS else sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY

    def _progress(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0

    # --- queries ------------------------------------------------------------

    def execute(self, sql: str, *, limits: Limits | None = None) -> QueryResult:
        limits = limits or self.limits
        text = check_read_only(sql, self.dialect)
        return self._run(text, limits)

    def _run(self, text: str, limits: Limits) -> QueryResult:
        started = time.monotonic()
        self._deadline = started + limits.timeout_s
        rows: list[tuple[Any, ...]] = []
        size = 0
        total = 0
        exact = True
        truncated_bytes = False
        try:
            cursor = self._conn.execute(text)
            columns = tuple(d[0] for d in cursor.description or ())
            for row in cursor:
                total += 1
                if len(rows) < limits.max_rows and not truncated_bytes:
                    size += row_size(row)
                    if size > limits.max_bytes:
                        truncated_bytes = True
                    else:
                        rows.append(tuple(row))
                elif total >= limits.max_rows + limits.count_cap:
                    exact = False
                    break
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc) and time.monotonic() > self._deadline:
                if rows or total:
                    # Counting past the rows we keep ran out of time: keep what we have.
                    return QueryResult(columns, rows, total, False, truncated_bytes, ms_since(started))
                raise QueryTimeout(f"Query stopped after {limits.timeout_s:g} s (time limit).") from None
            raise _translate(exc) from None
        except sqlite3.DatabaseError as exc:
            raise _translate(exc) from None
        except sqlite3.Warning as exc:  # e.g. "You can only execute one statement at a time."
            raise SQLError(str(exc)) from None
        finally:
            self._deadline = float("inf")
        return QueryResult(columns, rows, total, exact, truncated_bytes, ms_since(started))

    def _internal(self, sql: str) -> list[tuple[Any, ...]]:
        """Trusted introspection SQL: still read-only (authorizer, query_only), no guard parse."""
        return self._run(sql, Limits(timeout_s=60, max_rows=10_000, max_bytes=50_000_000, count_cap=0)).rows

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
                                          stats=stats))
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
        self._conn.close()


def _lenient_text(raw: bytes) -> str:
    # Spider and BIRD files hold some invalid UTF-8; never fail a query over it.
    return raw.decode("utf-8", errors="replace")


def _translate(exc: sqlite3.Error) -> SQLError:
    message = str(exc)
    lowered = message.lower()
    if "not authorized" in lowered or "readonly" in lowered or "read-only" in lowered or "query_only" in lowered:
        return ReadOnlyViolation(f"Refused: the database is read-only ({message}).")
    return SQLError(message)
