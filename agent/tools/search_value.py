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

from .base import ToolResult
from .errors import ToolError, closest, str_list
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


def search_value(index: ValueIndex, query: object, table: object = None, column: object = None, *,
                 limit: int = DEFAULT_LIMIT) -> ToolResult:
    values = str_list(query, "query")
    if not any(v.strip() for v in values):
        raise ToolError('SearchValue needs the value to look for, e.g. SearchValue("France").')
    ids = _filters(index, table, column)
    blocks = [format_cells(v, index.search(v, limit=limit, col_ids=ids), index.case_sensitive)
              for v in values if v.strip()]
    return ToolResult("\n".join(blocks), True, 0.0)
