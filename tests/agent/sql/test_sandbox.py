"""The SQLite query process: started ahead of the first query when asked."""

import sqlite3

from agent.sql import Limits
from agent.sql.sandbox import SQLiteSandbox
from agent.sql.sqlite import SQLiteConnector


def test_a_started_query_process_runs_before_the_first_query_and_serves_it(tmp_path):
    path = tmp_path / "t.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (id INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(3)])
    conn.close()
    sandbox = SQLiteSandbox()
    try:
        assert sandbox.pid is None
        sandbox.start()
        pid = sandbox.pid
        assert pid is not None
        sandbox.start()  # already running: the same process
        assert sandbox.pid == pid
        result = SQLiteConnector(path, sandbox=sandbox, limits=Limits(timeout_s=5)).execute("SELECT count(*) FROM t")
        assert result.rows == [(3,)] and sandbox.pid == pid
    finally:
        sandbox.close()
    assert sandbox.pid is None
