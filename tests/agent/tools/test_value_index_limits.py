"""The SearchValue index build reads an uploaded (possibly hostile) SQLite file within bounds: a cell longer
than READ_MAX_BYTES is skipped unread (its row's other cells still indexed), blobs are never loaded, the
counts held in memory are handed on in parts past a budget, and past the build's limits the build stops
with an error naming the limit. Schema statistics over the same file stay bounded too."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.sql import connect
from agent.tools import build_indexes, value_index
from agent.tools.value_index import VALUES_FILE, ValueIndex, ValueIndexLimit
from tests.support.memory import peak_growth, reset_peak

HOSTILE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.executescript('''
    CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT, body TEXT, data BLOB);
    CREATE TABLE city (id INTEGER PRIMARY KEY, city TEXT);
''')
conn.executemany("INSERT INTO item(name, body) VALUES (?, ?)", [(f"alpha {i}", f"first body {i}") for i in range(2000)])
# 200 MB of text and a 300 MB blob in one row, then a 2 MB text: written by SQLite itself, never built in Python.
conn.execute("INSERT INTO item(name, body, data) VALUES ('Hostile Row', printf('%.*c', 200000000, 'x'), "
             "zeroblob(300000000))")
conn.execute("INSERT INTO item(name, body) VALUES ('Second Hostile', printf('%.*c', 2000000, 'y'))")
conn.executemany("INSERT INTO item(name, body) VALUES (?, ?)", [(f"omega {i}", f"last body {i}") for i in range(2000)])
conn.executemany("INSERT INTO city(city) VALUES (?)", [("Lisbon",), ("Porto",), ("Lisbon",)])
conn.commit()
"""




@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "hostile.sqlite"
    subprocess.run([sys.executable, "-c", HOSTILE, str(path)], check=True)  # not in this process's RSS
    return path


def test_a_200mb_cell_and_a_300mb_blob_are_skipped_unread_and_the_rest_is_indexed(hostile, tmp_path):
    connector = connect("sqlite", str(hostile))
    try:
        before = reset_peak()
        started = time.perf_counter()
        schema = connector.introspect(with_stats=True)
        manifest = build_indexes(connector, tmp_path / "idx", schema=schema, column_backend="bm25")
        growth, seconds = peak_growth(before), time.perf_counter() - started
    finally:
        connector.close()
    assert growth < 40 * 1024 * 1024, growth  # the cells are 200 MB and 300 MB
    assert seconds < 20, seconds
    counts = manifest.counts
    assert counts["skipped_cells"] == 2  # the 200 MB and 2 MB texts; the blob is no text and never read
    assert counts["text_cells"] == 2 * 4002 - 2 + 3
    index = ValueIndex(tmp_path / "idx" / manifest.version / VALUES_FILE)
    found = {(c.table, c.column, c.value) for c in index.search("Hostile Row")}
    assert ("item", "name", "Hostile Row") in found  # the row's other cells are indexed
    assert ("item", "name", "Second Hostile") in {(c.table, c.column, c.value) for c in index.search("Second Hostile")}
    assert ("item", "body", "last body 1999") in {(c.table, c.column, c.value) for c in index.search("last body 1999")}
    assert [(c.value, c.count) for c in index.search("Lisbon")][0] == ("Lisbon", 2)
    stats = {(t.name, c.name): c.stats for t in schema.tables for c in t.columns}
    assert stats[("item", "name")].distinct_count == 4002 and stats[("city", "city")].listing == ("Lisbon", "Porto")
    # the columns holding the huge values keep their counts (not "no non-null values"), without a value shown
    assert (stats[("item", "body")].kind, stats[("item", "body")].null_count) == ("text", 0)
    assert (stats[("item", "data")].kind, stats[("item", "data")].null_count) == ("text", 4001)


def test_past_the_skipped_cells_limit_the_build_stops_and_says_so(hostile, tmp_path, monkeypatch):
    monkeypatch.setattr(value_index, "MAX_SKIPPED_CELLS", 1)
    connector = connect("sqlite", str(hostile))
    try:
        with pytest.raises(ValueIndexLimit, match="more than 1 text cells longer than 1,048,576 bytes"):
            build_indexes(connector, tmp_path / "idx", column_backend="bm25")
    finally:
        connector.close()
    assert not any((tmp_path / "idx").glob("v-*"))  # nothing half-built is kept


@pytest.mark.parametrize(("limit", "value", "message"), [
    ("MAX_TEXT_CELLS", 50, "more than 50 text cells to read"),
    ("MAX_INDEX_CELLS", 20, "more than 20 distinct text values"),
])
def test_past_the_total_work_limits_the_build_stops_and_says_so(connector, tmp_path, monkeypatch, limit, value,
                                                                message):
    monkeypatch.setattr(value_index, limit, value)
    with pytest.raises(ValueIndexLimit, match=message):
        build_indexes(connector, tmp_path / "idx", column_backend="bm25")


def test_counts_handed_on_in_parts_add_up_to_the_same_index(connector, tmp_path, monkeypatch):
    whole = build_indexes(connector, tmp_path / "a", column_backend="bm25")
    monkeypatch.setattr(value_index, "_HELD_CHARS", 200)  # hand the counts on every page
    monkeypatch.setattr(value_index, "_PAGE", 3)
    parts = build_indexes(connector, tmp_path / "b", column_backend="bm25")
    assert parts.counts["cells"] == whole.counts["cells"] and parts.counts["text_cells"] == whole.counts["text_cells"]
    index = ValueIndex(tmp_path / "b" / parts.version / VALUES_FILE)
    assert [(c.value, c.count) for c in index.search("France")][0] == ("France", 3)


def test_each_too_long_cell_costs_one_restart_of_its_table_scan(hostile, tmp_path, monkeypatch):
    restarts = []
    step_past = value_index.CellSource._step_past
    monkeypatch.setattr(value_index.CellSource, "_step_past",
                        lambda self, *args: restarts.append(1) or step_past(self, *args))
    for page in (value_index._PAGE, 7):  # the 200 MB cell inside the first page, and in the 286th
        monkeypatch.setattr(value_index, "_PAGE", page)
        restarts.clear()
        connector = connect("sqlite", str(hostile))
        try:
            manifest = build_indexes(connector, tmp_path / f"idx{page}", column_backend="bm25")
        finally:
            connector.close()
        assert manifest.counts["skipped_cells"] == 2 and manifest.counts["text_cells"] == 2 * 4002 - 2 + 3
        assert len(restarts) == 2, (page, len(restarts))  # not one per row before the cell (a 50k-row hang)
