"""Hostile queries and completions against their limits: peak RSS growth and wall time of each.

    python -m benchmarks.limits.bench [--pg DSN] [--timeout 10]

For every hostile query of issue 13 it prints this process's peak RSS growth (the kernel's
high-water mark, reset before each query through /proc/self/clear_refs), the peak RSS of the
SQLite query process when there is one, the wall time, and the outcome, against the bounds:
100 MB of growth per query and the statement limit + 1 s. Then the action parser on 1 MB
inputs against its 50 ms bound. PostgreSQL rows run when --pg (or T2S_BENCH_PG_DSN) names a
server where a scratch database can be created (it is dropped afterwards).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path

from agent.sql import Limits, SQLError, connect
from agent.strategies.parsing import parse_step

MB = 1024 * 1024
RSS_BOUND = 100 * MB

SQLITE_QUERIES = [
    ("zeroblob 1 GB", "SELECT zeroblob(1000000000)"),
    ("three zeroblob 1 GB columns", "SELECT zeroblob(1e9), zeroblob(1e9), zeroblob(1e9)"),
    ("printf %.*c 2e9 (one long C call)", "SELECT printf('%.*c', 2e9, 'x')"),
    ("nested replace (past the value limit)",
     "SELECT length(replace(replace(zeroblob(10000000), x'00', 'abcdefghij'), 'a', 'abcdefghij'))"),
    ("json_group_array over 5 M rows",
     "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000) "
     "SELECT length(json_group_array(x || 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa')) FROM c"),
    ("1500 columns of 100 KB", "SELECT " + ", ".join(["zeroblob(100000)"] * 1500)),
    ("endless recursive CTE", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"),
]

PG_QUERIES = [
    ("repeat 500 MB", "SELECT repeat('x', 500000000)"),
    ("50 rows of 10 MB", "SELECT repeat('x', 10000000) FROM generate_series(1, 50)"),
    ("string_agg over 200 M rows", "SELECT length(string_agg(md5(g::text), ',')) FROM generate_series(1, 200000000) g"),
    ("repeat 900 MB (one long call)", "SELECT length(repeat(repeat('x', 100000000), 9))"),
    ("slow rows across FETCHes", "SELECT g, pg_sleep(0.0009) FROM generate_series(1, 20000) g"),
]

COMPLETIONS = [
    ('ExecuteSQL(" + 1 MB of ")"', 'Thought: t\nAction: ExecuteSQL("' + ")" * 1_000_000),
    ("100k-term sum", "Action: ExecuteSQL(" + "+".join(["1"] * 100_000) + ")"),
    ("1 MB of [", "Action: SearchColumn(" + "[" * 1_000_000),
    ("1 MB of quotes", "Action: ExecuteSQL(" + '"' * 1_000_000),
    ("1 MB thought, then a call", "x" * 1_000_000 + '\nAction: SearchValue("late")'),
]


def _status(field: str, pid: str = "self") -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _measure(run):
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    before = _status("VmRSS")
    started = time.monotonic()
    try:
        outcome = run()
    except SQLError as exc:
        outcome = f"{type(exc).__name__}: {str(exc)[:70]}"
    seconds = time.monotonic() - started
    return _status("VmHWM") - before, seconds, outcome


def _row(label, growth, seconds, timeout, outcome, child=None):
    ok = growth < RSS_BOUND and seconds < timeout + 1
    child_txt = f"{child / MB:7.1f}" if child else "      -"
    print(f"| {label:<40} | {growth / MB:6.1f} | {child_txt} | {seconds:6.2f} | {timeout + 1:5.1f} | "
          f"{'yes' if ok else 'NO '} | {outcome} |")
    return ok


def bench_sqlite(timeout: float) -> bool:
    folder = Path(tempfile.mkdtemp(prefix="t2s-bench-limits-"))
    path = folder / "t.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"row {i}") for i in range(100)])
    conn.close()
    print(f"\nSQLite (limits: {timeout:g} s, 100 MB growth per query; result cap 2 MB)\n")
    _header()
    ok = True
    with connect("sqlite", str(path), limits=Limits(timeout_s=timeout)) as db:
        db.execute("SELECT 1")
        for label, sql in SQLITE_QUERIES:
            child_peak = [0]

            def run(sql=sql, child_peak=child_peak):
                try:
                    res = db._run(sql, db.limits)
                    return f"ok: {len(res.rows)} row(s), {str(res.rows)[:40]}"
                finally:
                    pid = db._sandbox.pid
                    child_peak[0] = _status("VmHWM", str(pid)) if pid else 0

            growth, seconds, outcome = _measure(run)
            ok &= _row(label, growth, seconds, timeout, outcome, child_peak[0])
    return ok


def bench_pg(dsn: str, timeout: float) -> bool:
    import psycopg

    name = f"t2s_bench_{uuid.uuid4().hex[:8]}"
    admin = psycopg.connect(dsn, autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    target = dsn.rsplit("/", 1)[0] + "/" + name
    print(f"\nPostgreSQL (limits: {timeout:g} s, 100 MB growth per query; result cap 2 MB)\n")
    _header()
    ok = True
    try:
        with connect("postgresql", target, limits=Limits(timeout_s=timeout)) as db:
            for label, sql in PG_QUERIES:
                def run(sql=sql):
                    res = db._run(sql, db.limits)
                    return (f"ok: {len(res.rows)} row(s) kept of {res.total_rows}"
                            f"{' (cut: bytes)' if res.truncated_bytes else ''}{'' if res.total_is_exact else ' (stopped)'}")

                growth, seconds, outcome = _measure(run)
                ok &= _row(label, growth, seconds, timeout, outcome)
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
    return ok


def bench_parser() -> bool:
    print("\nAction parser (bound: 50 ms per completion; best of 3)\n")
    print("| completion | size | ms | within |\n|---|---|---|---|")
    ok = True
    for label, text in COMPLETIONS:
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            step = parse_step(text)
            best = min(best, time.perf_counter() - started)
        within = best < 0.05
        ok &= within
        print(f"| {label} | {len(text):,} | {best * 1000:.1f} | {'yes' if within else 'NO'} "
              f"({'action' if step.action else 'error observation'}) |")
    return ok


def _header():
    print("| query | RSS growth MB | query process peak MB | s | bound s | within | outcome |")
    print("|---|---|---|---|---|---|---|")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--pg", default=os.environ.get("T2S_BENCH_PG_DSN", ""))
    args = parser.parse_args(argv)
    print(f"benchmarks.limits: {time.strftime('%Y-%m-%d %H:%M')} UTC, Python {sys.version.split()[0]}, "
          f"SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    ok = bench_sqlite(args.timeout)
    if args.pg:
        ok &= bench_pg(args.pg, args.timeout)
    else:
        print("\nPostgreSQL: skipped (pass --pg postgresql://user@host/db)")
    ok &= bench_parser()
    print("\nall within their bounds" if ok else "\nSOME ROWS ARE OUT OF BOUNDS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
