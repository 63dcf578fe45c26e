"""Read-only PostgreSQL connector (psycopg 3), never sharing Django's connections.

Every query runs in its own ``READ ONLY`` transaction that is always rolled
back, with ``statement_timeout`` set locally, through a server-side cursor
(``DECLARE ... CURSOR FOR``), which PostgreSQL accepts only for a single
SELECT/VALUES query; rows are fetched in batches so a huge result never sits
in memory. For defence in depth connect as a role that can only SELECT (see
README); ``default_transaction_read_only`` alone is a convenience a client
can switch off.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql

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

_FETCH_BATCH = 2000
_SYSTEM_SCHEMAS = "('pg_catalog', 'information_schema')"


class PostgresConnector(Connector):
    engine = "postgresql"

    def __init__(self, dsn: str, *, limits: Limits | None = None, connect_timeout: int = 10) -> None:
        super().__init__(limits=limits)
        self.dsn = dsn
        try:
            self._conn = psycopg.connect(dsn, autocommit=False, connect_timeout=connect_timeout,
                                         application_name="t2s-studio-target")
        except psycopg.Error as exc:
            raise ConnectionFailed(f"Cannot connect to PostgreSQL: {_first_line(exc)}") from exc
        self._conn.read_only = True
        self._names: dict[str, tuple[str, str]] = {}
        self._cursor_seq = 0

    @property
    def dialect(self) -> str:
        return "postgres"

    def execute(self, sql: str, *, limits: Limits | None = None) -> QueryResult:
        limits = limits or self.limits
        text = check_read_only(sql, self.dialect)
        return self._run(text, limits)

    def _run(self, text: str, limits: Limits, params: Any = None) -> QueryResult:
        started = time.monotonic()
        deadline = started + limits.timeout_s
        rows: list[tuple[Any, ...]] = []
        size = total = 0
        exact = True
        truncated_bytes = False
        self._cursor_seq += 1
        try:
            with self._conn.cursor() as setup:
                ms = max(1, int(limits.timeout_s * 1000))
                setup.execute(pg_sql.SQL("SET LOCAL statement_timeout = {}").format(pg_sql.Literal(ms)))
                setup.execute("SET LOCAL idle_in_transaction_session_timeout = 60000")
            with self._conn.cursor(name=f"t2s_q{self._cursor_seq}") as cur:
                cur.itersize = _FETCH_BATCH
                cur.execute(text, params)
                columns = tuple(d.name for d in cur.description or ())
                while True:
                    batch = cur.fetchmany(_FETCH_BATCH)
                    if not batch:
                        break
                    for row in batch:
                        total += 1
                        if len(rows) < limits.max_rows and not truncated_bytes:
                            size += row_size(row)
                            if size > limits.max_bytes:
                                truncated_bytes = True
                            else:
                                rows.append(tuple(row))
                    if total >= limits.max_rows + limits.count_cap or time.monotonic() > deadline:
                        exact = False
                        break
        except pg_errors.QueryCanceled:
            self._rollback()
            if rows:
                return QueryResult(columns, rows, total, False, truncated_bytes, ms_since(started))
            raise QueryTimeout(f"Query stopped after {limits.timeout_s:g} s (time limit).") from None
        except (pg_errors.ReadOnlySqlTransaction, pg_errors.InsufficientPrivilege) as exc:
            self._rollback()
            raise ReadOnlyViolation(f"Refused: the database is read-only ({_first_line(exc)}).") from None
        except psycopg.OperationalError as exc:
            self._rollback()
            raise ConnectionFailed(_first_line(exc)) from None
        except psycopg.Error as exc:
            self._rollback()
            raise SQLError(_first_line(exc)) from None
        self._rollback()
        return QueryResult(columns, rows, total, exact, truncated_bytes, ms_since(started))

    def _rollback(self) -> None:
        try:
            self._conn.rollback()
        except psycopg.Error:
            pass

    def _internal(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        return self._run(sql, Limits(timeout_s=60, max_rows=100_000, max_bytes=100_000_000, count_cap=0),
                         params).rows

    # --- introspection ------------------------------------------------------

    def _display(self, schema: str, table: str) -> str:
        return table if schema == "public" else f"{schema}.{table}"

    def quote_table(self, display: str) -> str:
        if display in self._names:
            schema, table = self._names[display]
        elif "." in display:
            schema, table = display.split(".", 1)
        else:
            schema, table = "public", display
        return f"{self.quote_ident(schema)}.{self.quote_ident(table)}"

    def introspect(self, *, with_stats: bool = True) -> SchemaInfo:
        rels = self._internal(
            "SELECT c.oid, n.nspname, c.relname, c.reltuples FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            f"WHERE c.relkind IN ('r', 'v', 'm', 'p') AND n.nspname NOT IN {_SYSTEM_SCHEMAS} "
            "AND n.nspname NOT LIKE 'pg_toast%%' AND NOT c.relispartition "
            "ORDER BY n.nspname <> 'public', n.nspname, c.relname"
        )
        oid_name = {oid: self._display(s, t) for oid, s, t, _ in rels}
        self._names = {self._display(s, t): (s, t) for _oid, s, t, _ in rels}
        cols = self._internal(
            "SELECT a.attrelid, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull "
            "FROM pg_attribute a WHERE a.attnum > 0 AND NOT a.attisdropped AND a.attrelid = ANY(%s) "
            "ORDER BY a.attrelid, a.attnum", ([r[0] for r in rels],))
        cons = self._internal(
            "SELECT con.conrelid, con.contype, con.conkey, con.confrelid, con.confkey, con.conname "
            "FROM pg_constraint con WHERE con.contype IN ('p', 'f') AND con.conrelid = ANY(%s) "
            "ORDER BY con.conrelid, con.conname", ([r[0] for r in rels],))
        attname = {(rel, num): name for rel, num, name, _t, _n in cols}
        tables = []
        for oid, schema, table, reltuples in rels:
            display = oid_name[oid]
            pk: tuple[str, ...] = ()
            fks = []
            for conrelid, contype, conkey, confrelid, confkey, _name in cons:
                if conrelid != oid:
                    continue
                if contype == "p":
                    pk = tuple(attname[(oid, k)] for k in conkey)
                elif confrelid in oid_name:
                    fks.append(ForeignKey(display, tuple(attname[(oid, k)] for k in conkey),
                                          oid_name[confrelid], tuple(attname[(confrelid, k)] for k in confkey)))
            quoted = f"{self.quote_ident(schema)}.{self.quote_ident(table)}"
            if reltuples and reltuples > 5_000_000:
                row_count = int(reltuples)  # estimate: an exact count would take too long
            else:
                try:
                    row_count = int(self._internal(f"SELECT COUNT(*) FROM {quoted}")[0][0])
                except SQLError:
                    row_count = None
            columns = []
            for rel, _num, name, ctype, notnull in cols:
                if rel != oid:
                    continue
                stats = None
                if with_stats:
                    stats = column_stats(self._internal, quoted, self.quote_ident(name), ctype, row_count)
                columns.append(ColumnInfo(table=display, name=name, type=ctype.upper(), nullable=not notnull,
                                          primary_key=name in pk, stats=stats))
            tables.append(TableInfo(display, tuple(columns), pk, tuple(fks), row_count))
        return SchemaInfo(engine=self.engine, tables=tuple(tables), fingerprint=self.fingerprint())

    def fingerprint(self) -> str:
        # Row-change counters and DDL-visible sizes: cheap, and they move when content does.
        rows = self._internal(
            "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0), count(*) FROM pg_stat_user_tables")
        ddl = self._internal(
            "SELECT md5(coalesce(string_agg(table_schema || '.' || table_name || '.' || column_name "
            "|| ':' || data_type, ',' ORDER BY table_schema, table_name, ordinal_position), '')) "
            f"FROM information_schema.columns WHERE table_schema NOT IN {_SYSTEM_SCHEMAS}")
        return hashlib.sha1(f"{rows[0]}:{ddl[0][0]}".encode()).hexdigest()[:16]

    def close(self) -> None:
        try:
            self._conn.close()
        except psycopg.Error:
            pass


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__

