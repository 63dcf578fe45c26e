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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import paper_profile
from .base import ToolResult
from .errors import ToolError, closest, str_list
from .fk_graph import JoinGraph, Node
from .spec import DEFAULT_PROFILE, FormField, Param, ToolContext, ToolOutput, ToolSpec
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


@dataclass(frozen=True)
class NoPath:
    """Two columns the foreign keys do not connect, with the tables each one does reach."""

    start: str
    end: str
    start_table: str
    end_table: str
    start_group: str
    end_group: str


def find_paths(graph: JoinGraph, start: object, end: object) -> ToolOutput:
    """One entry per (start, end) pair: the path as text, or a NoPath."""
    starts = [_resolve(graph, s) for s in str_list(start, "start")]
    ends = [_resolve(graph, e) for e in str_list(end, "end")]
    if not starts or not ends:
        raise ToolError('FindShortestPath needs start and end columns, e.g. FindShortestPath("a.x", "b.y").')
    found: list[str | NoPath] = []
    cs = graph.case_sensitive
    for s in dict.fromkeys(starts):
        for e in dict.fromkeys(ends):
            path = graph.shortest_path(s, e)
            found.append(path if path is not None else NoPath(
                graph.name(s), graph.name(e), ident(s[1], cs), ident(e[1], cs), _group(graph, s[1]),
                _group(graph, e[1])))
    return ToolOutput(tuple(found), ok=not any(isinstance(p, NoPath) for p in found))


@dataclass(frozen=True)
class AuthorsPaths:
    """The paper profile's answer: (start, end, path or error) per pair, starts and ends each sorted and
    deduplicated; ``single`` when one start and one end were asked (the path alone is shown)."""

    pairs: tuple[tuple[str, str, str], ...]
    single: bool


def find_paths_as_authors(graph: JoinGraph, start: object, end: object, *, database: str = "") -> ToolOutput:
    """FindShortestPath as the authors' tool answers: names matched exactly, every route from the start column
    through its table (so a join column still shows its own hop), their error wording."""
    starts = sorted(set(str_list(start, "start")))
    ends = sorted(set(str_list(end, "end")))
    authors = graph.authors
    pairs = []
    for s in starts:
        for e in ends:
            missing = next((n for n in (s, e) if not authors.has_node(n)), None)
            if missing is not None:
                # Theirs returns nothing for an unknown end column (the case is then dropped): both get this.
                pairs.append((s, e, f"Error. Node {missing} not found in {database}."))
                continue
            route = authors.path(s, e)
            pairs.append((s, e, route if route is not None else f"Error. No path between {s} and {e}."))
    ok = bool(pairs) and not any(p[2].startswith("Error. ") for p in pairs)
    return ToolOutput(AuthorsPaths(tuple(pairs), len(pairs) == 1), ok=ok)


def observe(output: ToolOutput, profile: str = DEFAULT_PROFILE) -> str:
    if isinstance(output.data, AuthorsPaths):
        found: AuthorsPaths = output.data
        return found.pairs[0][2] if found.single else str(list(found.pairs))
    lines = []
    for p in output.data:
        if isinstance(p, NoPath):
            lines.append(f"No join path from {p.start} to {p.end}: "
                         f"the foreign keys connect {p.start_table} only with [{p.start_group}] "
                         f"and {p.end_table} only with [{p.end_group}].")
        else:
            lines.append(p)
    return "\n".join(lines)


def find_shortest_path(graph: JoinGraph, start: object, end: object) -> ToolResult:
    output = find_paths(graph, start, end)
    return ToolResult(observe(output), output.ok, 0.0)


def _execute(ctx: ToolContext, a: Mapping[str, Any]) -> ToolOutput:
    if ctx.profile == paper_profile.PAPER_PROFILE:
        return find_paths_as_authors(ctx.indexes.graph, a["start"], a["end"],
                                     database=ctx.database_name)
    return find_paths(ctx.indexes.graph, a["start"], a["end"])


SPEC = ToolSpec(
    name="FindShortestPath",
    params=(Param("start", "str | list[str]"), Param("end", "str | list[str]")),
    description=(
        "Finds how to join the tables of two sets of columns. Columns are written `table.column`. The schema "
        "is a graph whose nodes are columns, linked within a table and across foreign keys; for each pair of "
        "start and end columns the tool returns the shortest path, e.g. "
        "`A.name <-> A.b_id = B.id <-> B.title`, where `A.b_id = B.id` is a join condition. Start and end "
        "are interchangeable. Use it to write the JOIN clauses instead of guessing them."
    ),
    guidance="Find how the tables of those columns join with FindShortestPath.",
    execute=_execute,
    observe=observe,
    fields=(FormField("start", "Start column", "start", required=True, suggest="qualified", keyword=True,
                      placeholder="Table.column"),
            FormField("end", "End column", "end", required=True, suggest="qualified", keyword=True,
                      placeholder="Table.column")),
    when_disabled="Join tables on the foreign keys listed in the schema; check join columns with "
                  "SearchColumn when a link is not listed.",
    profiles=(DEFAULT_PROFILE, paper_profile.PAPER_PROFILE),
)
