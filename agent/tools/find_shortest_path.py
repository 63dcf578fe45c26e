"""FindShortestPath(start, end): the shortest join path between columns over the foreign keys.

Observation: one line per (start, end) pair; ``<->`` moves within one table
(same row), ``=`` is a join condition written the way the path walks (the
column we come from on the left; composite keys as row values). Ties are
broken by the alphabetically first rendering, so the answer is stable::

    author.name <-> author.oid = organization.oid <-> organization.name

An unknown column gets the closest existing names; unconnected tables get
the groups of tables the foreign keys do connect.
"""

from __future__ import annotations

from .base import ToolResult
from .errors import ToolError, closest, str_list
from .fk_graph import JoinGraph, Node
from .text import ident, loose_name, qualified

_GROUP_SHOWN = 8


def _resolve(graph: JoinGraph, name: str) -> Node:
    node = graph.resolve(name)
    if node is not None:
        return node
    names = [qualified(t, c, graph.case_sensitive) for t, cols in graph.tables.items() for c in cols]
    table_names = {loose_name(t): t for t in graph.tables}
    if loose_name(name) in table_names:
        table = table_names[loose_name(name)]
        some = ", ".join(qualified(table, c, graph.case_sensitive) for c in graph.tables[table][:3])
        raise ToolError(f"{name!r} is a table; give a column as table.column, e.g. {some}.")
    hint = closest(name, names)
    raise ToolError(f"Unknown column {name!r}" + (f"; closest: {', '.join(hint)}." if hint else
                                                  "; use table.column."))


def _group(graph: JoinGraph, table: str) -> str:
    tables = graph.component_of(table)
    shown = ", ".join(ident(t, graph.case_sensitive) for t in tables[:_GROUP_SHOWN])
    return shown + (f" and {len(tables) - _GROUP_SHOWN} more" if len(tables) > _GROUP_SHOWN else "")


def find_shortest_path(graph: JoinGraph, start: object, end: object) -> ToolResult:
    starts = [_resolve(graph, s) for s in str_list(start, "start")]
    ends = [_resolve(graph, e) for e in str_list(end, "end")]
    if not starts or not ends:
        raise ToolError('FindShortestPath needs start and end columns, e.g. FindShortestPath("a.x", "b.y").')
    lines = []
    ok = True
    for s in dict.fromkeys(starts):
        for e in dict.fromkeys(ends):
            path = graph.shortest_path(s, e)
            if path is not None:
                lines.append(path)
                continue
            ok = False
            cs = graph.case_sensitive
            lines.append(f"No join path from {graph.name(s)} to {graph.name(e)}: "
                         f"the foreign keys connect {ident(s[1], cs)} only with [{_group(graph, s[1])}] "
                         f"and {ident(e[1], cs)} only with [{_group(graph, e[1])}].")
    return ToolResult("\n".join(lines), ok, 0.0)
