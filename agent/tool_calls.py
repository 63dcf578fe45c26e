"""A tool call from the per-tool form fields a person fills in (tool console, exemplar console).

No Django: plain mappings in, the call's arguments and its text as the agent writes it out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def call_from_fields(tool: str, data: Mapping[str, str]) -> tuple[list[Any], dict[str, Any]]:
    """(args, kwargs) for ``tool`` from its fields: phrases (one per line), value/table/column, start/end, sql."""

    def field(name: str) -> str:
        return (data.get(name) or "").strip()

    if tool == "SearchColumn":
        phrases = [p.strip() for p in field("phrases").splitlines() if p.strip()]
        return [phrases if len(phrases) != 1 else phrases[0]], {}
    if tool == "SearchValue":
        return [field("value")], {k: field(k) for k in ("table", "column") if field(k)}
    if tool == "FindShortestPath":
        return [], {"start": field("start"), "end": field("end")}
    if tool == "ExecuteSQL":
        return [field("sql")], {}
    raise ValueError(f"Unknown tool {tool!r}.")


def action_text(tool: str, args: list[Any], kwargs: Mapping[str, Any]) -> str:
    """The call as the agent would write it, e.g. ``SearchValue("France", table="Customer")``."""
    parts = [json.dumps(a, ensure_ascii=False) for a in args]
    parts += [f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in kwargs.items()]
    return f"{tool}({', '.join(parts)})"
