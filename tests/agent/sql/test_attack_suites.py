"""Generated attacks on the function allowlist (issue #27): every function the engines have and the allowlist
does not name, in every syntactic position, written every way, wrapped in constructs the parser does not
know, is refused.

The functions come from the engines themselves: SQLite's ``pragma_function_list`` and the real PostgreSQL
server's ``pg_proc``. Hypothesis combines a function, a position (select list, FROM, LATERAL, WHERE, JOIN,
ORDER BY, HAVING, LIMIT, windows, casts, operators, CASE, subqueries, CTEs, VALUES, set operations...), a
spelling (quoted, bracketed, upper case, schema-qualified, a comment before the parenthesis) and a wrapper.
The guard must refuse each; on SQLite the statement is also run past the guard, where the authorizer refuses
the function by name. PostgreSQL statements are only ever checked, never run.
"""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.sql import QueryRejected, ReadOnlyViolation, SQLError, connect
from agent.sql.functions import ALLOWED_FUNCTIONS
from agent.sql.guard import check_read_only
from tests.conftest import PG_ADMIN_DSN, service_unavailable

GUARD = settings(max_examples=400, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
ENGINE = settings(GUARD, max_examples=80)

POSITIONS = {
    "both": [
        "SELECT {call} FROM t", "SELECT a FROM t WHERE {call} IS NOT NULL", "SELECT a FROM t ORDER BY {call}",
        "SELECT a FROM t GROUP BY a HAVING {call} > 0", "SELECT * FROM {call}", "SELECT * FROM {call} AS f",
        "SELECT t.a FROM t JOIN t AS u ON {call} = u.a", "SELECT (SELECT {call}) FROM t",
        "WITH x AS (SELECT {call} AS c) SELECT c FROM x", "VALUES ({call})", "VALUES (1), ({call})",
        "SELECT CASE WHEN a > 0 THEN {call} ELSE 0 END FROM t", "SELECT CAST({call} AS TEXT)",
        "SELECT count(*) OVER (PARTITION BY {call}) FROM t", "SELECT sum(a) OVER (ORDER BY {call}) FROM t",
        "SELECT a FROM t WHERE a IN (SELECT {call})", "SELECT a FROM t LIMIT {call}", "SELECT 1 UNION SELECT {call}",
        "SELECT 1 EXCEPT SELECT {call}", "SELECT -{call}", "SELECT a || {call} FROM t",
        "SELECT coalesce(a, {call}) FROM t", "SELECT a FROM t WHERE EXISTS (SELECT {call})",
        "SELECT a FROM (SELECT {call} AS a) AS s", "SELECT count({call}) FROM t",
        "SELECT a FROM t WHERE a BETWEEN {call} AND 2", "SELECT max(a) FILTER (WHERE {call} > 0) FROM t",
    ],
    "postgres": [
        "SELECT x FROM t, LATERAL {call} AS f", "SELECT {call}::text", "SELECT ARRAY[{call}]",
        "SELECT a FROM t WHERE a = ANY(ARRAY[{call}])", "SELECT * FROM ROWS FROM ({call}) AS f",
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY {call}) FROM t", "SELECT DISTINCT ON ({call}) a FROM t",
        "SELECT a FROM t GROUP BY ROLLUP ({call})", "SELECT (({call}))", "SELECT ROW({call})",
    ],
    "sqlite": ["SELECT a FROM t WHERE a GLOB {call}", "SELECT iif({call}, 1, 2)"],
}
SPELLINGS = {
    "both": ["{name}({args})", '"{name}"({args})', "{upper}({args})", "{name} ({args})", "{name}/* c */({args})",
             "{name}\n({args})"],
    "postgres": ["pg_catalog.{name}({args})", '"pg_catalog"."{name}"({args})', "public.{name}({args})"],
    "sqlite": ["[{name}]({args})", "`{name}`({args})"],
}
# Constructs the parser does not know (or refuses): the statement goes inside or beside them.
WRAPPERS = {
    "both": ["{stmt}", "SELECT CAST(1 AS) AS w, s.* FROM ({stmt}) AS s", "SELECT s.* FROM ({stmt}) AS s WHERE ?"],
    "postgres": ["SELECT @ -5 AS w, s.* FROM ({stmt}) AS s", "SELECT 1 OPERATOR(pg_catalog.+) 1 AS w, s.* FROM ({stmt}) AS s",
                 "SELECT $1 AS w, s.* FROM ({stmt}) AS s", "SELECT s.* FROM ({stmt}) AS s FOR UPDATE"],
    "sqlite": ["SELECT :name AS w, s.* FROM ({stmt}) AS s", "SELECT @v AS w, s.* FROM ({stmt}) AS s"],
}


def _for(table: dict[str, list[str]], dialect: str) -> list[str]:
    return table["both"] + table[dialect]


def statements(dialect: str, names: list[str], args=lambda _name: "1"):
    @st.composite
    def build(draw):
        name = draw(st.sampled_from(names))
        call = draw(st.sampled_from(_for(SPELLINGS, dialect))).format(name=name, upper=name.upper(), args=args(name))
        stmt = draw(st.sampled_from(_for(POSITIONS, dialect))).format(call=call)
        return name, draw(st.sampled_from(_for(WRAPPERS, dialect))).format(stmt=stmt)

    return build()


