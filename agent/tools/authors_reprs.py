"""Observations written by the paper authors' tools (Python reprs), rewritten in the default profile's format.

The paper's exemplar files carry their tools' outputs. When an exemplar's database is not registered here its
calls cannot run again, so the default profile rewrites the stored text instead, and the model sees one format
in the examples and in its own steps. What the reprs do not hold is left out (a column's primary-key flag,
value counts, ExecuteSQL's exact column headers: taken from the query's select list). Text that is not one of
their reprs is returned unchanged.

No Django here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from typing import Any

import sqlglot
from sqlglot import exp

from agent.sql import QueryResult

from .column_index import ColumnDoc
from .execute_sql import format_result
from .search_column import format_column
from .search_value import format_cells
from .text import sql_literal
from .value_index import Cell

_MIN_MAX = re.compile(r"^min: (.*), max: (.*?)(?:\. distinct count: (\d+))?$", re.DOTALL)
_DATE = re.compile(r"^\d{4}-\d\d")


def default_from_authors(name: str, args: Sequence[Any], kwargs: Mapping[str, Any], observation: str) -> str:
    """The stored observation of a call ``name(*args, **kwargs)`` in the default profile's format."""
    try:
        found = ast.literal_eval(observation.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        found = None
    rewrite = {"SearchColumn": _columns, "SearchValue": _values, "FindShortestPath": _paths,
               "ExecuteSQL": _rows}.get(name)
    if rewrite is None:
        return observation
    try:
        return rewrite(found, args, kwargs, observation)
    except (TypeError, KeyError, AttributeError, ValueError):
        return observation  # not the shape their tool wrote: keep it as it is


def _first_arg(args: Sequence[Any], kwargs: Mapping[str, Any], *names: str) -> Any:
    if args:
        return args[0]
    return next((kwargs[n] for n in names if n in kwargs), None)


def _keyed(found: Any, asked: Any) -> list[tuple[str, list[dict[str, Any]]]]:
    if isinstance(found, dict):
        return [(str(k), list(v)) for k, v in found.items()]
    phrase = asked[0] if isinstance(asked, list) and asked else asked
    return [(str(phrase or ""), list(found))]


def _statistics(text: str) -> str:
    if text.startswith("categorical field. "):
        rest = text[len("categorical field. "):]
        try:
            values = ast.literal_eval(rest)
        except (ValueError, SyntaxError):
            return f"enumeration: {rest.strip('[]')}"
        # Their exemplar files shorten some lists by hand with a bare ``...``.
        return "enumeration: " + ", ".join("..." if v is Ellipsis else sql_literal(v) for v in values)
    if text.startswith("text filed. e.g. "):
        examples = [v for v in text[len("text filed. e.g. "):].removesuffix("...").strip(" ,").split(", ") if v]
        return "text field, e.g. " + ", ".join(sql_literal(v) for v in examples if v != "...")
    match = _MIN_MAX.match(text)
    if match:
        lo, hi, distinct = match.groups()
        kind = "date" if _DATE.match(lo) else "numeric"
        return f"{kind} range: {lo} .. {hi}" + (f"; distinct count: {distinct}" if distinct else "")
    if text == "empty column.":
        return "no non-null values"
    return text


def _columns(found: Any, args: Sequence[Any], kwargs: Mapping[str, Any], observation: str) -> str:
    if not isinstance(found, list | dict):
        return observation
    blocks = []
    for phrase, records in _keyed(found, _first_arg(args, kwargs, "query", "semantic", "phrase")):
        lines = [f"{sql_literal(phrase.strip())}:"]
        for r in records:
            doc = ColumnDoc(table=r["table"], column=r["column"], type=str(r.get("format") or "").upper(),
                            description=str(r.get("column_description") or ""),
                            statistics=_statistics(str(r.get("statistics") or "")))
            lines.append(format_column(doc))
        if not records:
            lines[0] += " no column matches these words; try other words for the same meaning."
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def _values(found: Any, args: Sequence[Any], kwargs: Mapping[str, Any], observation: str) -> str:
    if not isinstance(found, list | dict):
        return observation
    blocks = []
    for value, records in _keyed(found, _first_arg(args, kwargs, "query", "value")):
        cells = list({(r["table"], r["column"], r["contents"]): Cell(
            r["table"], r["column"], str(r["contents"]), 1, 0 if r["contents"] == value else 3, 0.0)
            for r in records}.values())
        cells.sort(key=lambda c: c.tier)
        blocks.append(format_cells(value, cells))
    return "\n".join(blocks)


def _paths(found: Any, args: Sequence[Any], kwargs: Mapping[str, Any], observation: str) -> str:
    if isinstance(found, list) and all(isinstance(p, tuple) and len(p) == 3 for p in found):
        return "\n".join(str(p[2]) for p in found)
    return observation  # one pair: the path alone, already one line as the default profile writes it


def _rows(found: Any, args: Sequence[Any], kwargs: Mapping[str, Any], observation: str) -> str:
    if not isinstance(found, list) or not all(isinstance(r, tuple) for r in found):
        return f"Error: {observation}" if not observation.startswith("[") else observation
    sql = _first_arg(args, kwargs, "sql", "query")
    columns = _select_names(str(sql or ""), len(found[0]) if found else None)
    return format_result(QueryResult(tuple(columns), list(found), len(found)))


def _select_names(sql: str, width: int | None) -> list[str]:
    """Column headers as SQLite names them, near enough: the alias, else the column, else the expression."""
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.ParseError:
        tree = None
    names: list[str] = []
    if isinstance(tree, exp.Select):
        for e in tree.expressions:
            if isinstance(e, exp.Alias):
                names.append(e.alias)
            elif isinstance(e, exp.Column):
                names.append(e.name)
            else:
                names.append(e.sql(dialect="sqlite"))
    if width is not None and len(names) != width:
        names = [f"column{i}" for i in range(1, width + 1)]
    return names
