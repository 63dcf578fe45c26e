"""The process that runs SQLite queries on target files for ``sqlite.SQLiteConnector``.

Started by ``sandbox.SQLiteSandbox`` as ``python -I -S <this file>``: it imports
only the standard library (never Django or the app), so it starts in a few
milliseconds. It reads requests from stdin and writes answers to stdout, each
a 4-byte big-endian length and a ``marshal`` payload of plain values.

Why a separate process: SQLite's own limits cannot hold every bound. Some
built-in functions run for tens of seconds inside one call that neither the
progress handler nor ``interrupt()`` can stop (``printf('%.*c', 2e9, 'x')``),
and some build values past ``SQLITE_LIMIT_LENGTH`` (``replace``). Here the
operating system holds the bounds: the address space is capped
(``RLIMIT_AS``, ``MEMORY_BUDGET`` above what the process uses when idle) and
the parent kills the process when a query overruns its deadline. The engine
limits still come first, so the usual cases end with a precise message:
``SQLITE_LIMIT_LENGTH`` per value (sized from the result's column count), a
progress handler and a watchdog thread calling ``interrupt()`` at the deadline.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import pathlib
import resource
import sqlite3
import struct
import sys
import threading
import time

MEMORY_BUDGET = int(os.environ.get("T2S_SQLITE_CHILD_BUDGET", str(100 * 1024 * 1024)))
# Bytes one result row may take while it is converted (SQLite's copy and Python's copy of every cell):
# a value may hold ROW_BUDGET / columns bytes, never less than MIN_VALUE_CAP.
ROW_BUDGET = 16 * 1024 * 1024
MIN_VALUE_CAP = 4096
SQL_LENGTH_CAP = 1_000_000
_PROGRESS_STEPS = 5_000

_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}
_INTROSPECTION_PRAGMAS = {"table_info", "table_xinfo", "foreign_key_list", "index_list", "index_info"}


def _allowed_functions() -> frozenset[str]:
    """The SQL guard's allowlist for SQLite (``functions.py`` beside this file, loaded by its path: this process
    imports nothing of the app), so a call the parser missed still meets the same list in the engine."""
    path = pathlib.Path(__file__).with_name("functions.py")
    spec = importlib.util.spec_from_file_location("_t2s_sql_functions", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return frozenset(module.ALLOWED_FUNCTIONS["sqlite"])


ALLOWED_FUNCTIONS = _allowed_functions()


def row_size(row: tuple) -> int:
    """Python memory a fetched row holds (the same measure as ``agent.sql.base.row_size``)."""
    return sys.getsizeof(row) + sum(map(sys.getsizeof, row))


def human_bytes(n: int) -> str:
    """``2 MB``, ``16 KB``, ``900 bytes``, ``1 GB`` (the same wording as ``agent.sql.base.human_bytes``)."""
    if n >= 1000 * 1024 * 1024:
        return f"{n / (1024 * 1024 * 1024):.3g} GB"
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.3g} MB"
    if n >= 1024:
        return f"{n / 1024:.3g} KB"
    return f"{n} bytes"


def _lenient_text(raw: bytes) -> str:
    # Spider and BIRD files hold some invalid UTF-8; never fail a query over it.
    return raw.decode("utf-8", errors="replace")


def _authorize(action, arg1, arg2, db_name, trigger):
    if action == sqlite3.SQLITE_FUNCTION:  # every call the engine resolves, in the query and in the views it reads
        return sqlite3.SQLITE_OK if str(arg2).lower() in ALLOWED_FUNCTIONS else sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA:
        return sqlite3.SQLITE_OK if str(arg1).lower() in _INTROSPECTION_PRAGMAS else sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


class Watchdog:
    """One thread that calls ``interrupt()`` on the running connection at its deadline."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._conn: sqlite3.Connection | None = None
        self._deadline = float("inf")
        threading.Thread(target=self._loop, daemon=True, name="sqlite-watchdog").start()

    def arm(self, conn: sqlite3.Connection, deadline: float) -> None:
        with self._cond:
            self._conn, self._deadline = conn, deadline
            self._cond.notify()

    def disarm(self) -> None:
        with self._cond:
            self._conn, self._deadline = None, float("inf")

    def _loop(self) -> None:
        with self._cond:
            while True:
                if self._conn is None:
                    self._cond.wait()
                    continue
                remaining = self._deadline - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                self._conn.interrupt()
                self._conn = None


