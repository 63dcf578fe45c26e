"""Cost of the per-query PostgreSQL role check: `python -m benchmarks.tools.pg_role_check [--no-write]`.

Every ExecuteSQL on a PostgreSQL target checks its role at the start of the query's transaction (one catalog
query sent with the transaction's settings, ``agent/sql/pg_roles.py``). This measures what that adds: the same
small query through the connector with the check on and off, alternated call by call in one run (the
machine is shared, so only the ratio within a run means much), on a throwaway database holding 20 tables (a
Spider-sized schema) and 1,000 tables (the check looks at every relation), read by a role made like
``create_readonly_role``'s. Also part of ``make bench-tools``.

The admin DSN is ``T2S_BENCH_PG_ADMIN_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``): it
creates the database and the role, and drops both at the end; never the app's database.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from typing import Any

from agent.sql import connect
from agent.sql.pg_roles import readonly_role_sql

from .report import machine, stamp, table, write_section

ADMIN_DSN = os.environ.get("T2S_BENCH_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
CALLS = 300  # per arm and schema size
QUERY = "SELECT count(*) FROM t0000 WHERE id < 50"


class Unavailable(Exception):
    """No PostgreSQL server answers at the admin DSN."""


def _pcts(ms: list[float]) -> tuple[float, float]:
    ordered = sorted(ms)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def _schema(conn: Any, tables: int) -> None:
    for i in range(tables):
        conn.execute(f"CREATE TABLE t{i:04d} (id integer PRIMARY KEY, name text)")
    conn.execute("INSERT INTO t0000 SELECT g, 'n' || g FROM generate_series(1, 100) g")


def measure(tables: int, calls: int = CALLS) -> dict[str, Any]:
    """p50/p95 ms of one small query with the role check on and off, alternated, on ``tables`` tables."""
    import psycopg

    name, role, password = f"t2s_bench_roles_{uuid.uuid4().hex[:8]}", f"t2s_bench_{uuid.uuid4().hex[:8]}", \
        uuid.uuid4().hex
    base = ADMIN_DSN.rsplit("/", 1)[0]
    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(f"{base}/{name}", autocommit=True) as conn:
            _schema(conn, tables)
            for stmt in readonly_role_sql(role, name, password=password):
                conn.execute(stmt)
        host = base.split("@", 1)[1]
        dsn = f"postgresql://{role}:{password}@{host}/{name}"
        times: dict[bool, list[float]] = {True: [], False: []}
        with connect("postgresql", dsn) as checked, connect("postgresql", dsn, check_role=False) as unchecked:
            for db in (checked, unchecked):
                for _ in range(20):
                    db.execute(QUERY)  # warm the plan caches of both
            for i in range(2 * calls):
                on = i % 2 == 0
                db = checked if on else unchecked
                t0 = time.perf_counter()
                db.execute(QUERY)
                times[on].append((time.perf_counter() - t0) * 1000)
    finally:
        with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')
    on50, on95 = _pcts(times[True])
    off50, off95 = _pcts(times[False])
    return {"tables": tables, "on": (on50, on95), "off": (off50, off95)}


def section() -> str:
    """The benchmark's section of benchmarks/results/tools.md (runs both schema sizes)."""
    import psycopg

    try:
        psycopg.connect(ADMIN_DSN, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        raise Unavailable(f"{ADMIN_DSN}: {str(exc).strip().splitlines()[0]}") from None
    load = os.getloadavg()[0]
    rows = []
    for tables in (20, 1000):
        r = measure(tables)
        rows.append([r["tables"], f"{r['off'][0]:.2f} / {r['off'][1]:.2f}", f"{r['on'][0]:.2f} / {r['on'][1]:.2f}",
                     f"{r['on'][0] - r['off'][0]:+.2f}", f"{r['on'][0] / r['off'][0]:.2f}x"])
        print(rows[-1], flush=True)
    return "\n".join([
        "## PostgreSQL role check per query\n",
        f"Command: `python -m benchmarks.tools.pg_role_check` (also in `make bench-tools`); date {stamp()}; "
        f"machine {machine()}; load {load:.1f} at the start.",
        f"`{QUERY}` through the connector as a role made by create_readonly_role's statements, {CALLS} calls "
        "with the role check and as many without, alternated; ms through `execute()` (guard, transaction "
        "settings and check in one message, the query, rollback).\n",
        table(["tables in the database", "without check p50 / p95 ms", "with check p50 / p95 ms",
               "added p50 ms", "ratio p50"], rows),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    text = section()
    print(text)
    if not args.no_write:
        write_section("pg-role-check", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
