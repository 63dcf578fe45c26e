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
import os
import socket
import time
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql

from . import pg_roles
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
    ms_since,
    row_size,
)
from .guard import check_read_only
from .stats import column_stats
from .watchdog import WATCHDOG

_FETCH_BATCH = 2000
HARD_STOP_S = 0.7
_SYSTEM_SCHEMAS = "('pg_catalog', 'information_schema')"


class PostgresConnector(Connector):
    engine = "postgresql"

    def __init__(self, dsn: str, *, limits: Limits | None = None, connect_timeout: int = 10,
                 refuse: frozenset[tuple[str, int]] = frozenset(), check_role: bool = True) -> None:
        """``refuse``: server identities (``pg_roles.server_identity``) never to use, e.g. the app's own database.

        The role is checked on every connection and again at the start of each query's transaction, so a role
        altered after registration is refused at its next query. ``check_role=False`` skips both: only tests
        of the READ ONLY layer on its own use it."""
        super().__init__(limits=limits)
        self.dsn = dsn
        self._refuse = refuse
        self._check_role = check_role
        self._connect_timeout = connect_timeout
        self._abandoned = False
        self._names: dict[str, tuple[str, str]] = {}
        self._cursor_seq = 0
        self._conn = self._connect()

    def _connect(self) -> psycopg.Connection:
        """A new connection, its role checked (every connection and reconnection), read-only from then on."""
        try:
            conn = psycopg.connect(self.dsn, autocommit=False, connect_timeout=self._connect_timeout,
                                   application_name="t2s-studio-target")
        except psycopg.Error as exc:
            raise ConnectionFailed(f"Cannot connect to PostgreSQL: {_first_line(exc)}") from exc
        if self._check_role:
            try:
                problems = pg_roles.role_problems(conn)
                if self._refuse and pg_roles.server_identity(conn) in self._refuse:
                    problems.insert(0, "it is the app's own database")
                conn.rollback()
            except psycopg.Error as exc:
                conn.close()
                raise ConnectionFailed(f"Cannot check the PostgreSQL role: {_first_line(exc)}") from exc
            if problems:
                conn.close()
                raise _refused(problems)
        conn.read_only = True
        return conn

    @property
    def dialect(self) -> str:
        return "postgres"

    def execute(self, sql: str, *, limits: Limits | None = None) -> QueryResult:
        limits = limits or self.limits
        text = check_read_only(sql, self.dialect)
        return self._run(text, limits)

    def _run(self, text: str, limits: Limits, params: Any = None, *, trusted: bool = False) -> QueryResult:
        """``trusted``: the app's own introspection SQL, which skips the per-query role check (the connection's
        check still holds): it runs no one's query, and a large schema's statistics take thousands of them."""
        started = time.monotonic()
        deadline = started + limits.timeout_s
        rows: list[tuple[Any, ...]] = []
        size = total = 0
        exact = True
        truncated_bytes = False
        columns: tuple[str, ...] = ()
        self._cursor_seq += 1
        # The watchdog cancels the query at the deadline: statement_timeout alone restarts with every
        # FETCH, so a slow result fetched in batches could otherwise run several limits long.
        if self._abandoned:
            self._reconnect()
        token = WATCHDOG.arm(deadline, self._cancel)
        # A server busy inside one function call (repeat() building 500 MB) honours the cancel only when
        # the call returns: past the limit + HARD_STOP_S the connection is cut and replaced.
        hard = WATCHDOG.arm(deadline + HARD_STOP_S, self._abandon)
        try:
            with self._conn.cursor() as setup:
                ms = max(1, int(limits.timeout_s * 1000))
                # One round trip: the transaction's settings, then (unless off) the role check of this query.
                check = self._check_role and not trusted
                setup.execute(_setup_sql(ms, check_role=check))
                if check:
                    while setup.nextset():
                        pass
                    problems = pg_roles.problems_from(setup.fetchone())
                    if problems:
                        self._drop_connection()
                        raise _refused(problems)
            # Declaring a cursor plans the query without running it: it gives the result's columns,
            # which the bounded form below names one by one.
            with self._conn.cursor(name=f"t2s_p{self._cursor_seq}") as probe:
                probe.execute(text, params)
                columns = tuple(d.name for d in probe.description or ())
                types = [d.type_code for d in probe.description or ()]
            with self._conn.cursor(name=f"t2s_q{self._cursor_seq}") as cur:
                cur.itersize = _FETCH_BATCH
                cur.execute(_bounded(text, types, limits.max_bytes), params)
                while True:
                    batch = cur.fetchmany(_FETCH_BATCH)
                    if not batch:
                        break
                    for row in batch:
                        total += 1
                        if len(rows) < limits.max_rows and not truncated_bytes:
                            values = row[:-1]
                            size += row_size(values)
                            if not row[-1] or size > limits.max_bytes:
                                truncated_bytes = True  # False: the server held back a row past the byte budget
                            else:
                                rows.append(values)
                    del batch
                    if total >= limits.max_rows + limits.count_cap or time.monotonic() > deadline:
                        exact = False
                        break
        except pg_errors.QueryCanceled:
            if rows:
                return QueryResult(columns, rows, total, False, truncated_bytes, ms_since(started))
            raise QueryTimeout(f"Query stopped after {limits.timeout_s:g} s (time limit).") from None
        except (pg_errors.ReadOnlySqlTransaction, pg_errors.InsufficientPrivilege) as exc:
            raise ReadOnlyViolation(f"Refused: the database is read-only ({_first_line(exc)}).") from None
        except (pg_errors.ProgramLimitExceeded, pg_errors.OutOfMemory) as exc:
            raise ResultTooLarge(f"result too large (limit {human_bytes(limits.max_bytes)}): "
                                 f"{_first_line(exc)}") from None
        except psycopg.Error as exc:
            if self._abandoned:
                raise QueryTimeout(f"Query stopped after {limits.timeout_s:g} s (time limit).") from None
            if isinstance(exc, psycopg.OperationalError):
                raise ConnectionFailed(_first_line(exc)) from None
            raise SQLError(_first_line(exc)) from None
        finally:
            # Disarming waits for a cancel already on its way, so it cannot reach the next query; then the
            # transaction ends here, whatever happened (an abandoned connection is replaced at the next query).
            WATCHDOG.disarm(token)
            WATCHDOG.disarm(hard)
            if not self._abandoned:
                self._rollback()
        if truncated_bytes and not rows:
            raise ResultTooLarge(f"result too large (limit {human_bytes(limits.max_bytes)}): "
                                 "the first row alone is larger")
        return QueryResult(columns, rows, total, exact, truncated_bytes, ms_since(started))

    def _cancel(self) -> None:
        self._conn.cancel_safe(timeout=2.0)

    def _abandon(self) -> None:
        """Cut the connection's socket (from the watchdog thread): the blocked read returns at once."""
        self._abandoned = True
        try:
            sock = socket.socket(fileno=os.dup(self._conn.fileno()))
        except (OSError, psycopg.Error):
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            sock.close()

    def _reconnect(self) -> None:
        """A new connection in place of an abandoned one, checked like the first (``_connect``)."""
        self._drop_connection()
        self._conn = self._connect()
        self._abandoned = False

    def _drop_connection(self) -> None:
        """Close the connection; the next query opens (and checks) a new one."""
        self._abandoned = True
        try:
            self._conn.close()
        except psycopg.Error:
            pass

    def _rollback(self) -> None:
        try:
            self._conn.rollback()
        except psycopg.Error:
            pass

    def _internal(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        return self._run(sql, Limits(timeout_s=60, max_rows=100_000, max_bytes=100_000_000, count_cap=0),
                         params, trusted=True).rows

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
                                          primary_key=name in pk, stats=stats, declared_type=ctype))
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


