"""Attacks on the PostgreSQL connector, against the real server, connected as a superuser (the worst case).

These test the READ ONLY transaction layer on its own (``check_role=False``); by default the connector refuses a
superuser outright (tests/agent/sql/test_pg_roles.py).

Every attack gets a clear error and the target is unchanged afterwards,
checked through a separate admin connection.
"""

import time
import tracemalloc

import psycopg
import pytest

from agent.sql import Limits, QueryTimeout, ReadOnlyViolation, SQLError, connect

SETUP = """
CREATE TABLE artist (id integer PRIMARY KEY, name text NOT NULL);
CREATE TABLE album (id integer PRIMARY KEY, title text, artist_id integer REFERENCES artist(id));
CREATE SEQUENCE counter;
INSERT INTO artist SELECT g, 'Artist ' || g FROM generate_series(1, 3200) g;
INSERT INTO album SELECT g, 'Album ' || g, 1 + g % 3200 FROM generate_series(1, 500) g;
"""

WRITES = [
    "DROP TABLE artist",
    "INSERT INTO artist VALUES (99999, 'x')",
    "UPDATE artist SET name = 'x'",
    "DELETE FROM artist",
    "WITH doomed AS (DELETE FROM artist RETURNING *) SELECT * FROM doomed",
    "WITH doomed AS (SELECT 1) DELETE FROM artist",
    "SELECT 1; DROP TABLE artist",
    "SET TRANSACTION READ WRITE",
    "COPY artist TO PROGRAM 'touch /tmp/t2s-pwned'",
    "SELECT nextval('counter')",
    "CREATE TABLE evil (x int)",
    "TRUNCATE artist",
    "ATTACH DATABASE 'x' AS y",
    "PRAGMA writable_schema = 1",
    "SELECT load_extension('evil')",
]


@pytest.fixture
def target(pg_database):
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(SETUP)
    return pg_database


def snapshot(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        return (
            conn.execute("SELECT count(*), md5(string_agg(id || name, ',' ORDER BY id)) FROM artist").fetchone(),
            conn.execute("SELECT count(*) FROM album").fetchone(),
            conn.execute("SELECT last_value, is_called FROM counter").fetchone(),
            conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone(),
        )


@pytest.mark.postgres
@pytest.mark.parametrize("statement", WRITES)
def test_write_through_execute_is_refused_and_changes_nothing(target, statement):
    before = snapshot(target)
    with connect("postgresql", target, check_role=False) as db:
        with pytest.raises(SQLError) as caught:
            db.execute(statement)
        assert str(caught.value)
        assert db.execute("SELECT count(*) FROM artist").rows == [(3200,)]
    assert snapshot(target) == before


@pytest.mark.postgres
@pytest.mark.parametrize("statement", WRITES)
def test_write_straight_at_the_engine_is_refused_and_changes_nothing(target, statement):
    before = snapshot(target)
    with connect("postgresql", target, check_role=False) as db:
        with pytest.raises(SQLError):
            db._run(statement, Limits(timeout_s=5))
        assert db.execute("SELECT count(*) FROM artist").rows == [(3200,)]
    assert snapshot(target) == before


@pytest.mark.postgres
def test_read_only_transaction_is_what_refuses_a_write(target):
    with connect("postgresql", target, check_role=False) as db:
        with pytest.raises(ReadOnlyViolation, match="read-only"):
            db._run("SELECT nextval('counter')", Limits())


@pytest.mark.postgres
def test_pg_sleep_is_stopped_by_statement_timeout(target):
    with connect("postgresql", target, limits=Limits(timeout_s=1), check_role=False) as db:
        started = time.monotonic()
        with pytest.raises(QueryTimeout, match="time limit"):
            # past the guard (which refuses pg_sleep): the engine's statement_timeout on its own
            db._run("SELECT pg_sleep(60)", Limits(timeout_s=1))
        assert time.monotonic() - started < 5
        assert db.execute("SELECT 1").rows == [(1,)]


@pytest.mark.postgres
def test_endless_recursive_cte_is_stopped(target):
    with connect("postgresql", target, limits=Limits(timeout_s=1), check_role=False) as db:
        started = time.monotonic()
        with pytest.raises(QueryTimeout):
            db.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
        assert time.monotonic() - started < 5


@pytest.mark.postgres
def test_ten_million_row_cross_join_is_capped_with_bounded_memory(target):
    limits = Limits(timeout_s=30, max_rows=50, count_cap=20_000)
    with connect("postgresql", target, limits=limits, check_role=False) as db:
        tracemalloc.start()
        result = db.execute("SELECT a.name, b.name FROM artist a CROSS JOIN artist b")  # 10.24 million rows
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert len(result.rows) == 50
    assert result.truncated and not result.total_is_exact
    assert peak < 30_000_000


@pytest.mark.postgres
def test_select_only_role_can_read_but_not_write(target):
    role = "t2s_reader_test"
    with psycopg.connect(target, autocommit=True) as admin:
        admin.execute(f"DROP ROLE IF EXISTS {role}")
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        admin.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    try:
        reader_dsn = target.replace("postgres@", f"{role}@", 1)
        with connect("postgresql", reader_dsn) as db:
            assert db.execute("SELECT count(*) FROM album").rows == [(500,)]
            with pytest.raises(SQLError):
                db._run("SELECT nextval('counter')", Limits())
    finally:
        with psycopg.connect(target, autocommit=True) as admin:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


@pytest.mark.postgres
def test_introspection_reads_keys_counts_and_statistics(target):
    with connect("postgresql", target, check_role=False) as db:
        schema = db.introspect()
    album = schema.table("album")
    assert album.row_count == 500
    assert album.primary_key == ("id",)
    assert [(fk.columns, fk.ref_table, fk.ref_columns) for fk in album.foreign_keys] == [(("artist_id",), "artist", ("id",))]
    assert album.column("id").stats.kind == "numeric"
    assert album.column("title").stats.describe().startswith("text field, distinct count: 500")


@pytest.mark.postgres
def test_introspection_lists_every_value_of_small_text_columns(pg_database):
    """The paper authors' rule (a text column with at most 50 distinct values and no sentence is listed)."""
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE place (id integer PRIMARY KEY, city text, code varchar(10), note text);"
                     "INSERT INTO place SELECT g, (ARRAY['Oslo', 'Lima', 'Paris'])[1 + g % 3], 'C' || g,"
                     " CASE WHEN g = 1 THEN 'one two three four five six seven eight nine ten' ELSE 'n' END"
                     " FROM generate_series(1, 60) g")
    with connect("postgresql", pg_database, check_role=False) as db:
        place = db.introspect().table("place")
    # In the order the rows first hold them (g = 1, 2, 3), as the authors listed them.
    assert place.column("city").stats.listing == ("Lima", "Paris", "Oslo")
    assert place.column("code").stats.listing == ()  # 60 distinct values
    assert place.column("note").stats.listing == ()  # a sentence: free text
