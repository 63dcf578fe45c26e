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
    return {"tables": tables, "keys": keys, "case_sensitive": schema.engine != "sqlite"}


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
