"""The contract between the tools and whatever calls them (agent loop, console, CLI)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agent.sql import QueryResult, SchemaInfo


@dataclass(frozen=True)
class ToolResult:
    """What one tool call produced. ``observation`` is exactly the text the agent sees."""

    observation: str
    ok: bool  # False when the tool reported an error (bad arguments, SQL error, unknown column)
    elapsed_ms: float
    sql: str | None = None  # ExecuteSQL: the query as run
    result: QueryResult | None = None  # ExecuteSQL: the rows, when it succeeded


class ToolRunner(Protocol):
    """Anything that can run the agent's tools by name (the real ToolBox, or a test double)."""

    schema: SchemaInfo
    tool_names: tuple[str, ...]

    def run(self, name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> ToolResult: ...
