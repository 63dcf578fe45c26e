from __future__ import annotations

import sqlite3

from agent.sql import Limits, QueryResult, connect
from agent.tools import ToolBox, build_indexes, clear_cache
from agent.tools.execute_sql import format_result


def test_table_shows_header_literals_and_nulls(toolbox: ToolBox) -> None:
    result = toolbox.run("ExecuteSQL", ["SELECT name, age, NULL AS x FROM singer WHERE singer_id IN (1, 7) "
                                        "ORDER BY singer_id"])
    assert result.ok
    assert result.observation == "name | age | x\n'Joe Sharp' | 52 | NULL\n'Zoë O''Hara' | 30 | NULL"
    assert result.sql is not None and result.result is not None and len(result.result.rows) == 2


def test_long_results_are_cut_with_a_count(toolbox: ToolBox) -> None:
    lines = toolbox.run("ExecuteSQL", ["SELECT id FROM event_log ORDER BY id"]).observation.splitlines()
    assert len(lines) == 1 + 20 + 1
    assert lines[-1] == "... and 19 more rows (39 in total)"


def test_empty_result_says_no_rows(toolbox: ToolBox) -> None:
    assert toolbox.run("ExecuteSQL", ["SELECT name FROM singer WHERE 0"]).observation == "name\n(no rows)"


def test_long_cells_are_cut_and_floats_rounded() -> None:
    text = format_result(QueryResult(("t", "f"), [("x" * 300, 0.1 + 0.2)], 1))
    cell, number = text.splitlines()[1].split(" | ")
    assert len(cell) == 102 and cell.endswith("…'")
    assert number == "0.3"


def test_database_error_is_returned_so_the_agent_can_fix_it(toolbox: ToolBox) -> None:
    result = toolbox.run("ExecuteSQL", ["SELECT nmae FROM singer"])
    assert not result.ok and result.observation == "Error: no such column: nmae"


def test_writes_are_refused(toolbox: ToolBox) -> None:
    result = toolbox.run("ExecuteSQL", ["DELETE FROM singer"])
    assert not result.ok and result.observation.startswith("Error:")
    assert "6" in toolbox.run("ExecuteSQL", ["SELECT COUNT(*) - 1 FROM singer"]).observation


def test_sql_must_be_a_string(toolbox: ToolBox) -> None:
    result = toolbox.run("ExecuteSQL", [42])
    assert not result.ok and "ExecuteSQL(" in result.observation


def test_paper_profile_renders_the_sorted_set_of_the_whole_result(tmp_path) -> None:
    """The authors sorted every row before cutting at 200 characters: the smallest values come first even
    when they are past the rows kept for the session."""
    path = tmp_path / "big.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x INTEGER, y TEXT)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, None if i == 7 else "v") for i in range(3000, 0, -1)])
    conn.close()
    connector = connect("sqlite", str(path))
    build_indexes(connector, tmp_path / "idx", column_backend="bm25")
    with ToolBox(connector, tmp_path / "idx", profile="paper", limits=Limits(max_rows=1000)) as tools:
        result = tools.run("ExecuteSQL", ["SELECT x FROM t"])
        assert result.observation == str([(i,) for i in range(1, 3001)])[:200] + "..."
        assert len(result.result.rows) == 1000 and result.result.total_rows == 3000
        mixed = tools.run("ExecuteSQL", ["SELECT y FROM t"]).observation
    clear_cache()
    # NULL next to text: their sort failed and Python's message was the observation.
    assert mixed in ("'<' not supported between instances of 'str' and 'NoneType'",
                     "'<' not supported between instances of 'NoneType' and 'str'")
