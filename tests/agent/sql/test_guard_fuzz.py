"""Fuzzing the read-only layers: generated statements (sqlglot-built writes, writes hidden in CTEs and
subqueries, stacked statements, function calls) never change the target, whatever the guard says.

Each example runs through ``execute`` (guard + engine) and straight at the engine (``_run``), on a
copy of the demo database whose bytes are compared after every batch.
"""

from __future__ import annotations

import hashlib

import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from agent.sql import Limits, QueryRejected, SQLError, connect
from agent.sql.guard import check_read_only

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.function_scoped_fixture])

TABLES = st.sampled_from(["Artist", "Album", "Track", "sqlite_master", "main.Artist", "temp.x", "nope"])
COLUMNS = st.sampled_from(["Name", "ArtistId", "Title", "x", "rowid"])
VALUES = st.one_of(st.integers(-5, 10**6), st.text(max_size=12), st.none())
FUNCTIONS = st.sampled_from([
    "load_extension", "writefile", "readfile", "edit", "fts3_tokenizer", "sqlite_compileoption_get",
    "zeroblob", "printf", "randomblob", "upper", "json_extract", "pg_sleep", "set_config", "lo_import",
    "pg_read_file", "dblink_exec", "sqlite_offset", "likelihood", "char", "hex", "unknown_fn",
])


def _literal(value):
    if value is None:
        return exp.Null()
    return exp.Literal.number(value) if isinstance(value, int) else exp.Literal.string(value)


@st.composite
def writes(draw):
    table, column, value = draw(TABLES), draw(COLUMNS), draw(VALUES)
    kind = draw(st.sampled_from(["insert", "update", "delete", "drop", "create", "alter", "replace"]))
    if kind == "insert":
        return exp.insert(exp.Tuple(expressions=[_literal(value)]), table, columns=[column]).sql("sqlite")
    if kind == "update":
        return exp.update(table, {column: _literal(value)}, where=f"{column} IS NOT NULL").sql("sqlite")
    if kind == "delete":
        return exp.delete(table, where=draw(st.sampled_from(["1=1", f"{column} > 3", None]))).sql("sqlite")
    if kind == "drop":
        return f"DROP {draw(st.sampled_from(['TABLE', 'VIEW', 'INDEX', 'TRIGGER']))} IF EXISTS {table}"
    if kind == "create":
        return draw(st.sampled_from([f"CREATE TABLE evil AS SELECT * FROM {table}",
                                     f"CREATE TRIGGER t AFTER INSERT ON {table} BEGIN DELETE FROM Artist; END",
                                     f"CREATE VIEW v AS SELECT {column} FROM {table}"]))
    if kind == "alter":
        return f"ALTER TABLE {table} ADD COLUMN evil INTEGER"
    return f"REPLACE INTO {table} ({column}) VALUES ({_literal(value).sql('sqlite')})"


@st.composite
def function_calls(draw):
    name = draw(FUNCTIONS)
    args = draw(st.lists(st.one_of(VALUES.map(lambda v: _literal(v).sql("sqlite")), COLUMNS), max_size=3))
    return f"SELECT {name}({', '.join(args)}) FROM {draw(TABLES)}"


@st.composite
def statements(draw):
    write = draw(writes())
    select = draw(st.one_of(function_calls(), st.just("SELECT Name FROM Artist LIMIT 1")))
    return draw(st.sampled_from([
        write, f"WITH x AS (SELECT 1) {write}", f"{select}; {write}", f"{write}; {select}",
        f"SELECT * FROM ({write})", f"WITH x AS ({write} RETURNING *) SELECT * FROM x",
        f"{select} UNION ALL {write}", select, f"/* c */ {write} -- x", f"PRAGMA writable_schema = 1; {write}",
        f"ATTACH DATABASE ':memory:' AS a; {write}", "VACUUM INTO '/tmp/t2s-fuzz.sqlite'",
    ]))


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    import shutil

    from agent.conf import agent_settings

    path = tmp_path_factory.mktemp("fuzz") / "chinook.sqlite"
    shutil.copy(agent_settings.DEMO_DATABASE, path)
    with connect("sqlite", str(path), limits=Limits(timeout_s=2, max_rows=50)) as db:
        yield path, db


@FUZZ
@given(statements())
def test_no_generated_statement_changes_the_target(target, sql):
    path, db = target
    before = _digest(path)
    for run in (db.execute, lambda s: db._run(s, db.limits)):
        try:
            run(sql)
        except SQLError:
            pass
    assert _digest(path) == before, sql
    assert db.execute("SELECT COUNT(*) FROM Artist").rows == [(275,)]


@FUZZ
@given(writes())
def test_the_guard_refuses_every_sqlglot_built_write(sql):
    with pytest.raises(QueryRejected):
        check_read_only(sql, "sqlite")


@FUZZ
@given(st.text(max_size=300))
def test_the_guard_never_raises_anything_but_a_rejection(text):
    try:
        check_read_only(text, "sqlite")
    except QueryRejected:
        pass


def test_guard_refuses_sqlglot_generated_writes_in_postgres_dialect_too():
    for sql in ["INSERT INTO t VALUES (1)", "UPDATE t SET a = 1", "DELETE FROM t", "DROP TABLE t"]:
        with pytest.raises(QueryRejected):
            check_read_only(sqlglot.transpile(sql, write="postgres")[0], "postgres")
