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

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from agent.sql import Connector, Limits, QueryResult, SQLError
from agent.sql.base import human_bytes

from . import paper_profile
from .base import ToolResult
from .errors import ToolError
from .spec import DEFAULT_PROFILE, FormField, Param, ToolContext, ToolOutput, ToolSpec
from .text import sql_literal

DEFAULT_SHOW_ROWS = 20
WHOLE_ROWS = 1_000_000  # rows read for the paper profile's rendering of the whole result
WHOLE_BYTES = 64_000_000


def _cell(value: object) -> str:
    if isinstance(value, float) and len(repr(value)) > 12:
        return format(value, ".10g")  # 0.30000000000000004 -> 0.3: the digits past 10 are float noise
    return sql_literal(value)


def format_result(result: QueryResult, show_rows: int = DEFAULT_SHOW_ROWS, max_bytes: int | None = None) -> str:
    lines = [" | ".join(result.columns)]
    shown = result.rows[:show_rows]
    lines.extend(" | ".join(_cell(v) for v in row) for row in shown)
    if not result.rows:
        lines.append("(no rows)")
    hidden = result.total_rows - len(shown)
    if hidden > 0:
        total = f"{result.total_rows}" if result.total_is_exact else f"more than {result.total_rows}"
        lines.append(f"... and {hidden}{'' if result.total_is_exact else '+'} more rows ({total} in total)"
                     + (f"; result too large, limit {human_bytes(max_bytes)}" if result.truncated_bytes and max_bytes
                        else ""))
    elif result.truncated_bytes:
        limit = f", limit {human_bytes(max_bytes)}" if max_bytes else ""
        lines.append(f"... more rows not shown (result too large{limit})")
    return "\n".join(lines)


@dataclass(frozen=True)
class QueryOutcome:
    """What ExecuteSQL found: the rows (``result``) or the database's error text, how many rows to show, and
    the byte cap the rows were read under (named when a result was cut)."""

    result: QueryResult | None
    error: str | None
    show_rows: int
    max_bytes: int | None = None


def run_query(connector: Connector, sql: object, *, limits: Limits | None = None,
              show_rows: int = DEFAULT_SHOW_ROWS, whole: bool = False) -> ToolOutput:
    """The query's rows, or the database's error text (``data`` is a QueryOutcome).

    ``whole`` (the paper profile) reads every row, up to ``WHOLE_ROWS`` and ``WHOLE_BYTES``, since the
    authors rendered the sorted set of the full result; the result kept with the call still holds at most
    the usual ``max_rows``.
    """
    if not isinstance(sql, str) or not sql.strip():
        raise ToolError('ExecuteSQL needs one SQL query as a string, e.g. ExecuteSQL("SELECT name FROM singer").')
    text = sql.strip()
    base = limits or connector.limits
    run_limits = replace(base, max_rows=max(base.max_rows, WHOLE_ROWS), max_bytes=max(base.max_bytes, WHOLE_BYTES)) \
        if whole else base
    try:
        result = connector.execute(text, limits=run_limits)
    except SQLError as exc:
        return ToolOutput(QueryOutcome(None, str(exc), show_rows), ok=False, sql=text)
    kept = result
    if whole and len(result.rows) > base.max_rows:
        kept = replace(result, rows=result.rows[:base.max_rows])
    return ToolOutput(QueryOutcome(result, None, show_rows, run_limits.max_bytes), sql=text, result=kept)


def observe(output: ToolOutput, profile: str = DEFAULT_PROFILE) -> str:
    if profile == paper_profile.PAPER_PROFILE:
        return paper_profile.execute_sql(output)
    found: QueryOutcome = output.data
    if found.result is None:
        return f"Error: {found.error}"
    return format_result(found.result, found.show_rows, found.max_bytes)


def execute_sql(connector: Connector, sql: object, *, limits: Limits | None = None,
                show_rows: int = DEFAULT_SHOW_ROWS) -> ToolResult:
    output = run_query(connector, sql, limits=limits, show_rows=show_rows)
    return ToolResult(observe(output), output.ok, 0.0, sql=output.sql, result=output.result)


def _execute(ctx: ToolContext, a: Mapping[str, Any]) -> ToolOutput:
    return run_query(ctx.connector, a["sql"], limits=ctx.limits, show_rows=ctx.show_rows,
                     whole=ctx.profile == paper_profile.PAPER_PROFILE)


SPEC = ToolSpec(
    name="ExecuteSQL",
    params=(Param("sql", "str", aliases=("query",)),),
    description=(
        "Runs one read-only {dialect} query and returns its rows (large results are cut). Use it to check "
        "values and to run the final query. The last query you execute successfully is taken as the answer."
    ),
    guidance="Write the complete query and run it with ExecuteSQL. The last successfully executed "
             "query is the answer, so make sure it is complete and correct, then finish with Done.",
    execute=_execute,
    observe=observe,
    fields=(FormField("sql", "SQL", "sql", kind="text", required=True, placeholder="SELECT ...", mono=True),),
    example='ExecuteSQL("SELECT COUNT(*) FROM student")',
    example_rank=1,
    profiles=(DEFAULT_PROFILE, paper_profile.PAPER_PROFILE),
)
