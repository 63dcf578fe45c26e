"""The SQL guard's function allowlist: what an analyst's query needs passes, everything else is refused by name.

Issue #12's findings on a real PostgreSQL target (query_to_xml over pg_read_file, dblink_exec writing a row,
pg_terminate_backend ending another backend, pg_ls_dir / pg_stat_file / pg_shadow readable) are reproduced
here through the connector, even as a superuser with the role check off (the worst case): each is refused by the
guard before it reaches the server, and the target and the other backend are unchanged.
"""

from __future__ import annotations

import psycopg
import pytest

from agent.sql import QueryRejected, SQLError, connect
from agent.sql.guard import check_read_only

ALLOWED = {
    "sqlite": [
        "SELECT substr(Name, 1, 3), upper(Name), length(Name), instr(Name, 'a'), replace(Name, 'a', 'b') FROM t",
        "SELECT strftime('%Y', d), julianday(d), date(d), datetime('now'), CAST(x AS REAL), iif(x > 1, 1, 0) FROM t",
        "SELECT count(DISTINCT x), sum(x), avg(x), min(x), max(x), total(x), group_concat(Name) FROM t",
        "SELECT ifnull(x, 0), coalesce(x, 1), nullif(x, 2), abs(x), round(x, 2), typeof(x), x || Name FROM t",
        "SELECT Name, row_number() OVER (ORDER BY x), rank() OVER (PARTITION BY d ORDER BY x), lag(x) OVER () FROM t",
        "SELECT json_extract(j, '$.a'), json_array_length(j) FROM t",
    ],
    "postgres": [
        "SELECT extract(year FROM d), date_trunc('month', d), to_char(d, 'YYYY'), now(), age(d) FROM t",
        "SELECT string_agg(name, ','), split_part(name, '-', 1), position('a' IN name), name::text FROM t GROUP BY 1",
        "SELECT substring(name FROM 1 FOR 2), left(name, 2), greatest(x, 1), lead(x) OVER (ORDER BY x) FROM t",
        "SELECT * FROM generate_series(1, 3) AS g(n)",
    ],
}

REFUSED = {
    "postgres": [
        ("SELECT query_to_xml('select pg_read_file(''/etc/passwd'')', true, true, '')", "query_to_xml"),
        ("SELECT dblink_exec('dbname=x', 'INSERT INTO t VALUES (9)')", "dblink_exec"),
        ("SELECT * FROM dblink('dbname=x', 'select 1') AS r(a int)", "dblink"),
        ("SELECT pg_terminate_backend(1)", "pg_terminate_backend"),
        ("SELECT pg_cancel_backend(1)", "pg_cancel_backend"),
        ("SELECT pg_catalog.pg_read_file('/etc/passwd')", "pg_read_file"),
        ("SELECT * FROM pg_ls_dir('.')", "pg_ls_dir"),
        ("SELECT (pg_stat_file('postgresql.conf')).size", "pg_stat_file"),
        ("SELECT lo_import('/etc/passwd')", "lo_import"),
        ("SELECT lo_get(1)", "lo_get"),
        ("SELECT set_config('default_transaction_read_only', 'off', false)", "set_config"),
        ("SELECT current_setting('data_directory')", "current_setting"),
        ("SELECT pg_advisory_lock(1)", "pg_advisory_lock"),
        ("SELECT pg_sleep(10)", "pg_sleep"),
        ("SELECT name FROM t WHERE x = (SELECT pg_reload_conf()::int)", "pg_reload_conf"),
        ("SELECT txid_current()", "txid_current"),
    ],
    "sqlite": [
        ("SELECT load_extension('/tmp/evil')", "load_extension"),
        ("SELECT * FROM pragma_table_info('t')", "pragma_table_info"),
        ("SELECT fts3_tokenizer('simple')", "fts3_tokenizer"),
        ("SELECT readfile('/etc/passwd')", "readfile"),
    ],
}


@pytest.mark.parametrize(("dialect", "sql"), [(d, q) for d, qs in ALLOWED.items() for q in qs])
def test_what_analysts_need_passes(dialect, sql):
    assert check_read_only(sql, dialect)


@pytest.mark.parametrize(("dialect", "sql", "name"), [(d, q, n) for d, qs in REFUSED.items() for q, n in qs])
def test_everything_else_is_refused_by_name(dialect, sql, name):
    with pytest.raises(QueryRejected, match=rf"Function {name}\(\) is not allowed"):
        check_read_only(sql, dialect)


@pytest.mark.postgres
def test_findings_are_refused_on_a_real_postgresql_target_and_change_nothing(pg_target):
    other = psycopg.connect(pg_target, autocommit=True)
    other_pid = other.info.backend_pid
    try:
        with connect("postgresql", pg_target, check_role=False) as db:  # a superuser: the worst case
            for sql, name in [
                ("SELECT query_to_xml('select pg_read_file(''PG_VERSION'')', true, true, '')", "query_to_xml"),
                (f"SELECT pg_terminate_backend({other_pid})", "pg_terminate_backend"),
                ("SELECT * FROM pg_ls_dir('.')", "pg_ls_dir"),
                ("SELECT (pg_stat_file('PG_VERSION')).size", "pg_stat_file"),
                ("SELECT set_config('default_transaction_read_only', 'off', false)", "set_config"),
                ("SELECT current_setting('data_directory')", "current_setting"),
                ("SELECT dblink_exec('dbname=postgres', 'INSERT INTO t VALUES (99)')", "dblink_exec"),
            ]:
                with pytest.raises(QueryRejected, match=name):
                    db.execute(sql)
            assert db.execute("SELECT count(*) FROM t").rows == [(2,)]
        assert other.execute("SELECT 1").fetchone() == (1,)  # the other backend is alive
    finally:
        other.close()
    with psycopg.connect(pg_target) as conn:
        assert conn.execute("SELECT x FROM t ORDER BY x").fetchall() == [(1,), (2,)]


@pytest.mark.postgres
def test_a_read_only_role_cannot_read_server_files_or_shadow_even_past_the_guard(pg_target, pg_reader):
    """The inner layers hold on their own: the role check admits only roles that these are denied to."""
    with connect("postgresql", pg_reader()) as db:
        for sql in ["SELECT pg_read_file('PG_VERSION')", "SELECT * FROM pg_ls_dir('.')",
                    "SELECT passwd FROM pg_shadow", "SELECT rolpassword FROM pg_authid"]:
            with pytest.raises(SQLError, match="permission denied"):
                db._run(sql, db.limits)

