"""Hostile queries and completions against their limits: peak RSS growth and wall time of each.

    python -m benchmarks.limits.bench [--pg DSN] [--timeout 10]

For every hostile query of issue 13 it prints this process's peak RSS growth (the kernel's
high-water mark, reset before each query through /proc/self/clear_refs), the peak RSS of the
SQLite query process when there is one, the wall time, and the outcome, against the bounds:
100 MB of growth per query and the statement limit + 1 s. Then the action parser on 1 MB
inputs against its 50 ms bound, and uploaded files: the SearchValue index build of a hostile SQLite file
(a 200 MB text cell, a 300 MB blob) and BIRD prediction files (200k entries, 200,000-deep nesting, an
entry past the limit), against 100 MB of growth. PostgreSQL rows run when --pg (or T2S_BENCH_PG_DSN) names a
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
from tests.support.memory import peak_growth, reset_peak, status_bytes

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


def _measure(run, refusals: tuple[type[Exception], ...] = (SQLError,), width: int = 70):
    """(peak RSS growth, seconds, outcome) of ``run()``; a refusal of the given kinds is its outcome."""
    before = reset_peak()
    started = time.monotonic()
    try:
        outcome = run()
    except refusals as exc:
        outcome = f"{type(exc).__name__}: {str(exc)[:width]}"
    seconds = time.monotonic() - started
    return peak_growth(before), seconds, outcome


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
                    child_peak[0] = status_bytes("VmHWM", pid) if pid else 0

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
        with connect("postgresql", target, limits=Limits(timeout_s=timeout), check_role=False) as db:  # scratch db
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


HOSTILE_DB = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT, body TEXT, data BLOB)")
conn.executemany("INSERT INTO item(name, body) VALUES (?, ?)", [(f"alpha {i}", f"body {i}") for i in range(50000)])
conn.execute("INSERT INTO item(name, body, data) VALUES ('hostile', printf('%.*c', 200000000, 'x'), "
             "zeroblob(300000000))")
conn.executemany("INSERT INTO item(name, body) VALUES (?, ?)", [(f"omega {i}", f"body {i}") for i in range(50000)])
conn.commit()
"""


def _file_row(label, growth, seconds, outcome, *, bound_s):
    ok = growth < RSS_BOUND and seconds < bound_s
    print(f"| {label:<44} | {growth / MB:6.1f} | {seconds:6.2f} | {bound_s:5.0f} | {'yes' if ok else 'NO '} | "
          f"{outcome} |")
    return ok


def bench_files(pg: str = "") -> bool:
    import shutil
    import subprocess

    from agent.tools import build_indexes
    from annotations.evaluation.formats import load_bird_predictions

    print("\nUploaded files (bound: 100 MB growth; the time bound is a sanity check on a shared machine)\n")
    print("| input | RSS growth MB | s | bound s | within | outcome |\n|---|---|---|---|---|---|")
    folder = Path(tempfile.mkdtemp(prefix="t2s-bench-files-"))
    ok = True
    try:
        hostile = folder / "hostile.sqlite"
        subprocess.run([sys.executable, "-c", HOSTILE_DB, str(hostile)], check=True)  # not in this process's RSS
        with connect("sqlite", str(hostile)) as db:
            def build():
                manifest = build_indexes(db, folder / "idx", schema=db.introspect(with_stats=True),
                                         column_backend="bm25")
                c = manifest.counts
                return f"built: {c['cells']:,} values of {c['text_cells']:,} text cells, {c['skipped_cells']} skipped"
            ok &= _file_row("index build: 200 MB text cell + 300 MB blob", *_measure(build, (ValueError,), 90),
                            bound_s=60)
        tail = r"\t----- bird -----\tdb"  # the separator as written inside a JSON string
        big = folder / "big.json"
        with big.open("w") as out:
            out.write("{\n" + ",\n".join(f'"{i}": "SELECT count(*) FROM t WHERE x > {i}{tail}"'
                                           for i in range(200_000)) + "\n}\n")

        def read_big():
            parsed = load_bird_predictions(big, keep=lambda i: i < 1534)
            return (f"{len(parsed.predictions):,} kept, {parsed.ignored:,} past 1,534 questions, "
                    f"{len(parsed.issues)} issues")
        label = f"BIRD predictions, 200k entries ({big.stat().st_size / MB:.0f} MB)"
        ok &= _file_row(label, *_measure(read_big, (ValueError,), 90), bound_s=30)
        deep = folder / "deep.json"
        deep.write_text('{"0": ' + "[" * 200_000 + "]" * 200_000 + ',\n"1": "SELECT 1' + tail + '"}')

        def read_deep():
            parsed = load_bird_predictions(deep)
            return f"{len(parsed.predictions)} kept; issue: {parsed.issues[0].message[:70]}"
        ok &= _file_row("BIRD predictions, 200,000-deep entry", *_measure(read_deep, (ValueError,), 90), bound_s=5)
        long_entry = folder / "long.json"
        long_entry.write_text('{"0": "SELECT 1",\n"1": "' + "x" * 5_000_000 + '",\n"2": "SELECT 2"}')
        ok &= _file_row("BIRD predictions, a 5 MB entry", *_measure(
            lambda: str(load_bird_predictions(long_entry)), (ValueError,), 90), bound_s=5)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if pg:
        ok &= _bench_pg_index(pg)
    return ok


def _bench_pg_index(dsn: str) -> bool:
    import psycopg

    from agent.tools import build_indexes

    name = f"t2s_bench_{uuid.uuid4().hex[:8]}"
    admin = psycopg.connect(dsn, autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    target = dsn.rsplit("/", 1)[0] + "/" + name
    try:
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("CREATE TABLE item (id serial PRIMARY KEY, name text, body text)")
            conn.execute("INSERT INTO item(name, body) SELECT 'alpha ' || g, 'body ' || g FROM generate_series(1, 50000) g")
            conn.execute("INSERT INTO item(name, body) VALUES ('hostile', repeat('x', 200000000))")
        with connect("postgresql", target, check_role=False) as db:  # a scratch database of its own
            def build():
                manifest = build_indexes(db, Path(tempfile.mkdtemp(prefix="t2s-bench-pgidx-")), column_backend="bm25")
                return f"built: {manifest.counts['cells']:,} values of {manifest.counts['text_cells']:,} text cells"
            return _file_row("PostgreSQL index build: 200 MB text cell", *_measure(build, (ValueError,), 90),
                             bound_s=60)
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


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
    ok &= bench_files(args.pg)
    print("\nall within their bounds" if ok else "\nSOME ROWS ARE OUT OF BOUNDS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
