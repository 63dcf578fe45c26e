"""The ``paper`` observation profile: tool outputs in the format of the paper authors' released tools.

Their tools answered with Python reprs, and their exemplars carry those reprs; with this profile live
observations look like the exemplars' (our own code, written from the format of their outputs):

- ExecuteSQL: ``str(sorted(set(rows)))`` cut at 200 characters (``...`` after), e.g. ``[('Adele',), ('Sting',)]``;
  a failing query gives the database's message as is.
- SearchValue: ``[{'contents': ..., 'table': ..., 'column': ...}, ...]`` for one value, a dict of such lists
  keyed by value for several.
- SearchColumn: per-column records ``{'column', 'format', 'table'[, 'column_description'], 'statistics'}``,
  a list for one phrase, a dict keyed by phrase for several. The statistics text is ours (their wording
  differs: "categorical field. [...]", "text filed. e.g. ..."): a known difference.
- FindShortestPath: ``[(start, end, path), ...]`` with the path in ``A.x <-> A.k = B.k <-> B.y`` form and the
  key labels right (their release swapped them).

No Django here.
"""

from __future__ import annotations

from typing import Any

from .spec import ToolOutput

PAPER_PROFILE = "paper"
MAX_EXECUTE_CHARS = 200


def execute_sql(output: ToolOutput) -> str:
    found = output.data  # agent.tools.execute_sql.QueryOutcome
    if found.result is None:
        return str(found.error)
    rows = {tuple(r) for r in found.result.rows}
    try:
        ordered = sorted(rows)
    except TypeError:  # NULLs next to numbers: order by their text so the output stays deterministic
        ordered = sorted(rows, key=repr)
    text = str(ordered)
    return text[:MAX_EXECUTE_CHARS] + "..." if len(text) > MAX_EXECUTE_CHARS else text


def _keyed(items: list[tuple[str, Any]]) -> str:
    if len(items) == 1:
        return str(items[0][1])
    return str(dict(items))


def search_value(output: ToolOutput) -> str:
    return _keyed([(value, [{"contents": c.value, "table": c.table, "column": c.column} for c in cells])
                   for value, cells in output.data.cells])


def search_column(output: ToolOutput) -> str:
    found = output.data
    items = []
    for phrase in found.phrases:
        if not phrase.strip():
            continue
        records = []
        for doc, _ in found.hits[phrase]:
            record: dict[str, str] = {"column": doc.column, "format": doc.type or "ANY", "table": doc.table}
            if doc.description:
                record["column_description"] = doc.description
            if doc.statistics:
                record["statistics"] = doc.statistics
            records.append(record)
        items.append((phrase, records))
    return _keyed(items) if items else "[]"


def find_shortest_path(output: ToolOutput, no_path: Any) -> str:
    triples: list[tuple[str, str, str]] = []
    for p in output.data:
        if isinstance(p, no_path):
            triples.append((p.start, p.end, f"no join path between {p.start} and {p.end}"))
        else:
            parts = p.split(" <-> ")
            triples.append((parts[0], parts[-1], p))
    return str(triples)
