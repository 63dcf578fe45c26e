"""The guard fails closed (issue #27, finding 2): a statement it cannot fully read is refused, never waved through.

Before, a statement sqlglot could not parse (``@ -5``, ``CAST(1 AS)``) was let through after a text scan that
skipped double-quoted names, so ``"pg_advisory_lock"(4242)``, ``"pg_terminate_backend"(pid)`` and
``"sqlite_source_id"()`` ran on correctly read-only targets. Now such a statement is refused as "could not be
checked" on every path that runs SQL, calls are checked by the name as written wherever they stand, and on
SQLite the engine's authorizer checks every function against the same allowlist.
"""

from __future__ import annotations

import psycopg
import pytest

from agent.sql import QueryRejected, ReadOnlyViolation, SQLError, connect
from agent.sql.functions import ALLOWED_FUNCTIONS
from agent.sql.guard import check_read_only

UNCHECKED = "could not be checked"

# The finding's statements: valid to the engine, unreadable to sqlglot.
UNPARSABLE = {
    "sqlite": ['SELECT CAST(1 AS) AS a, "sqlite_source_id"() AS b',
               'SELECT CAST(1 AS) AS a, "load_extension"(\'/tmp/x\') AS b'],
    "postgres": ['SELECT @ -5 AS a, "pg_advisory_lock"(4242) AS b',
                 "SELECT @ -5 AS a, \"set_config\"('role', 'postgres', true) AS b",
                 "SELECT @ -5 AS a, \"query_to_xml\"('select pg_read_file(''/etc/hostname'') AS f', true, false, '') AS c",
                 'SELECT CAST(1 AS) AS a, "pg_terminate_backend"(1) AS b'],
}


@pytest.mark.parametrize(("dialect", "sql"), [(d, q) for d, qs in UNPARSABLE.items() for q in qs])
def test_a_statement_the_parser_cannot_read_is_refused_as_unchecked(dialect, sql):
    with pytest.raises(QueryRejected, match=UNCHECKED):
        check_read_only(sql, dialect)


@pytest.mark.parametrize(("sql", "without"), [
    ("SELECT x FROM t WHERE a OPERATOR(pg_catalog.=) 1", "OPERATOR"),
    ("SELECT x FROM t WHERE a = $1", "parameters"),
    ("SELECT x FROM t WHERE a = %(a)s", "parameters"),
    ("SELECT x FROM t FOR UPDATE", "FOR UPDATE"),
    ("SELECT x FROM t TABLESAMPLE SYSTEM (10)", "TABLESAMPLE"),
    ("SELECT upper(a => 'x')", "named arguments"),
    ("SELECT xmlelement(name foo)", "XMLELEMENT"),
    ("SELECT a::pg_sleep(1) FROM t", "pg_sleep(...)"),
])
def test_constructs_the_guard_does_not_know_are_refused_as_unchecked(sql, without):
    with pytest.raises(QueryRejected, match=UNCHECKED) as refused:
        check_read_only(sql, "postgres")
    assert without in str(refused.value)


@pytest.mark.parametrize(("dialect", "sql", "name"), [
    ("postgres", 'SELECT "pg_sleep"(1)', "pg_sleep"),
    ("postgres", "SELECT pg_catalog.set_config('role', 'postgres', true)", "set_config"),
    ("postgres", "SELECT \"pg_catalog\".\"set_config\"('role', 'postgres', true)", "set_config"),
    ("postgres", "SELECT * FROM pg_catalog.pg_ls_dir('.') AS f", "pg_ls_dir"),
    ("postgres", "SELECT x FROM t, LATERAL pg_ls_dir('.') AS f", "pg_ls_dir"),
    ("postgres", "SELECT CAST(pg_backend_pid() AS text)", "pg_backend_pid"),
    ("postgres", "SELECT 1 + pg_sleep(1)::int", "pg_sleep"),
    ("postgres", "SELECT count(*) OVER (PARTITION BY pg_sleep(1)) FROM t", "pg_sleep"),
    ("postgres", "WITH x AS (SELECT pg_advisory_lock(1)) SELECT * FROM x", "pg_advisory_lock"),
    ("postgres", "VALUES (pg_advisory_lock(1))", "pg_advisory_lock"),
    ("postgres", "SELECT x FROM t WHERE x IN (SELECT pg_cancel_backend(1))", "pg_cancel_backend"),
    ("postgres", 'SELECT U&"pg\\005fsleep"(1)', "pg\\005fsleep"),
    ("postgres", 'SELECT "UPPER"(x) FROM t', "UPPER"),  # quoted names keep their case on PostgreSQL
    ("sqlite", "SELECT [load_extension]('/tmp/x')", "load_extension"),
    ("sqlite", "SELECT `sqlite_source_id`()", "sqlite_source_id"),
    ("sqlite", "SELECT * FROM pragma_table_info('t')", "pragma_table_info"),
])
def test_calls_are_checked_by_the_name_as_written_in_every_position(dialect, sql, name):
    with pytest.raises(QueryRejected, match=rf"Function {name.replace(chr(92), chr(92) * 2)}\(\) is not allowed"):
        check_read_only(sql, dialect)


def test_set_role_and_qualified_calls_outside_pg_catalog_are_refused():
    with pytest.raises(QueryRejected):
        check_read_only("SET ROLE postgres", "postgres")
    with pytest.raises(QueryRejected, match=UNCHECKED):
        check_read_only("SELECT public.upper('a')", "postgres")
    assert check_read_only("SELECT pg_catalog.upper('a')", "postgres")
    assert "set_config" not in ALLOWED_FUNCTIONS["postgres"]


