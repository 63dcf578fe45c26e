"""Hostile queries meet a memory and a time bound, on SQLite and PostgreSQL, through every path.

Each test measures this process's peak RSS growth (the kernel's high-water mark, reset
before the query through /proc/self/clear_refs) and the wall time against the limits:
no single query may raise the process by more than 100 MB nor run past its limit + 1 s.
"""

import sqlite3
import time

import psycopg
import pytest

from agent.sql import Limits, QueryTimeout, ResultTooLarge, SQLError, connect
from agent.sql.base import row_size
from agent.sql.sandbox import SQLiteSandbox
from agent.sql.sqlite import SQLiteConnector
from agent.tools.execute_sql import execute_sql
from annotations.evaluation.runner import run_query
from tests.support.memory import measured

MB = 1024 * 1024
RSS_BOUND = 100 * MB


@pytest.fixture
def small_db(tmp_path):
    path = tmp_path / "t.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"row {i}") for i in range(100)])
    conn.commit()
    conn.close()
    return path


SQLITE_HOSTILE = [
    "SELECT zeroblob(1000000000)",
    "SELECT zeroblob(1000000000), zeroblob(1000000000), zeroblob(1000000000)",
    "SELECT randomblob(900000000)",
    "SELECT length(replace(replace(zeroblob(10000000), x'00', 'abcdefghij'), 'a', 'abcdefghij'))",
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000) "
    "SELECT length(json_group_array(x || 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa')) FROM c",
    "SELECT " + ", ".join(["zeroblob(100000)"] * 1500),
]


@pytest.mark.parametrize("sql", SQLITE_HOSTILE)
def test_sqlite_values_past_the_bound_say_result_too_large(small_db, sql):
    error = None
    with connect("sqlite", str(small_db), limits=Limits(timeout_s=5)) as db:
        with measured() as m:
            try:
                result = db.execute(sql)
                assert len(result.rows) == 1 and len(str(result.rows)) < 1000  # a small answer is fine
            except SQLError as exc:
                error = exc
        assert db.execute("SELECT COUNT(*) FROM t").rows == [(100,)]  # still usable
    if error is not None:
        assert isinstance(error, (ResultTooLarge, QueryTimeout)), error
    if isinstance(error, ResultTooLarge):
        assert "result too large (limit" in str(error)
    assert m["rss_growth"] < RSS_BOUND
    assert m["seconds"] < 5 + 1


def test_sqlite_single_long_function_call_is_stopped_within_the_limit(small_db):
    # printf's precision loop runs in one C call: no progress handler or interrupt() reaches it.
    with connect("sqlite", str(small_db), limits=Limits(timeout_s=2)) as db:
        with measured() as m:
            with pytest.raises(QueryTimeout, match="time limit"):
                db.execute("SELECT printf('%.*c', 2e9, 'x')")
        assert m["seconds"] < 2 + 1
        assert m["rss_growth"] < RSS_BOUND
        assert db.execute("SELECT body FROM t WHERE id = 7").rows == [("row 7",)]


def test_sqlite_query_process_memory_is_capped_by_the_os(small_db):
    sandbox = SQLiteSandbox()
    db = SQLiteConnector(small_db, sandbox=sandbox, limits=Limits(timeout_s=10))
    try:
        db.execute("SELECT 1")
        pid = sandbox.pid
        with open(f"/proc/{pid}/limits") as limits:
            line = next(x for x in limits if x.startswith("Max address space"))
        assert line.split()[3] != "unlimited"
        with open(f"/proc/{pid}/status") as status:
            vm = next(int(x.split()[1]) * 1024 for x in status if x.startswith("VmSize:"))
        assert int(line.split()[3]) - vm <= RSS_BOUND + 8 * MB
    finally:
        db.close()
        sandbox.close()


def test_sqlite_byte_cap_counts_python_memory_and_names_the_limit(small_db):
    with connect("sqlite", str(small_db), limits=Limits(max_bytes=2_000)) as db:
        result = db.execute("SELECT id, body FROM t")
        assert result.truncated_bytes and sum(row_size(r) for r in result.rows) <= 2_000
        observation = execute_sql(db, "SELECT id, body FROM t").observation
    assert "result too large, limit 1.95 KB" in observation


def test_sqlite_large_result_through_the_tool_is_an_observation_not_a_crash(small_db):
    with connect("sqlite", str(small_db)) as db:
        with measured() as m:
            out = execute_sql(db, "SELECT zeroblob(1000000000), zeroblob(1000000000)")
    assert out.observation.startswith("Error: result too large (limit")
    assert m["rss_growth"] < RSS_BOUND


def test_evaluation_of_a_hostile_prediction_is_too_large_not_a_blown_worker(small_db):
    with connect("sqlite", str(small_db)) as db:
        with measured() as m:
            outcome = run_query(db, "SELECT zeroblob(1000000000), zeroblob(1000000000), zeroblob(1000000000)",
                                Limits(timeout_s=10, max_rows=1_000_000, max_bytes=40_000_000, count_cap=0))
    assert outcome.kind == "too_large" and "limit" in outcome.error
    assert m["rss_growth"] < RSS_BOUND


def test_schema_statistics_survive_a_cell_past_the_value_limit(tmp_path):
    path = tmp_path / "big.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE doc (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO doc VALUES (1, ?)", ("x" * (20 * MB),))
    conn.execute("INSERT INTO doc VALUES (2, 'short')")
    conn.commit()
    conn.close()
    with connect("sqlite", str(path)) as db:
        with measured() as m:
            schema = db.introspect()
    body = schema.table("doc").column("body")
    assert body.stats is not None and body.stats.null_count == 0
    assert m["rss_growth"] < RSS_BOUND


