"""Per-column statistics, computed with plain SQL through a connector's internal runner.

The classification follows the paper's SearchColumn: numeric and date columns
report min/max, low-cardinality columns their enumeration with counts, and
free text a few sampled values cut to 100 characters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .base import ColumnStats, ResultTooLarge, SQLError

ENUM_MAX_DISTINCT = 12
# The paper authors' rule for listing a text column in full: at most 50 distinct values, none with more
# than 8 spaces (a sentence makes it free text). Their preprocess/spider_step1_cols_info.py.
LISTING_MAX_DISTINCT = 50
LISTING_MAX_SPACES = 8
LISTING_VALUE_CHARS = 10_000  # a listed value is kept whole up to here (the listing is cut at 400 when shown)
SAMPLE_VALUES = 5
SAMPLE_CHARS = 100
STATS_ROW_CAP = 200_000  # larger tables are summarised from their first rows

_NUMERIC_HINTS = ("int", "real", "floa", "doub", "num", "dec", "money", "serial", "bit")
_DATE_HINTS = ("date", "time", "year")

Runner = Callable[[str], Sequence[tuple[Any, ...]]]


def type_kind(declared: str) -> str:
    t = declared.lower()
    if any(h in t for h in _DATE_HINTS):
        return "date"
    if any(h in t for h in _NUMERIC_HINTS):
        return "numeric"
    if "bool" in t:
        return "enum"
    return "text"


def cut(value: Any, limit: int = SAMPLE_CHARS) -> str:
    # Whitespace stays as stored: 'United States ' is not 'United States' to the query that filters on it.
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def column_stats(
    run: Runner, quoted_table: str, quoted_column: str, declared_type: str, row_count: int | None
) -> ColumnStats:
    """Compute statistics for one column; ``run`` executes trusted internal SQL."""
    source = quoted_table
    sampled = None
    if row_count is not None and row_count > STATS_ROW_CAP:
        source = f"(SELECT {quoted_column} FROM {quoted_table} LIMIT {STATS_ROW_CAP}) AS s"
        sampled = STATS_ROW_CAP
    col = quoted_column
    try:
        (distinct, non_null, total) = run(f"SELECT COUNT(DISTINCT {col}), COUNT({col}), COUNT(*) FROM {source}")[0]
    except ResultTooLarge:
        return _counts_only(run, col, source, declared_type, sampled)
    except SQLError:
        return ColumnStats(kind="empty", distinct_count=0, null_count=0, sampled_rows=sampled)
    distinct, non_null, total = int(distinct or 0), int(non_null or 0), int(total or 0)
    nulls = total - non_null
    if non_null == 0:
        return ColumnStats(kind="empty", distinct_count=0, null_count=nulls, sampled_rows=sampled)
    kind = type_kind(declared_type)
    try:
        stats = _detail(run, col, source, kind, distinct, nulls, non_null, sampled)
        if kind == "text" and distinct <= LISTING_MAX_DISTINCT:
            stats = replace(stats, listing=_listing(run, col, source))
        return stats
    except SQLError:
        # e.g. a cell past the connector's value size limit: keep the counts, skip the samples
        return ColumnStats(kind=kind if kind != "enum" else "text", distinct_count=distinct, null_count=nulls,
                           sampled_rows=sampled)


def _counts_only(run: Runner, col: str, source: str, declared_type: str, sampled: int | None) -> ColumnStats:
    """A column holding a value past the runner's size limit (a hostile upload's 200 MB cell): counts from
    ``IS NULL``, which SQLite answers from the row's header without loading the value; the distinct count is
    the non-null count (an upper bound) and no value is shown."""
    try:
        total = int(run(f"SELECT COUNT(*) FROM {source}")[0][0] or 0)
        nulls = int(run(f"SELECT COUNT(*) FROM {source} WHERE {col} IS NULL")[0][0] or 0)
    except SQLError:
        return ColumnStats(kind="empty", distinct_count=0, null_count=0, sampled_rows=sampled)
    kind = type_kind(declared_type)
    return ColumnStats(kind=kind if kind in ("numeric", "date") else "text", distinct_count=total - nulls,
                       null_count=nulls, sampled_rows=sampled)


def _listing(run: Runner, col: str, source: str) -> tuple[str, ...]:
    # In the order the rows first hold them (the authors read the column row by row into a dict).
    rows = run(f"SELECT v FROM (SELECT {col} AS v, ROW_NUMBER() OVER () AS rn FROM {source}) AS r "
               f"WHERE v IS NOT NULL GROUP BY v ORDER BY MIN(rn) LIMIT {LISTING_MAX_DISTINCT + 1}")
    values = [v if isinstance(v, str) else str(v) for (v,) in rows]
    if len(values) > LISTING_MAX_DISTINCT or any(v.strip().count(" ") > LISTING_MAX_SPACES for v in values):
        return ()
    return tuple(cut(v, LISTING_VALUE_CHARS) for v in values)


def _detail(run: Runner, col: str, source: str, kind: str, distinct: int, nulls: int, non_null: int,
            sampled: int | None) -> ColumnStats:
    repeats = distinct * 2 <= non_null  # an enumeration only if values recur
    if kind in ("numeric", "date") and (distinct > ENUM_MAX_DISTINCT or not repeats):
        lo, hi = run(f"SELECT MIN({col}), MAX({col}) FROM {source}")[0]
        return ColumnStats(kind=kind, distinct_count=distinct, null_count=nulls, min=cut(lo), max=cut(hi),
                           sampled_rows=sampled)
    if distinct <= ENUM_MAX_DISTINCT and (repeats or kind == "enum"):
        rows = run(
            f"SELECT {col}, COUNT(*) FROM {source} WHERE {col} IS NOT NULL "
            f"GROUP BY {col} ORDER BY COUNT(*) DESC, {col} LIMIT {ENUM_MAX_DISTINCT}"
        )
        return ColumnStats(kind="enum", distinct_count=distinct, null_count=nulls,
                           values=tuple((cut(v), int(n)) for v, n in rows), sampled_rows=sampled)
    rows = run(f"SELECT DISTINCT {col} FROM {source} WHERE {col} IS NOT NULL LIMIT {SAMPLE_VALUES}")
    return ColumnStats(kind="text", distinct_count=distinct, null_count=nulls,
                       samples=tuple(cut(r[0]) for r in rows), sampled_rows=sampled)