def test_what_spider_and_the_postgresql_gold_queries_use_still_passes():
    for dialect, sql in [
        ("sqlite", "SELECT T1.name, count(*) FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.sid "
                   "WHERE T2.year LIKE '20%' GROUP BY T1.name HAVING count(*) > 1 ORDER BY T1.name DESC LIMIT 3"),
        ("sqlite", "SELECT a -> '$.x', a ->> '$.y', a GLOB 'c*', CAST(b AS REAL), iif(b, 1, 2) FROM t"),
        ("postgres", "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY balance) AS m FROM b"),
        ("postgres", "SELECT DATE_TRUNC('month', d)::date, CAST(x AS numeric(10, 2)), x::varchar(3), "
                     "extract(year FROM d), substring(n FROM 1 FOR 2), position('a' IN n) FROM t AS g(d, x, n)"),
        ("postgres", "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r"),
        ("postgres", "SELECT * FROM generate_series(1, 3) AS g(n) WHERE n = ANY(ARRAY[1, 2])"),
    ]:
        assert check_read_only(sql, dialect)


# --- SQLite: the engine checks the same allowlist -------------------------------------------------------


@pytest.fixture
def target(make_sqlite):
    path = make_sqlite("CREATE TABLE t (a TEXT, b INTEGER); INSERT INTO t VALUES ('{\"x\": 1}', 1);"
                       "CREATE VIEW sneaky AS SELECT sqlite_source_id() AS s FROM t;"
                       "CREATE VIEW plain AS SELECT upper(a) AS u FROM t;")
    with connect("sqlite", str(path)) as db:
        yield db


def test_the_sqlite_finding_is_refused_by_the_guard_and_by_the_engine(target):
    with pytest.raises(QueryRejected, match=UNCHECKED):
        target.execute('SELECT CAST(1 AS) AS a, "sqlite_source_id"() AS b')
    # Past the guard (as if it missed the call), the authorizer refuses the function by name.
    with pytest.raises(ReadOnlyViolation, match=r"function sqlite_source_id\(\) is not allowed"):
        target._run('SELECT CAST(1 AS INT) AS a, "sqlite_source_id"() AS b', target.limits)


def test_the_sqlite_authorizer_allows_the_allowlist_and_refuses_the_rest_inside_views_too(target):
    assert target.execute("SELECT u FROM plain").rows == [('{"X": 1}',)]
    assert target.execute("SELECT a -> '$.x', a ->> '$.x', a LIKE '%x%', a GLOB '*x*', CURRENT_DATE IS NOT NULL, "
                          "iif(b, 1, 2), count(*) OVER () FROM t").rows == [('1', 1, 1, 1, 1, 1, 1)]
    with pytest.raises(ReadOnlyViolation, match=r"sqlite_source_id\(\) is not allowed"):
        target.execute("SELECT s FROM sneaky")
    with pytest.raises(SQLError, match="not allowed"):
        target._internal("SELECT load_extension('/tmp/x')")  # the in-process connection of introspection


# --- every path that runs SQL refuses what the guard cannot check ----------------------------------------


def test_every_path_that_runs_sql_refuses_an_unchecked_statement(make_sqlite, tmp_path):
    from agent.tools import ToolBox, build_indexes
    from annotations.evaluation import EvalItem, evaluate
    from annotations.exemplars.lint import lint_steps

    path = make_sqlite("CREATE TABLE t (b INTEGER); INSERT INTO t VALUES (1);", name="paths.sqlite")
    attack = 'SELECT CAST(1 AS) AS a, "sqlite_source_id"() AS b'
    with connect("sqlite", str(path)) as db:
        build_indexes(db, tmp_path / "indexes", column_backend="bm25")
        result = ToolBox(db, tmp_path / "indexes").run("ExecuteSQL", [attack])  # the agent and both consoles
        assert not result.ok and UNCHECKED in result.observation
        report = lint_steps([], final_sql=attack, connector=db)  # an exemplar's final SQL
        assert UNCHECKED in " ".join(report.errors)
    for gold, pred, status in [("SELECT b FROM t", attack, "pred_error"), (attack, "SELECT b FROM t", "gold_error")]:
        outcome = evaluate([EvalItem(index=0, db_id="t", gold_sql=gold, pred_sql=pred)], mode="spider",
                           db_resolver=lambda _db: (path,), workers=1).per_question[0]  # predictions and gold
        assert outcome.status == status and UNCHECKED in outcome.error


# --- PostgreSQL: a correctly read-only role, the guard alone stops the finding ---------------------------


@pytest.mark.postgres
def test_the_postgresql_finding_is_refused_on_a_read_only_role_and_changes_nothing(pg_target, pg_reader):
    reader = pg_reader()
    role = reader.split("//", 1)[1].split(":", 1)[0]
    with psycopg.connect(reader, autocommit=True) as sibling, connect("postgresql", reader) as db:
        for sql in UNPARSABLE["postgres"] + [
                f'SELECT @ -5 AS a, "pg_terminate_backend"({sibling.info.backend_pid}) AS b',
                f'SELECT @ -5 AS a, "pg_cancel_backend"({sibling.info.backend_pid}) AS b']:
            with pytest.raises(QueryRejected, match=UNCHECKED):
                db.execute(sql)
        assert sibling.execute("SELECT 1").fetchone() == (1,)  # the same role's other backend is alive
        assert db.execute("SELECT count(*) FROM t").rows == [(2,)]
    with psycopg.connect(pg_target, autocommit=True) as admin:
        assert admin.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone() == (0,)
        assert admin.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (role,)).fetchone() == (0,)