# --- SQLite ------------------------------------------------------------------------------------------------


def _sqlite_functions() -> dict[str, int]:
    """Every function of the SQLite the app runs, with one arity it accepts (-1: variadic, called with one)."""
    with sqlite3.connect(":memory:") as conn:
        rows = conn.execute("SELECT name, narg FROM pragma_function_list ORDER BY name, narg DESC").fetchall()
    conn.close()
    arity: dict[str, int] = {}
    for name, narg in rows:
        arity.setdefault(name, 1 if narg < 0 else narg)
    return arity


SQLITE = _sqlite_functions()
SQLITE_REFUSED = sorted(n for n in SQLITE if n not in ALLOWED_FUNCTIONS["sqlite"] and n.isidentifier())


def _sqlite_args(name: str) -> str:
    return ", ".join(["1"] * SQLITE[name])


def test_sqlite_has_functions_outside_the_allowlist_to_attack_with():
    assert {"load_extension", "sqlite_source_id", "sqlite_compileoption_get", "fts3_tokenizer"} <= set(SQLITE_REFUSED)


@pytest.mark.parametrize("name", SQLITE_REFUSED)
def test_every_sqlite_function_outside_the_allowlist_is_refused_by_the_guard_and_the_engine(name, sqlite_target):
    sql = f"SELECT {name}({_sqlite_args(name)}) FROM t"
    with pytest.raises(QueryRejected):  # by name, or unchecked where sqlglot wants other arguments
        sqlite_target.execute(sql)
    with pytest.raises(ReadOnlyViolation, match=rf"function {name}\(\) is not allowed"):
        sqlite_target._run(sql, sqlite_target.limits)


@GUARD
@given(statements("sqlite", SQLITE_REFUSED, _sqlite_args))
def test_generated_sqlite_attacks_are_refused_by_the_guard(attack):
    _name, sql = attack
    with pytest.raises(QueryRejected):
        check_read_only(sql, "sqlite")


@ENGINE
@given(statements("sqlite", SQLITE_REFUSED, _sqlite_args))
def test_generated_sqlite_attacks_never_run_past_the_guard_either(sqlite_target, attack):
    """The engine on its own: whatever the statement, the call is never made (an error, never rows)."""
    _name, sql = attack
    with pytest.raises(SQLError):
        sqlite_target._run(sql, sqlite_target.limits)


@pytest.fixture(scope="module")
def sqlite_target(tmp_path_factory):
    path = tmp_path_factory.mktemp("attacks") / "t.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript("CREATE TABLE t (a INTEGER, x TEXT); INSERT INTO t VALUES (1, 'x');")
    conn.close()
    with connect("sqlite", str(path)) as db:
        yield db


# --- PostgreSQL (the real server's catalog; statements are checked, never run) -----------------------------


@pytest.fixture(scope="module")
def pg_functions() -> list[str]:
    try:
        with psycopg.connect(PG_ADMIN_DSN, connect_timeout=3) as conn:
            names = [r[0] for r in conn.execute("SELECT DISTINCT proname FROM pg_proc ORDER BY 1")]
    except psycopg.OperationalError:
        service_unavailable("PostgreSQL")
    refused = [n for n in names if n not in ALLOWED_FUNCTIONS["postgres"]]
    assert {"set_config", "pg_read_file", "pg_terminate_backend", "query_to_xml", "lo_import"} <= set(refused)
    return refused


@pytest.mark.postgres
def test_every_postgresql_function_outside_the_allowlist_is_refused_by_the_guard(pg_functions):
    accepted = []
    for name in pg_functions:
        for spelling in (f"{name}(1)", f'"{name}"(1)', f"pg_catalog.{name}(1)", f"SELECT * FROM {name}(1)"):
            sql = spelling if spelling.startswith("SELECT") else f"SELECT {spelling} FROM t"
            try:
                check_read_only(sql, "postgres")
            except QueryRejected:
                continue
            accepted.append(sql)
    assert not accepted


@pytest.mark.postgres
@GUARD
@given(data=st.data())
def test_generated_postgresql_attacks_are_refused_by_the_guard(pg_functions, data):
    _name, sql = data.draw(statements("postgres", pg_functions))
    with pytest.raises(QueryRejected):
        check_read_only(sql, "postgres")


@pytest.mark.postgres
def test_functions_callable_in_column_notation_have_no_side_effects():
    """PostgreSQL runs ``t.f`` as ``f(t)`` for a function of one row argument, which the parser cannot tell from a
    column: every such function outside the allowlist must be immutable or stable (no side effect); the role
    check stands behind them."""
    try:
        with psycopg.connect(PG_ADMIN_DSN, connect_timeout=3) as conn:
            rows = conn.execute(
                "SELECT proname, provolatile FROM pg_proc WHERE pronargs >= 1 AND pronargs - pronargdefaults <= 1 "
                "AND proargtypes[0] IN ('record'::regtype, '\"any\"'::regtype, 'anyelement'::regtype, "
                "'anynonarray'::regtype, 'anycompatible'::regtype, 'anycompatiblenonarray'::regtype)").fetchall()
    except psycopg.OperationalError:
        service_unavailable("PostgreSQL")
    assert rows and not [name for name, volatile in rows if volatile == "v"]
