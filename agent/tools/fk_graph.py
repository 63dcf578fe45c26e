"""The join graph behind FindShortestPath, built from the schema's foreign keys.

Nodes are columns plus one hub per table; a column hangs off its table's hub
(moving between two columns of one table takes two steps, without the c²
edges of a clique) and a foreign key joins the referencing and the
referenced column in one step. All edges count the same, so the search is a
breadth-first one (ten times faster than Dijkstra here); the shortest path is
the one crossing the fewest tables and keys. A composite key becomes one edge per column
pair, each carrying the whole key so the printed join condition is complete.
Foreign keys naming a missing table or column (Spider has a few) are dropped.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from agent.sql import SchemaInfo

from .text import loose_name, qualified

GRAPH_FILE = "graph.json"
_MAX_TIES = 64  # equal-length paths compared for the deterministic tie-break

Node = tuple[str, ...]  # ("t", table) or ("c", table, column)


@dataclass(frozen=True)
class JoinKey:
    """One foreign key in join order: ``left`` columns of ``left_table`` equal ``right`` columns."""

    left_table: str
    left: tuple[str, ...]
    right_table: str
    right: tuple[str, ...]

    def reversed(self) -> JoinKey:
        return JoinKey(self.right_table, self.right, self.left_table, self.left)

    def render(self, cs: bool = False) -> str:
        if len(self.left) == 1:
            return f"{qualified(self.left_table, self.left[0], cs)} = {qualified(self.right_table, self.right[0], cs)}"
        lhs = ", ".join(qualified(self.left_table, c, cs) for c in self.left)
        rhs = ", ".join(qualified(self.right_table, c, cs) for c in self.right)
        return f"({lhs}) = ({rhs})"


def graph_data(schema: SchemaInfo) -> dict[str, Any]:
    tables = {t.name: [c.name for c in t.columns] for t in schema.tables}
    keys = []
    for fk in schema.foreign_keys:
        src = schema.table(fk.table)
        dst = schema.table(fk.ref_table)
        if src is None or dst is None or len(fk.columns) != len(fk.ref_columns):
            continue
        cols = [src.column(c) for c in fk.columns]
        refs = [dst.column(c) for c in fk.ref_columns]
        if any(c is None for c in cols) or any(c is None for c in refs):
            continue
        keys.append({"table": src.name, "columns": [c.name for c in cols if c],
                     "ref_table": dst.name, "ref_columns": [c.name for c in refs if c]})
    # Every foreign-key column pair as the database lists it (PRAGMA foreign_key_list order, missing
    # tables and columns kept): the paper profile's graph is built from these, as the authors built theirs.
    rows = []
    for table in schema.tables:
        for fk in reversed(table.foreign_keys):  # declaration order back to SQLite's numbering
            rows.extend([table.name, fk.ref_table, a, b] for a, b in zip(fk.columns, fk.ref_columns, strict=False))
    return {"tables": tables, "keys": keys, "key_rows": rows, "case_sensitive": schema.engine != "sqlite"}


def write_graph(schema: SchemaInfo, directory: Path) -> dict[str, Any]:
    data = graph_data(schema)
    (directory / GRAPH_FILE).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return data


class JoinGraph:
    def __init__(self, data: dict[str, Any]) -> None:
        self.tables: dict[str, list[str]] = data["tables"]
        self.case_sensitive: bool = data.get("case_sensitive", False)
        g = nx.Graph()
        self.by_name: dict[str, Node] = {}
        for table, cols in self.tables.items():
            hub = ("t", table)
            g.add_node(hub)
            for col in cols:
                node = ("c", table, col)
                g.add_edge(hub, node)
                self.by_name.setdefault(loose_name(f"{table}.{col}"), node)
                self.by_name.setdefault(loose_name(qualified(table, col, True)), node)
        table_graph = nx.Graph()
        table_graph.add_nodes_from(self.tables)
        for key in data["keys"]:
            jk = JoinKey(key["table"], tuple(key["columns"]), key["ref_table"], tuple(key["ref_columns"]))
            table_graph.add_edge(jk.left_table, jk.right_table)
            for a, b in zip(jk.left, jk.right, strict=True):
                u, v = ("c", jk.left_table, a), ("c", jk.right_table, b)
                if u == v:
                    continue  # a column referencing itself joins nothing
                if g.has_edge(u, v) and "keys" in g.edges[u, v]:
                    g.edges[u, v]["keys"].append(jk)
                else:
                    g.add_edge(u, v, keys=[jk])
        self.graph = g
        self.component_tables = [sorted(c, key=str.lower) for c in nx.connected_components(table_graph)]
        self.components = {t: i for i, comp in enumerate(self.component_tables) for t in comp}
        self._key_rows: list[list[str]] = data.get("key_rows") or [
            [k["table"], k["ref_table"], a, b] for k in data["keys"]
            for a, b in zip(k["columns"], k["ref_columns"], strict=True)]
        self._authors: AuthorsGraph | None = None

    @classmethod
    def load(cls, directory: Path) -> JoinGraph:
        return cls(json.loads((directory / GRAPH_FILE).read_text(encoding="utf-8")))

    def resolve(self, name: str) -> Node | None:
        return self.by_name.get(loose_name(name))

    def shortest_path(self, start: Node, end: Node) -> str | None:
        """The path rendered as text, or None when the two columns are not connected."""
        if start == end:
            return self.name(start)
        try:
            paths = list(itertools.islice(nx.all_shortest_paths(self.graph, start, end), _MAX_TIES))
        except nx.NetworkXNoPath:
            return None
        return min(self.render(p) for p in paths)

    def render(self, path: Sequence[Node]) -> str:
        parts: list[str] = []
        prev: Node | None = None
        via_hub = False
        for node in path:
            if node[0] == "t":
                via_hub = True
                continue
            if prev is None:
                parts.append(self.name(node))
            elif via_hub:
                parts.append(" <-> " + self.name(node))
            else:
                key = min(self.graph.edges[prev, node]["keys"], key=lambda k: (k.left_table, k.left))
                # Orient the key the way the path walks: the column we come from on the left.
                forward = prev[1] == key.left_table and node[1] == key.right_table and any(
                    a == prev[2] and b == node[2] for a, b in zip(key.left, key.right, strict=True))
                oriented = key if forward else key.reversed()
                if len(oriented.left) == 1:
                    parts.append(" = " + self.name(node))
                else:
                    # Composite key: replace the lone column just printed by the full tuple condition.
                    parts[-1] = parts[-1][: len(parts[-1]) - len(self.name(prev))] + oriented.render(self.case_sensitive)
                    prev, via_hub = node, False
                    continue
            prev, via_hub = node, False
        return "".join(parts)

    def name(self, node: Node) -> str:
        return qualified(node[1], node[2], self.case_sensitive)

    def component_of(self, table: str) -> list[str]:
        return self.component_tables[self.components[table]]

    @property
    def authors(self) -> AuthorsGraph:
        if self._authors is None:
            self._authors = AuthorsGraph(self.tables, self._key_rows)
        return self._authors


class AuthorsGraph:
    """The paper authors' join graph (their tool/spider_search.py, rewritten): a node per table and per
    ``table.column``, an edge from each table to each of its columns and one from a table to the table
    each of its foreign-key column pairs references, in the order they read them; the shortest route is
    networkx's, so equal-length routes are settled as theirs are.

    One deliberate difference: a key's label reads ``table.column = ref_table.ref_column``, where their
    release swapped the two column names (``flights.AirportCode = airports.SourceAirport``).
    """

    def __init__(self, tables: dict[str, list[str]], key_rows: Sequence[Sequence[str]]) -> None:
        edges: list[tuple[str, str, str]] = []
        nodes: list[str] = list(tables)
        by_table: dict[str, list[Sequence[str]]] = {}
        for row in key_rows:
            by_table.setdefault(row[0], []).append(row)
        for table, cols in tables.items():
            for col in cols:
                nodes.append(f"{table}.{col}")
                edges.append((table, f"{table}.{col}", f"{table}.{col}"))
            for _, ref_table, col, ref_col in by_table.get(table, ()):
                edges.append((table, ref_table, f"{table}.{col} = {ref_table}.{ref_col}"))
        g = nx.MultiGraph()
        g.add_nodes_from(nodes)
        for u, v, label in edges:
            g.add_edge(u, v, label=label)
        self.labels: dict[tuple[str, str], str] = {}
        for u, v, data in g.edges(data=True):  # the last label read wins for parallel edges, as theirs
            self.labels[(u, v)] = self.labels[(v, u)] = data["label"]
        self.graph = g

    def has_node(self, name: str) -> bool:
        return name in self.graph

    def path(self, start: str, end: str) -> str | None:
        """The route as ``a.x <-> a.k = b.k <-> b.y`` (empty for a column to itself); None when unconnected."""
        try:
            nodes = nx.shortest_path(self.graph, source=start, target=end)
        except nx.NetworkXNoPath:
            return None
        return " <-> ".join(self.labels[(a, b)] for a, b in itertools.pairwise(nodes))
