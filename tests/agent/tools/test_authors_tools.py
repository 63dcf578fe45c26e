"""The paper profile's FindShortestPath and SearchColumn against the authors' tool logic on Spider dev.

The reference functions below are rewritten from the authors' tool/spider_search.py and
preprocess/spider_step1_cols_info.py / spider_step4_vectorization.py (read from their code, not copied)
and read each Spider dev database file directly. Where the replica deliberately departs (README, "Where the
paper replica departs from the authors' code"), the reference applies the same departure and says so.
"""

from __future__ import annotations

import ast
import itertools
import sqlite3
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

from agent.sql import connect
from agent.tools import ToolBox, build_indexes, clear_cache
from agent.tools.embeddings import make_embedder
from tests.conftest import SPIDER_DIR

pytestmark = pytest.mark.shared_data

DATABASES = ("flight_2", "concert_singer", "student_transcripts_tracking", "dog_kennels")


def _sqlite(db_id: str) -> Path:
    return SPIDER_DIR / "database" / db_id / f"{db_id}.sqlite"


def _tables(cur: sqlite3.Cursor) -> list[str]:
    return [r[0] for r in cur.execute("SELECT name FROM sqlite_master WHERE type='table'")
            if r[0] != "sqlite_sequence"]


# --- FindShortestPath, as the authors' GraphSearcher --------------------------------------------------


class AuthorsPathFinder:
    def __init__(self, db_id: str) -> None:
        self.db = db_id
        cur = sqlite3.connect(_sqlite(db_id)).cursor()
        tables = _tables(cur)
        nodes, edges = list(tables), []
        for table in tables:
            for col in [c[1] for c in cur.execute(f"PRAGMA table_info(`{table}`)").fetchall()]:
                nodes.append(f"{table}.{col}")
                edges.append((table, f"{table}.{col}", f"Col: {table}.{col}"))
            for fk in cur.execute(f"PRAGMA foreign_key_list(`{table}`)").fetchall():
                # Their release labels f"{table}.{fk[4]} = {fk[2]}.{fk[3]}" (the two columns swapped); the
                # replica prints the key the right way round (a listed departure), and so does this reference.
                edges.append((table, fk[2], f"FK: {table}.{fk[3]} = {fk[2]}.{fk[4]}"))
        self.g = nx.MultiGraph()
        self.g.add_nodes_from(nodes)
        for u, v, label in edges:
            self.g.add_edge(u, v, label=label)
        self.pair = {}
        for u, v, data in self.g.edges(data=True):
            self.pair[(u, v)] = self.pair[(v, u)] = data["label"]

    def one(self, start: str, end: str) -> str:
        if start not in self.g.nodes:
            return f"Error. Node {start} not found in {self.db}."
        try:
            path = nx.shortest_path(self.g, source=start, target=end)
        except nx.NetworkXNoPath:
            return f"Error. No path between {start} and {end}."
        text = " <-> ".join(self.pair[p] for p in zip(path, path[1:], strict=False))
        return text.replace("Col: ", "").replace("FK: ", "")

    def __call__(self, start: str | list[str], end: str | list[str]) -> str:
        starts = sorted(set([start] if isinstance(start, str) else start))
        ends = sorted(set([end] if isinstance(end, str) else end))
        res = [(s, e, self.one(s, e)) for s in starts for e in ends]
        return str(res[0][2] if len(res) == 1 else res).strip()


@pytest.fixture(scope="module")
def paper_tools(tmp_path_factory) -> Iterator[dict[str, ToolBox]]:
    boxes = {}
    for db_id in DATABASES:
        connector = connect("sqlite", str(_sqlite(db_id)))
        index_dir = tmp_path_factory.mktemp(db_id)
        build_indexes(connector, index_dir, column_backend="minilm")
        boxes[db_id] = ToolBox(connector, index_dir, profile="paper", database_name=db_id)
    yield boxes
    for box in boxes.values():
        box.close()
    clear_cache()


def _columns(db_id: str) -> list[str]:
    cur = sqlite3.connect(_sqlite(db_id)).cursor()
    return [f"{t}.{c[1]}" for t in _tables(cur) for c in cur.execute(f"PRAGMA table_info(`{t}`)").fetchall()]


@pytest.mark.parametrize("db_id", DATABASES)
def test_find_shortest_path_matches_the_authors_for_every_column_pair(paper_tools, db_id: str) -> None:
    theirs = AuthorsPathFinder(db_id)
    tools = paper_tools[db_id]
    columns = _columns(db_id)
    differing = [(s, e) for s, e in itertools.product(columns, columns)
                 if tools.run("FindShortestPath", [s, e]).observation != theirs(s, e)]
    assert differing == []


@pytest.mark.parametrize("db_id", DATABASES)
def test_find_shortest_path_lists_match_the_authors(paper_tools, db_id: str) -> None:
    theirs = AuthorsPathFinder(db_id)
    columns = _columns(db_id)
    starts, ends = list(reversed(columns[::3])), columns[1::4] + columns[1::4]
    assert paper_tools[db_id].run("FindShortestPath", [starts, ends]).observation == theirs(starts, ends)


def test_find_shortest_path_errors_in_the_authors_words(paper_tools) -> None:
    tools = paper_tools["flight_2"]
    unknown = tools.run("FindShortestPath", ["airlines.nope", "airports.City"])
    assert unknown.observation == "Error. Node airlines.nope not found in flight_2."
    assert not unknown.ok
    theirs = AuthorsPathFinder("concert_singer")
    for s, e in [("stadium.Name", "singer.Name"), ("singer.Name", "singer.Name")]:
        assert paper_tools["concert_singer"].run("FindShortestPath", [s, e]).observation == theirs(s, e)


