"""SearchColumn(query): the columns whose meaning is closest to each phrase.

Observation: one block per phrase, its top-k columns best first, each as
``table.column TYPE [primary key] | description | statistics`` (the
description part only when one was given or the split name differs from the
name; statistics from ColumnStats.describe())::

    'singer country':
    - singer.Country TEXT | enumeration: 'United States' (3), 'Netherlands' (1)
    - singer.Singer_ID INT primary key | singer id | numeric range: 1 .. 6; distinct count: 6
"""

from __future__ import annotations

from .base import ToolResult
from .column_index import ColumnDoc, ColumnIndex
from .errors import ToolError, str_list
from .text import qualified, split_name, sql_literal

DEFAULT_K = 5


def format_column(doc: ColumnDoc, case_sensitive: bool = False) -> str:
    head = f"- {qualified(doc.table, doc.column, case_sensitive)} {doc.type or 'ANY'}" + (" primary key" if doc.primary_key else "")
    parts = [head]
    words = doc.description or split_name(doc.column).lower()
    if doc.description or words != doc.column.lower():
        parts.append(words)
    if doc.statistics:
        parts.append(doc.statistics)
    return " | ".join(parts)


def search_column(index: ColumnIndex, query: object, *, k: int = DEFAULT_K) -> ToolResult:
    phrases = str_list(query, "query")
    if not phrases or not any(p.strip() for p in phrases):
        raise ToolError('SearchColumn needs words describing a column, e.g. SearchColumn("singer age").')
    blocks = []
    asked = [p for p in phrases if p.strip()]
    results = dict(zip(asked, index.search_many(asked, k), strict=True))
    for phrase in phrases:
        header = f"{sql_literal(phrase.strip())}:"
        if not phrase.strip():
            blocks.append(f"{header} (empty phrase skipped)")
            continue
        hits = results[phrase]
        if not hits:
            blocks.append(f"{header} no column matches these words; try other words for the same meaning.")
            continue
        blocks.append("\n".join([header, *(format_column(doc, index.case_sensitive) for doc, _ in hits)]))
    return ToolResult("\n".join(blocks), True, 0.0)