def _refused(problems: list[str]) -> pg_roles.RoleRefused:
    return pg_roles.RoleRefused("Refused: connect as a role that can only read (python manage.py "
                                f"create_readonly_role): {'; '.join(problems)}.")


_TEXT_TYPES = {25, 1043, 1042, 19}  # text, varchar, bpchar, name: octet_length is their size as sent
_BYTEA = 17
_BUDGET_SETTING = "t2s.sent_bytes"  # sent as hex text: two characters a byte
# Sent without parameters (the time limit is a literal), several statements go in one message.
_SETUP = pg_sql.SQL("SET LOCAL statement_timeout = {ms}; SET LOCAL idle_in_transaction_session_timeout = 60000; "
                    f"SET LOCAL {_BUDGET_SETTING} = 0")


def _setup_sql(ms: int, *, check_role: bool) -> pg_sql.Composed:
    """The transaction's settings and (unless off) the role check, in one message."""
    setup = _SETUP.format(ms=pg_sql.Literal(ms))
    return setup + pg_sql.SQL("; ") + pg_roles.CHECK_SQL if check_role else setup


def _size_of(name: str, type_oid: int) -> str:
    # octet_length reads a text or bytea value's size from its header (no copy, even when compressed);
    # other types are measured in their text form, which is what the server sends.
    if type_oid in _TEXT_TYPES:
        return f"coalesce(octet_length({name}), 0)"
    if type_oid == _BYTEA:
        return f"coalesce(2 * octet_length({name}) + 2, 0)"
    return f"coalesce(octet_length({name}::text), 0)"


def _bounded(text: str, types: list[int], max_bytes: int) -> str:
    """The query wrapped so that the server never sends more than about ``max_bytes`` of row data.

    Each row's size is added, in order, to a transaction-local setting (a running sum that,
    unlike a window function, never spools the rows); a row that is alone larger than the budget,
    or that would pass it, is sent as NULLs with a false marker (the last column), so it is counted
    without being transferred (a single 500 MB cell never leaves the server). The marker is
    dropped before the caller sees the row. Columns are renamed by position (a query may repeat
    or omit names); OFFSET 0 keeps the planner from merging the levels, so each row's size is
    computed once and the query's own row order is kept.
    """
    budget = int(max_bytes)
    names = [f"t2s_c{i}" for i in range(len(types))]
    size = " + ".join([_size_of(f"t2s_q.{n}", t) for n, t in zip(names, types, strict=True)] + ["16"])
    ok = f"(t2s_s.t2s_len <= {budget} AND t2s_s.t2s_cum <= {budget})"
    kept = "".join(f"CASE WHEN {ok} THEN t2s_s.{n} END, " for n in names)
    running = (f"set_config('{_BUDGET_SETTING}', (current_setting('{_BUDGET_SETTING}')::bigint "
               f"+ least(t2s_l.t2s_len, {budget + 1}))::text, true)::bigint")
    aliases = f"({', '.join(names)})" if names else ""
    return (
        f"SELECT {kept}{ok} FROM ("
        f"SELECT t2s_l.*, {running} AS t2s_cum FROM ("
        f"SELECT t2s_q.*, {size} AS t2s_len FROM (\n"
        f"{text}\n"
        f") AS t2s_q{aliases} OFFSET 0) AS t2s_l OFFSET 0) AS t2s_s"
    )


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__