# --- SearchColumn, as the authors' create_column_searcher over their column statistics ---------------


def _authors_statistics(cur: sqlite3.Cursor, table: str, col: str, data_format: str) -> str | None:
    """Their preprocess/spider_step1_cols_info.py, then tool/spider_search.py's cut (None: no statistics)."""
    if cur.execute(f"SELECT COUNT(*) FROM `{table}`").fetchone()[0] == 0:
        return "empty column."
    t = data_format.upper()
    stat: object = None
    if t == "TEXT" or "CHAR" in t or "VAR" in t:
        counts: dict[str, int] = defaultdict(int)
        unique: set[str] = set()
        free = False
        for (value,) in cur.execute(f"SELECT `{col}` FROM `{table}`").fetchall():
            if value is None:
                continue
            if value.strip().count(" ") > 8:
                free = True
            elif not free:
                counts[value] += 1
            unique.add(value)
            if len(unique) > 50:
                free = True
                break
        # Their examples are a set joined in hash order, so only the wording is compared.
        stat = "text filed. e.g. " if free else (dict(counts) if counts else "empty column.")
    elif any(x in t for x in ("INTEGER", "INT", "ID")):
        lo, hi, n = cur.execute(f"SELECT MIN(`{col}`), MAX(`{col}`), COUNT(DISTINCT `{col}`) FROM `{table}`").fetchone()
        stat = f"min: {lo}, max: {hi}. distinct count: {n}" if lo is not None and hi is not None else \
            "dirty data, column value is none."
    elif any(x in t for x in ("REAL", "NUMERIC", "DECIMAL", "NUMBER", "DOUBLE", "FLOAT", "DATE", "TIME", "YEAR")):
        lo, hi = cur.execute(f"SELECT MIN(`{col}`), MAX(`{col}`) FROM `{table}`").fetchone()
        if lo is not None and hi is not None and (lo and hi if "DATE" in t or "TIME" in t or "YEAR" in t else True):
            stat = f"min: {lo}, max: {hi}"
    elif "BOOL" in t:
        counts = dict(cur.execute(f"SELECT `{col}`, COUNT(*) FROM `{table}` GROUP BY `{col}`").fetchall())
        stat = f"distinct count: {counts}" if counts else "empty column."
    if stat is None:
        return None
    text = str(stat)
    if isinstance(stat, dict):
        text = f"categorical field. {list(stat.keys())}"
        return text[:400] + f"...(Omit {len(text) - 400} chars)" if len(text) > 400 else text
    return text[:200] + f"...(Omit {len(text) - 200} chars)" if len(text) > 200 else text


class AuthorsColumnSearcher:
    def __init__(self, db_id: str, embedder) -> None:
        cur = sqlite3.connect(_sqlite(db_id)).cursor()
        cur.connection.text_factory = lambda b: b.decode(errors="ignore")
        self.cols = []
        for table in _tables(cur):
            for _cid, name, data_format, *_ in cur.execute(f"PRAGMA table_info(`{table}`)").fetchall():
                record = {"column": name, "format": data_format, "table": table}
                stat = _authors_statistics(cur, table, name, data_format)
                if stat is not None:
                    record["statistics"] = stat
                self.cols.append(record)
        texts = [f"a column named {c['column'].replace('_', ' ').lower()} in {c['table'].replace('_', ' ').lower()}."
                 for c in self.cols]
        self.embedder = embedder
        self.vectors = embedder.embed(texts)

    def __call__(self, query: str | list[str], topk: int = 5) -> str:
        queries = query if isinstance(query, list) else [query]
        results = {}
        for q in queries:
            q = q.strip().lower()
            vec = self.embedder.embed([f"a column about {q}."])[0]
            dist = 2.0 - 2.0 * (self.vectors @ vec)
            nearest = sorted(range(len(self.cols)), key=lambda i: dist[i])[:max(10, topk)]
            found = []
            for i in nearest:
                d = 0.0 if q == self.cols[i]["column"].lower() else float(dist[i])
                found.append((d, dict(self.cols[i])))
            found.sort(key=lambda x: x[0])
            k = max(topk, sum(1 for d, _ in found if d == 0.0))
            results[q] = [r for _, r in found[:k]]
        out = results[queries[0].lower()] if len(results) == 1 else results
        return str(out)


def _comparable(observation: str) -> object:
    def clean(records):
        for r in records:
            if r.get("statistics", "").startswith("text filed. e.g. "):
                r["statistics"] = "text filed. e.g. "
        return records

    found = ast.literal_eval(observation)
    return {k: clean(v) for k, v in found.items()} if isinstance(found, dict) else clean(found)


@pytest.mark.parametrize("db_id", DATABASES)
def test_search_column_matches_the_authors_for_every_column(paper_tools, db_id: str) -> None:
    theirs = AuthorsColumnSearcher(db_id, make_embedder("minilm"))
    tools = paper_tools[db_id]
    differing = []
    for record in theirs.cols:
        for query in (record["column"], record["column"].replace("_", " ") + " of " + record["table"]):
            ours = tools.run("SearchColumn", [query]).observation
            if _comparable(ours) != _comparable(theirs(query)):
                differing.append((query, ours, theirs(query)))
    assert differing == []


def test_search_column_keys_several_phrases_as_the_authors(paper_tools) -> None:
    theirs = AuthorsColumnSearcher("flight_2", make_embedder("minilm"))
    phrases = ["Airline name", "country", "  source airport "]
    ours = paper_tools["flight_2"].run("SearchColumn", [phrases]).observation
    assert _comparable(ours) == _comparable(theirs(phrases))


def test_search_column_keeps_whitespace_of_values(paper_tools) -> None:
    observation = paper_tools["flight_2"].run("SearchColumn", ["country"]).observation
    assert "'United States '" in observation
