"""The ``paper`` observation profile: tool outputs in the format of the paper authors' released tools.

Their tools answered with Python reprs, and their exemplars carry those reprs; with this profile live
observations look like the exemplars' (our own code, written from the format of their outputs):

- ExecuteSQL: ``str(sorted(set(rows)))`` cut at 200 characters (``...`` after), e.g. ``[('Adele',), ('Sting',)]``;
  the whole result is read for it (up to 1,000,000 rows); a failing query gives the database's message as
  is, and rows Python cannot sort (NULL next to a value) give its TypeError message, as theirs.
- SearchValue: ``[{'contents': ..., 'table': ..., 'column': ...}, ...]`` for one value, a dict of such lists
  keyed by value for several: five records, one per row holding the cell, as their index had a document per
  row (agent.tools.search_value.find_values_as_authors); the ranking is ours, not Elasticsearch's.
- SearchColumn: per-column records ``{'column', 'format', 'table'[, 'column_description'], 'statistics'}``,
  a list for one phrase, a dict keyed by phrase for several; the statistics in their wording (their
  preprocess/spider_step1_cols_info.py and tool/spider_search.py), by declared type: text columns with at
  most 50 distinct values and no sentence are ``categorical field. [every value]`` (cut at 400
  characters), other text ``text filed. e.g. v1, v2 ...`` (their spelling), integers ``min: a, max: b.
  distinct count: n``, reals and dates ``min: a, max: b``, booleans ``distinct count: {value: count}``,
  an empty column ``empty column.``; other statistics cut at 200 characters. Values are listed in the
  order the rows hold them, as theirs; a text example is five sampled values (theirs: a set, in no stable
  order). The query and column texts and the exact-name widening: agent.tools.column_index.search_as_authors.
- FindShortestPath: the path alone for one pair, else ``[(start, end, path), ...]`` with starts and ends
  sorted, over the authors' graph (agent.tools.fk_graph.AuthorsGraph; key labels right, their release
  swapped them), and their errors ``Error. No path between a and b.`` / ``Error. Node x not found in db.``

No Django here.
"""

from __future__ import annotations

from typing import Any

from agent.sql import ColumnStats

from .spec import ToolOutput

PAPER_PROFILE = "paper"
MAX_EXECUTE_CHARS = 200
MAX_CATEGORICAL_CHARS = 400
MAX_STATISTICS_CHARS = 200
_MIN_MAX_TYPES = ("REAL", "NUMERIC", "DECIMAL", "NUMBER", "DOUBLE", "FLOAT", "DATE", "TIME", "YEAR")


def execute_sql(output: ToolOutput) -> str:
    found = output.data  # agent.tools.execute_sql.QueryOutcome
    if found.result is None:
        return str(found.error)
    try:
        text = str(sorted({tuple(r) for r in found.result.rows}))
    except TypeError as exc:  # NULLs next to numbers: their sort failed and they showed Python's message
        return str(exc)
    return text[:MAX_EXECUTE_CHARS] + "..." if len(text) > MAX_EXECUTE_CHARS else text


def _omit(text: str, limit: int) -> str:
    return text[:limit] + f"...(Omit {len(text) - limit} chars)" if len(text) > limit else text


def _range(stats: ColumnStats) -> tuple[str, str] | None:
    if stats.min is not None and stats.max is not None:
        return stats.min, stats.max
    if not stats.values:
        return None
    try:  # a low-cardinality number column keeps its values, not a range: every value is there
        ordered = sorted(stats.values, key=lambda vn: float(vn[0]))
    except ValueError:
        ordered = sorted(stats.values)
    return ordered[0][0], ordered[-1][0]


def authors_statistics(declared_type: str, stats: ColumnStats | None) -> str:
    """SearchColumn's statistics text as the paper authors' tools wrote it ("" where they wrote none)."""
    if stats is None:
        return ""
    t = (declared_type or "").upper()
    if stats.kind == "empty":
        if not stats.null_count or t == "TEXT" or "CHAR" in t or "VAR" in t:
            return "empty column."  # an empty table, or no value to list
        if any(x in t for x in ("INTEGER", "INT", "ID")):
            return "dirty data, column value is none."
        if "BOOL" in t and not any(x in t for x in _MIN_MAX_TYPES):
            return f"distinct count: {{None: {stats.null_count}}}"  # their GROUP BY counts the NULLs
        return ""  # their min/max found nothing and they wrote no statistics
    if t == "TEXT" or "CHAR" in t or "VAR" in t:
        if stats.listing:
            return _omit(f"categorical field. {list(stats.listing)}", MAX_CATEGORICAL_CHARS)
        examples = stats.samples or tuple(v for v, _ in stats.values)
        return _omit("text filed. e.g. " + ", ".join(examples)[:100] + " ...", MAX_STATISTICS_CHARS)
    bounds = _range(stats)
    if any(x in t for x in ("INTEGER", "INT", "ID")):
        if bounds is None:
            return "dirty data, column value is none."
        return _omit(f"min: {bounds[0]}, max: {bounds[1]}. distinct count: {stats.distinct_count}",
                     MAX_STATISTICS_CHARS)
    if any(x in t for x in _MIN_MAX_TYPES):
        return _omit(f"min: {bounds[0]}, max: {bounds[1]}", MAX_STATISTICS_CHARS) if bounds else ""
    if "BOOL" in t:
        return _omit(f"distinct count: {_grouped(stats)}", MAX_STATISTICS_CHARS) if stats.values else ""
    return ""


def _sql_value(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _grouped(stats: ColumnStats) -> dict[Any, int]:
    """Value counts as their ``GROUP BY`` read them: NULL first, then numbers, then text, each ascending."""
    values = sorted(((_sql_value(v), n) for v, n in stats.values),
                    key=lambda vn: (isinstance(vn[0], str), vn[0] if not isinstance(vn[0], str) else 0,
                                    vn[0] if isinstance(vn[0], str) else ""))
    counts: dict[Any, int] = {None: stats.null_count} if stats.null_count else {}
    counts.update(values)
    return counts


def search_column(output: ToolOutput) -> str:
    """Their records, keyed by the phrase as they looked it up (stripped, lower case); one phrase: its list."""
    found = output.data
    items: dict[str, list[dict[str, str]]] = {}
    for phrase in found.phrases:
        if not phrase.strip():
            continue
        records = []
        for doc, _ in found.hits[phrase]:
            declared = doc.declared_type if doc.declared_type is not None else doc.type
            record: dict[str, str] = {"column": doc.column, "format": declared, "table": doc.table}
            if doc.description:
                record["column_description"] = doc.description
            # Indexes built before the authors' wording was stored keep our text.
            statistics = doc.paper_statistics if doc.paper_statistics is not None else doc.statistics
            if statistics:
                record["statistics"] = statistics
            records.append(record)
        items[phrase.strip().lower()] = records
    if not items:
        return "[]"
    return str(next(iter(items.values()))) if len(items) == 1 else str(items)
