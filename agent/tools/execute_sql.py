"""ExecuteSQL(sql): run one read-only query on the target and show a compact table.

Observation: a header line, then at most ``show_rows`` rows, cells as SQL
literals (strings quoted, cut to 100 characters; NULL bare), then a count
line. On failure, the database's error text, so the agent can fix the query::

    Name | Milliseconds
    'Balls to the Wall' | 342562
    'Fast As a Shark' | 230619
    ... and 3501 more rows (3503 in total)

    Error: no such column: Nmae
"""

from __future__ import annotations

from agent.sql import Connector, Limits, QueryResult, SQLError

from .base import ToolResult
from .errors import ToolError
from .text import sql_literal

DEFAULT_SHOW_ROWS = 20


def _cell(value: object) -> str:
    if isinstance(value, float) and len(repr(value)) > 12:
        return format(value, ".10g")  # 0.30000000000000004 -> 0.3: the digits past 10 are float noise
    return sql_literal(value)


def format_result(result: QueryResult, show_rows: int = DEFAULT_SHOW_ROWS) -> str:
    lines = [" | ".join(result.columns)]
    shown = result.rows[:show_rows]
    lines.extend(" | ".join(_cell(v) for v in row) for row in shown)
    if not result.rows:
        lines.append("(no rows)")
    hidden = result.total_rows - len(shown)
    if hidden > 0:
        total = f"{result.total_rows}" if result.total_is_exact else f"more than {result.total_rows}"
        lines.append(f"... and {hidden}{'' if result.total_is_exact else '+'} more rows ({total} in total)")
    elif result.truncated_bytes:
        lines.append("... more rows not shown (result too large)")
    return "\n".join(lines)


def execute_sql(connector: Connector, sql: object, *, limits: Limits | None = None,
                show_rows: int = DEFAULT_SHOW_ROWS) -> ToolResult:
    if not isinstance(sql, str) or not sql.strip():
        raise ToolError('ExecuteSQL needs one SQL query as a string, e.g. ExecuteSQL("SELECT name FROM singer").')
    text = sql.strip()
    try:
        result = connector.execute(text, limits=limits)
    except SQLError as exc:
        return ToolResult(f"Error: {exc}", False, 0.0, sql=text)
    return ToolResult(format_result(result, show_rows), True, 0.0, sql=text, result=result)