class Child:
    """Runs requests on read-only connections. ``watchdog``: anything with ``arm(conn, deadline)`` and
    ``disarm()``; by default a thread of its own (the parent process passes one over its shared watchdog
    when it runs trusted introspection queries in-process)."""

    def __init__(self, watchdog=None) -> None:
        self.conns: dict[str, sqlite3.Connection] = {}
        self.deadline = float("inf")
        self.watchdog = watchdog or Watchdog()
        self.denied_function: str | None = None  # the last call the authorizer refused, named in the answer

    def _authorize(self, action, arg1, arg2, db_name, trigger):
        verdict = _authorize(action, arg1, arg2, db_name, trigger)
        if verdict == sqlite3.SQLITE_DENY and action == sqlite3.SQLITE_FUNCTION:
            self.denied_function = str(arg2)
        return verdict

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()
        self.conns.clear()

    def _progress(self) -> int:
        return 1 if time.monotonic() > self.deadline else 0

    def connection(self, path: str) -> sqlite3.Connection:
        conn = self.conns.get(path)
        if conn is not None:
            return conn
        if len(self.conns) >= 8:  # an evaluation visits many files: keep the last few open
            oldest = next(iter(self.conns))
            self.conns.pop(oldest).close()
        uri = pathlib.Path(path).resolve().as_uri() + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA query_only = ON")
        conn.execute("PRAGMA cache_size = -4000")  # 4 MB of page cache at most
        conn.text_factory = _lenient_text
        conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, SQL_LENGTH_CAP)
        conn.set_authorizer(self._authorize)
        conn.set_progress_handler(self._progress, _PROGRESS_STEPS)
        self.conns[path] = conn
        return conn

    def run(self, req: dict) -> dict:
        try:
            conn = self.connection(req["path"])
        except sqlite3.Error as exc:
            return {"ok": False, "kind": "connect", "message": f"Cannot open {req['path']}: {exc}"}
        sql, params = req["sql"], req.get("params")
        args = () if params is None else tuple(params)
        timeout_s, max_rows, max_bytes, count_cap = (req["timeout_s"], req["max_rows"], req["max_bytes"],
                                                     req["count_cap"])
        started = time.monotonic()
        self.deadline = started + timeout_s
        self.denied_function = None
        self.watchdog.arm(conn, self.deadline)
        rows: list[tuple] = []
        size = total = 0
        exact = True
        truncated_bytes = False
        columns: list[str] = []
        value_cap = ROW_BUDGET
        try:
            if req.get("value_cap"):  # the caller knows its result is narrow (trusted introspection SQL)
                value_cap = int(req["value_cap"])
            else:
                conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1_000_000_000)
                value_cap = max(MIN_VALUE_CAP, ROW_BUDGET // max(1, _result_columns(conn, sql, args)))
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, value_cap)
            cursor = conn.execute(sql, args)
            columns = [d[0] for d in cursor.description or ()]
            for row in cursor:
                total += 1
                if len(rows) < max_rows and not truncated_bytes:
                    size += row_size(row)
                    if size > max_bytes:
                        truncated_bytes = True
                    else:
                        rows.append(tuple(row))
                elif total >= max_rows + count_cap:
                    exact = False
                    break
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc) and time.monotonic() > self.deadline:
                if rows or total:
                    # Counting past the rows we keep ran out of time: keep what we have.
                    return _ok(columns, rows, total, False, truncated_bytes, started)
                return {"ok": False, "kind": "timeout", "message": f"Query stopped after {timeout_s:g} s (time limit)."}
            return _failure(exc, value_cap, self.denied_function)
        except sqlite3.DatabaseError as exc:
            return _failure(exc, value_cap, self.denied_function)
        except sqlite3.Warning as exc:  # e.g. "You can only execute one statement at a time."
            return {"ok": False, "kind": "error", "message": str(exc)}
        except MemoryError:
            rows.clear()
            return {"ok": False, "kind": "too_large",
                    "message": f"result too large (limit {human_bytes(MEMORY_BUDGET)} of memory per query)"}
        finally:
            self.watchdog.disarm()
            self.deadline = float("inf")
        return _ok(columns, rows, total, exact, truncated_bytes, started)


def _result_columns(conn: sqlite3.Connection, sql: str, args: tuple) -> int:
    """Columns of the statement's result, from its compiled program (EXPLAIN compiles, never runs it)."""
    try:
        ops = conn.execute("EXPLAIN " + sql, args).fetchall()
    except (sqlite3.Error, sqlite3.Warning):
        return 1  # the real run reports the error
    return max((int(op[3]) for op in ops if op[1] == "ResultRow"), default=1)


def _ok(columns, rows, total, exact, truncated_bytes, started) -> dict:
    return {"ok": True, "columns": columns, "rows": rows, "total": total, "exact": exact,
            "truncated_bytes": truncated_bytes, "elapsed_ms": (time.monotonic() - started) * 1000}


def _failure(exc: sqlite3.Error, value_cap: int, denied_function: str | None = None) -> dict:
    message = str(exc)
    lowered = message.lower()
    if denied_function is not None and "not authorized" in lowered:
        return {"ok": False, "kind": "readonly",
                "message": f"Refused: function {denied_function}() is not allowed (the engine's check): queries may "
                           "call aggregates, string, number and date functions, casts, JSON accessors and window "
                           "functions only."}
    if "too big" in lowered:
        return {"ok": False, "kind": "too_large",
                "message": f"result too large (limit {human_bytes(value_cap)} per value or row for this query)"}
    if "out of memory" in lowered:
        return {"ok": False, "kind": "too_large",
                "message": f"result too large (limit {human_bytes(MEMORY_BUDGET)} of memory per query)"}
    if "not authorized" in lowered or "readonly" in lowered or "read-only" in lowered or "query_only" in lowered:
        return {"ok": False, "kind": "readonly", "message": f"Refused: the database is read-only ({message})."}
    return {"ok": False, "kind": "error", "message": message}


def _read_exact(stream, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _vm_size() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _cap_memory() -> None:
    base = _vm_size()
    if base:
        limit = base + MEMORY_BUDGET
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def main() -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    child = Child()
    _cap_memory()
    while True:
        header = _read_exact(stdin, 4)
        if header is None:
            return
        payload = _read_exact(stdin, struct.unpack(">I", header)[0])
        if payload is None:
            return
        try:
            answer = child.run(marshal.loads(payload))
            data = marshal.dumps(answer)
        except MemoryError:
            data = marshal.dumps({"ok": False, "kind": "too_large",
                                  "message": f"result too large (limit {human_bytes(MEMORY_BUDGET)} of memory "
                                             "per query)"})
        except Exception as exc:  # noqa: BLE001 - any failure is an answer, never a dead child
            data = marshal.dumps({"ok": False, "kind": "error", "message": f"{type(exc).__name__}: {exc}"})
        stdout.write(struct.pack(">I", len(data)) + data)
        stdout.flush()


if __name__ == "__main__":
    main()
