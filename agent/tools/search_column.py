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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import paper_profile
from .base import ToolResult
from .column_index import ColumnDoc, ColumnIndex
from .errors import ToolError, str_list
from .spec import DEFAULT_PROFILE, FormField, Param, ToolContext, ToolOutput, ToolSpec
from .text import qualified, split_name, sql_literal

DEFAULT_K = 5


@dataclass(frozen=True)
class ColumnMatches:
    """The phrases as asked (blank ones included) and the top columns of each non-blank phrase."""

    phrases: tuple[str, ...]
    hits: Mapping[str, list[tuple[ColumnDoc, float]]]
    case_sensitive: bool


def format_column(doc: ColumnDoc, case_sensitive: bool = False) -> str:
    head = f"- {qualified(doc.table, doc.column, case_sensitive)} {doc.type or 'ANY'}" + (" primary key" if doc.primary_key else "")
    parts = [head]
    words = doc.description or split_name(doc.column).lower()
    if doc.description or words != doc.column.lower():
        parts.append(words)
    if doc.statistics:
        parts.append(doc.statistics)
    return " | ".join(parts)


def find_columns(index: ColumnIndex, query: object, *, k: int = DEFAULT_K, ranking: str = "index") -> ToolOutput:
    phrases = str_list(query, "query")
    if not phrases or not any(p.strip() for p in phrases):
        raise ToolError('SearchColumn needs words describing a column, e.g. SearchColumn("singer age").')
    asked = [p for p in phrases if p.strip()]
    hits = dict(zip(asked, index.search_many(asked, k, ranking=ranking), strict=True))
    return ToolOutput(ColumnMatches(tuple(phrases), hits, index.case_sensitive))


def find_columns_as_authors(index: ColumnIndex, query: object, *, k: int = DEFAULT_K) -> ToolOutput:
    """The paper profile's SearchColumn: the authors' query and column texts and their exact-name widening
    (ColumnIndex.search_as_authors)."""
    phrases = str_list(query, "query")
    if not phrases or not any(p.strip() for p in phrases):
        raise ToolError('SearchColumn needs words describing a column, e.g. SearchColumn("singer age").')
    asked = [p for p in phrases if p.strip()]
    hits = dict(zip(asked, index.search_as_authors(asked, k), strict=True))
    return ToolOutput(ColumnMatches(tuple(phrases), hits, index.case_sensitive))


def observe(output: ToolOutput, profile: str = DEFAULT_PROFILE) -> str:
    if profile == paper_profile.PAPER_PROFILE:
        return paper_profile.search_column(output)
    found: ColumnMatches = output.data
    blocks = []
    for phrase in found.phrases:
        header = f"{sql_literal(phrase.strip())}:"
        if not phrase.strip():
            blocks.append(f"{header} (empty phrase skipped)")
            continue
        hits = found.hits[phrase]
        if not hits:
            blocks.append(f"{header} no column matches these words; try other words for the same meaning.")
            continue
        blocks.append("\n".join([header, *(format_column(doc, found.case_sensitive) for doc, _ in hits)]))
    return "\n".join(blocks)


def search_column(index: ColumnIndex, query: object, *, k: int = DEFAULT_K) -> ToolResult:
    output = find_columns(index, query, k=k)
    return ToolResult(observe(output), output.ok, 0.0)


def _execute(ctx: ToolContext, a: Mapping[str, Any]) -> ToolOutput:
    if ctx.profile == paper_profile.PAPER_PROFILE:
        return find_columns_as_authors(ctx.indexes.columns, a["query"], k=ctx.column_k)
    return find_columns(ctx.indexes.columns, a["query"], k=ctx.column_k,
                        ranking=getattr(ctx, "column_ranking", "index"))


SPEC = ToolSpec(
    name="SearchColumn",
    params=(Param("query", "str | list[str]", aliases=("semantic", "phrase")),),
    description=(
        "Finds the columns whose meaning is closest to each phrase, e.g. SearchColumn([\"student name\", "
        "\"date of birth\"]). For each column it returns the table, the column name, its type, its description "
        "when there is one, and statistics about its values: a few sample values for free text (look the "
        "exact value up with SearchValue), the list of values with their counts for categorical columns, "
        "and the minimum and maximum for numbers and dates."
    ),
    guidance="Locate the columns to select and to filter on with SearchColumn.",
    execute=_execute,
    observe=observe,
    fields=(FormField("phrases", "Phrases, one per line", "query", kind="lines", required=True, rows=2,
                      placeholder="artist name\nnumber of tracks"),),
    example='SearchColumn(["student name", "date of birth"])',
    example_rank=0,
    profiles=(DEFAULT_PROFILE, paper_profile.PAPER_PROFILE),
)
