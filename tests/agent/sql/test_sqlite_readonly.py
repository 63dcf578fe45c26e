"""Attacks on the SQLite connector: every one is refused with a clear error and the file is unchanged.

Each attack runs twice: through ``execute`` (sqlglot guard + engine) and
straight at the engine (``_run``, bypassing the guard), because the guard is
only an extra layer and the engine must hold on its own.
"""

import hashlib
import time
import tracemalloc

import pytest

from agent.sql import Limits, QueryRejected, QueryTimeout, ReadOnlyViolation, SQLError, connect

WRITES = [
    "DROP TABLE Artist",
    "INSERT INTO Artist (ArtistId, Name) VALUES (9999, 'x')",
    "UPDATE Artist SET Name = 'x'",
    "DELETE FROM Artist",
    "WITH doomed AS (SELECT 1) DELETE FROM Artist",
    "SELECT 1; DROP TABLE Artist",
    "ATTACH DATABASE '/tmp/t2s-attached.sqlite' AS other",
    "PRAGMA writable_schema = 1",
    "SELECT load_extension('/tmp/evil')",
    "CREATE TABLE evil (x)",
    "REPLACE INTO Artist (ArtistId, Name) VALUES (1, 'x')",
    "VACUUM",
    "SET TRANSACTION READ WRITE",
    "COPY Artist TO PROGRAM 'touch /tmp/pwned'",
]


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("statement", WRITES)
def test_write_through_execute_is_refused_and_changes_nothing(chinook_copy, statement):
    before = digest(chinook_copy)
    with connect("sqlite", str(chinook_copy)) as db:
        with pytest.raises(SQLError) as caught:
            db.execute(statement)
        assert str(caught.value)
        assert db.execute("SELECT COUNT(*) FROM Artist").rows == [(275,)]
    assert digest(chinook_copy) == before


@pytest.mark.parametrize("statement", WRITES)
def test_write_straight_at_the_engine_is_refused_and_changes_nothing(chinook_copy, statement):
    before = digest(chinook_copy)
    with connect("sqlite", str(chinook_copy)) as db:
        with pytest.raises(SQLError):
            db._run(statement, Limits(timeout_s=2))
        assert db.execute("SELECT COUNT(*) FROM Artist").rows == [(275,)]
    assert digest(chinook_copy) == before


def test_engine_refusal_is_reported_as_read_only(chinook_copy):
    with connect("sqlite", str(chinook_copy)) as db:
        with pytest.raises(ReadOnlyViolation, match="read-only"):
            db._run("DELETE FROM Artist", Limits())


def test_guard_explains_what_was_refused(chinook_copy):
    with connect("sqlite", str(chinook_copy)) as db:
        with pytest.raises(QueryRejected, match="one statement"):
            db.execute("SELECT 1; SELECT 2")
        with pytest.raises(QueryRejected, match="DELETE"):
            db.execute("WITH doomed AS (SELECT 1) DELETE FROM Artist")


def test_endless_recursive_cte_is_stopped_at_the_deadline(chinook_copy):
    with connect("sqlite", str(chinook_copy), limits=Limits(timeout_s=1)) as db:
        started = time.monotonic()
        with pytest.raises(QueryTimeout, match="time limit"):
            db.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c")
        assert time.monotonic() - started < 3
        # The connection is still usable afterwards.
        assert db.execute("SELECT 1").rows == [(1,)]


def test_ten_million_row_cross_join_is_capped_with_bounded_memory(chinook_copy):
    with connect("sqlite", str(chinook_copy), limits=Limits(timeout_s=20, max_rows=50, count_cap=10_000)) as db:
        tracemalloc.start()
        result = db.execute("SELECT a.Name, b.Name, c.Name FROM Track a, Track b, Track c")
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert len(result.rows) == 50
    assert result.truncated and not result.total_is_exact
    assert result.total_rows >= 10_000
    assert peak < 20_000_000


def test_byte_cap_keeps_rows_small(chinook_copy):
    with connect("sqlite", str(chinook_copy), limits=Limits(max_rows=10_000, max_bytes=5_000)) as db:
        result = db.execute("SELECT Name FROM Track")
    assert result.truncated_bytes
    assert sum(len(r[0]) for r in result.rows) <= 5_000
    assert result.total_rows == 3503


def test_broken_sql_returns_the_engine_error(chinook_copy):
    with connect("sqlite", str(chinook_copy)) as db:
        with pytest.raises(SQLError, match="no such column: Nme"):
            db.execute("SELECT Nme FROM Artist")