# --- PostgreSQL ------------------------------------------------------------------------------


@pytest.fixture
def pg_target(pg_database, pg_reader):
    """The target's DSN for a read-only role (the connector refuses a superuser)."""
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id integer PRIMARY KEY, body text)")
        conn.execute("INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 100) g")
    yield pg_reader()
    # A server still inside a long function call (its client already gone) ends it before noticing;
    # wait for it so the throwaway database can be dropped.
    name = pg_database.rsplit("/", 1)[1]
    with psycopg.connect(pg_database.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
        for _ in range(240):
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
            if not admin.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
                                 (name,)).fetchone()[0]:
                break
            time.sleep(0.25)


@pytest.mark.postgres
@pytest.mark.parametrize("sql", [
    "SELECT repeat('x', 500000000)",
    "SELECT repeat('x', 40000000) AS a, repeat('y', 40000000) AS b",
    "SELECT repeat('x', 10000000) FROM generate_series(1, 50)",
])
def test_postgres_large_values_never_leave_the_server(pg_target, sql):
    with connect("postgresql", pg_target, limits=Limits(timeout_s=20)) as db:
        with measured() as m:
            with pytest.raises(SQLError) as caught:
                db.execute(sql)
        assert db.execute("SELECT count(*) FROM t").rows == [(100,)]
    # On a loaded machine building 500 MB on the server can itself outlast the limit.
    assert isinstance(caught.value, (ResultTooLarge, QueryTimeout)), caught.value
    if isinstance(caught.value, ResultTooLarge):
        assert "result too large (limit" in str(caught.value)
    assert m["seconds"] < 20 + 1
    assert m["rss_growth"] < RSS_BOUND


@pytest.mark.postgres
def test_postgres_rows_past_the_byte_budget_are_counted_not_sent(pg_target):
    with connect("postgresql", pg_target, limits=Limits(max_rows=1000, max_bytes=4 * MB)) as db:
        with measured() as m:
            result = db.execute("SELECT g, repeat('x', 1000000) FROM generate_series(1, 200) g")
    assert result.truncated_bytes and result.total_rows == 200
    assert 0 < len(result.rows) < 5 and result.columns == ("g", "repeat")
    assert m["rss_growth"] < RSS_BOUND


@pytest.mark.postgres
def test_postgres_slow_rows_stop_at_the_limit_not_per_fetch(pg_target):
    # Each FETCH of 2000 rows stays under statement_timeout; the whole must still stop at the limit.
    with connect("postgresql", pg_target, limits=Limits(timeout_s=2, max_rows=100, count_cap=100_000)) as db:
        started = time.monotonic()
        try:
            result = db._run("SELECT g, pg_sleep(0.0009) FROM generate_series(1, 20000) g",
                             Limits(timeout_s=2, max_rows=100, count_cap=100_000))
            assert not result.total_is_exact
        except QueryTimeout:
            pass
        assert time.monotonic() - started < 2 + 1
        assert db.execute("SELECT count(*) FROM t").rows == [(100,)]


@pytest.mark.postgres
def test_postgres_long_aggregate_is_stopped_within_the_limit(pg_target):
    with connect("postgresql", pg_target, limits=Limits(timeout_s=2)) as db:
        started = time.monotonic()
        with pytest.raises(QueryTimeout):
            db.execute("SELECT length(string_agg(md5(g::text), ',')) FROM generate_series(1, 200000000) g")
        assert time.monotonic() - started < 2 + 1


@pytest.mark.postgres
def test_postgres_wrapper_keeps_names_types_order_and_duplicates(pg_target):
    with connect("postgresql", pg_target) as db:
        result = db.execute("SELECT id, id, body, 1.5::numeric AS x, NULL AS n FROM t ORDER BY id DESC LIMIT 3 -- c")
    assert result.columns == ("id", "id", "body", "x", "n")
    assert [r[0] for r in result.rows] == [100, 99, 98]
    assert str(result.rows[0][3]) == "1.5"


@pytest.mark.postgres
def test_postgres_single_long_function_call_is_cut_at_the_limit(pg_target):
    # repeat() does not check for cancellation while it builds its value: the connection is cut instead.
    with connect("postgresql", pg_target, limits=Limits(timeout_s=0.5)) as db:
        started = time.monotonic()
        with pytest.raises(QueryTimeout):
            db._run("SELECT length(repeat(repeat('x', 100000000), 9))", Limits(timeout_s=0.5))
        assert time.monotonic() - started < 0.5 + 1
        assert db.execute("SELECT count(*) FROM t").rows == [(100,)]  # a fresh connection


def test_the_query_process_names_sizes_and_rows_as_the_connectors_do():
    """agent/sql/_sqlite_child.py runs isolated (``python -I -S``) and keeps its own copies of row_size and
    human_bytes: they must stay the twins of agent.sql.base's, or the same limit reads two ways."""
    import runpy

    from agent.sql import base
    from agent.sql.sandbox import CHILD_SCRIPT

    child = runpy.run_path(str(CHILD_SCRIPT), run_name="t2s_child_under_test")
    for n in (0, 900, 2_000, 16 * 1024 * 1024, 999 * 1024 * 1024, 1024 ** 3, 8 * 1024 ** 3):
        assert child["human_bytes"](n) == base.human_bytes(n), n
    for row in [(), (1, "abc", None, 2.5, b"\x00" * 100)]:
        assert child["row_size"](row) == base.row_size(row)
