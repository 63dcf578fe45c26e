"""SearchValue(query, table=None, column=None): cells of text columns holding a value.

Exact cells first, then cells equal up to case/accents, then cells holding
all the words, then close ones (some words, one-letter typos, word
prefixes). Cells are printed as SQL literals (``'`` doubled, cut to 100
characters) so they can be pasted into a query and are always read as data::

    'france':
    no exact match; closest cells:
    singer.Country = 'France'
    concert.Theme = 'Vive la France'

Filters take a name or a list of names; ``column`` may be ``col`` or ``table.col``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.sql import SchemaInfo

from . import paper_profile
from .base import ToolResult
from .errors import ToolError, closest, str_list
from .spec import DEFAULT_PROFILE, FormField, Param, ToolContext, ToolOutput, ToolSpec
from .text import qualified, sql_literal
from .value_index import Cell, ValueIndex

DEFAULT_LIMIT = 10


def _filters(index: ValueIndex, table: object, column: object) -> list[int] | None:
    tables = str_list(table, "table") if table not in (None, "", []) else []
    columns = str_list(column, "column") if column not in (None, "", []) else []
    known_tables = {t for t, _ in index.columns.values()}
    lowered = {t.lower() for t in known_tables}
    for name in tables:
        if name.lower() not in lowered:
            hint = closest(name, known_tables)
            raise ToolError(f"Table {name!r} has no text column indexed"
                            + (f"; closest tables: {', '.join(hint)}." if hint else "."))
    ids = index.column_ids(tables, columns)
    if ids is not None and not ids:
        names = [qualified(t, c, index.case_sensitive) for t, c in index.columns.values()
                 if not tables or t.lower() in {x.lower() for x in tables}]
        hint = closest(columns[0] if columns else "", names) if columns else []
        raise ToolError(f"No indexed text column matches column={columns!r}"
                        + (f" in table(s) {tables!r}" if tables else "")
                        + (f"; closest: {', '.join(hint)}." if hint else "."))
    return ids


def format_cells(query: str, cells: list[Cell], case_sensitive: bool = False) -> str:
    header = f"{sql_literal(query)}:"
    if not cells:
        return f"{header} no matching cell (only text cells are indexed; use ExecuteSQL for numbers and dates)."
    lines = [header]
    divider_shown = False
    if cells[0].tier > 0:
        lines.append("no exact match; closest cells:")
        divider_shown = True
    for cell in cells:
        if not divider_shown and cell.tier > 0:
            lines.append("close matches:")
            divider_shown = True
        lines.append(f"{qualified(cell.table, cell.column, case_sensitive)} = {sql_literal(cell.value)}")
    return "\n".join(lines)


@dataclass(frozen=True)
class ValueMatches:
    """Each non-blank value asked for, with its cells best first."""

    cells: tuple[tuple[str, list[Cell]], ...]
    case_sensitive: bool


def find_values(index: ValueIndex, query: object, table: object = None, column: object = None, *,
                limit: int = DEFAULT_LIMIT) -> ToolOutput:
    values = str_list(query, "query")
    if not any(v.strip() for v in values):
        raise ToolError('SearchValue needs the value to look for, e.g. SearchValue("France").')
    ids = _filters(index, table, column)
    found = tuple((v, index.search(v, limit=limit, col_ids=ids)) for v in values if v.strip())
    return ToolOutput(ValueMatches(found, index.case_sensitive))


AUTHORS_HITS = 50  # rows their search engine returned per value, before the table/column filters
AUTHORS_TOP = 5
_AUTHORS_TEXT_TYPES = ("varchar", "text", "char")  # the declared types whose cells they indexed


@dataclass(frozen=True)
class AuthorsValues:
    """The paper profile's SearchValue: per value, up to five ``{contents, table, column}`` records, one per
    row holding the cell (their index had a document per row); or their error text."""

    records: tuple[tuple[str, list[dict[str, str]]], ...]
    error: str | None = None


def find_values_as_authors(index: ValueIndex, schema: SchemaInfo, query: object, table: object = None,
                           column: object = None, *, database: str = "") -> ToolOutput:
    """SearchValue as the authors' tool answers: each value with its own table and column filter (matched
    exactly, lists as long as the values), the first 50 rows found filtered, five kept. The ranking is
    this index's (exact, folded, all words, close), not Elasticsearch's."""
    texts = {(t.name, c.name) for t in schema.tables for c in t.columns
             if any(k in (c.declared_type if c.declared_type is not None else c.type).lower()
                    for k in _AUTHORS_TEXT_TYPES)}
    if not texts:
        return ToolOutput(AuthorsValues((), f"Error. Tables in db `{database}` do not have text field."), ok=False)
    values = str_list(query, "query")
    tables = [None] * len(values) if table in (None, [], "") else _filter_list(table, "table")
    columns = [None] * len(values) if column in (None, [], "") else _filter_list(column, "column")
    if not len(values) == len(tables) == len(columns):
        return ToolOutput(AuthorsValues((), "Error. Length of query, table, column should be the same."), ok=False)
    found: dict[str, list[dict[str, str]]] = {}
    for value, t, c in zip(values, tables, columns, strict=True):
        rows: list[dict[str, str]] = []
        for cell in index.search(value, limit=AUTHORS_HITS):
            if (cell.table, cell.column) in texts:
                rows.extend([{"contents": cell.value, "table": cell.table, "column": cell.column}] * cell.count)
        rows = [r for r in rows[:AUTHORS_HITS] if (not t or r["table"] == t) and (not c or r["column"] == c)]
        found[value] = [dict(r) for r in rows[:AUTHORS_TOP]]
    return ToolOutput(AuthorsValues(tuple(found.items())))


def _filter_list(value: object, what: str) -> list[str | None]:
    """A filter per value, as the authors took them: a name, or a list whose None entries filter nothing
    (their BIRD exemplar writes ``column=[None, "name"]``)."""
    if isinstance(value, list | tuple):
        return [None if v is None else str_list(v, what)[0] for v in value]
    return list(str_list(value, what))


def observe(output: ToolOutput, profile: str = DEFAULT_PROFILE) -> str:
    if isinstance(output.data, AuthorsValues):
        found: AuthorsValues = output.data
        if found.error is not None:
            return found.error
        return str(found.records[0][1]) if len(found.records) == 1 else str(dict(found.records))
    found: ValueMatches = output.data
    return "\n".join(format_cells(v, cells, found.case_sensitive) for v, cells in found.cells)


def search_value(index: ValueIndex, query: object, table: object = None, column: object = None, *,
                 limit: int = DEFAULT_LIMIT) -> ToolResult:
    output = find_values(index, query, table, column, limit=limit)
    return ToolResult(observe(output), output.ok, 0.0)


def _execute(ctx: ToolContext, a: Mapping[str, Any]) -> ToolOutput:
    if ctx.profile == paper_profile.PAPER_PROFILE:
        return find_values_as_authors(ctx.indexes.values, ctx.indexes.schema, a["query"], a["table"], a["column"],
                                      database=ctx.database_name)
    return find_values(ctx.indexes.values, a["query"], a["table"], a["column"], limit=ctx.value_limit)


SPEC = ToolSpec(
    name="SearchValue",
    params=(Param("query", "str | list[str]", aliases=("value",)), Param("table", "str | None", None),
            Param("column", "str | None", None)),
    description=(
        "Full-text search over the text cells of the database. Returns the stored cell values that best match "
        "`query`, each with its table and column, as `table.column = value`. Give `table` and/or `column` to "
        "search only there. Use it whenever the question names an entity or a string (a person, a place, a "
        "category): the stored spelling often differs from the question's (case, abbreviations, trailing "
        "spaces), and the SQL must use the stored spelling exactly. Numeric and id columns are not indexed."
    ),
    guidance="If the question mentions a specific value or name, locate it with SearchValue to learn "
             "its exact spelling and which table and column hold it.",
    execute=_execute,
    observe=observe,
    fields=(FormField("value", "Value", "query", required=True, placeholder="e.g. Iron Maiden"),
            FormField("table", "Table (optional)", "table", suggest="tables", keyword=True),
            FormField("column", "Column (optional)", "column", suggest="columns", keyword=True)),
    profiles=(DEFAULT_PROFILE, paper_profile.PAPER_PROFILE),
)
