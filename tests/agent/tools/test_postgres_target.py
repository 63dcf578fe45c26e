"""The tools on a PostgreSQL target (skipped when no server is reachable)."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest

from agent.sql import connect
from agent.tools import ToolBox, build_indexes, clear_cache, is_stale

SETUP = """
CREATE SCHEMA sales;
CREATE TABLE artist (id integer PRIMARY KEY, name text NOT NULL, country varchar(40));
CREATE TABLE "Album Info" (id integer PRIMARY KEY, "Title" text, artist_id integer REFERENCES artist(id));
CREATE TABLE sales.orders (id integer PRIMARY KEY, album_id integer REFERENCES "Album Info"(id), note text);
INSERT INTO artist SELECT g, 'Artist ' || g, CASE WHEN g % 2 = 0 THEN 'France' ELSE 'Côte d''Ivoire' END
    FROM generate_series(1, 300) g;
INSERT INTO "Album Info" VALUES (1, 'Back in Black', 1), (2, 'O''Brien Sessions', 2);
INSERT INTO sales.orders VALUES (1, 1, 'gift wrap'), (2, 2, NULL);
"""


@pytest.mark.postgres
def test_indexes_and_tools_on_postgres(pg_database: str, pg_reader, tmp_path: Path) -> None:
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(SETUP)
    with connect("postgresql", pg_reader(("public", "sales"))) as db:
        manifest = build_indexes(db, tmp_path / "idx")
        assert manifest.counts["tables"] == 3 and manifest.counts["foreign_keys"] == 2
        assert manifest.counts["cells"] >= 300 + 2 + 2 + 1
        tools = ToolBox(db, tmp_path / "idx")
        text = tools.run("SearchValue", ["back in blak"]).observation
        assert "\"Album Info\".\"Title\" = 'Back in Black'" in text
        assert "sales.orders.note = 'gift wrap'" in tools.run("SearchValue", ["gift"]).observation
        assert "artist.country = 'Côte d''Ivoire'" in tools.run("SearchValue", ["cote d'ivoire"]).observation
        path = tools.run("FindShortestPath", ["artist.name", "sales.orders.note"]).observation
        assert path == ('artist.name <-> artist.id = "Album Info".artist_id <-> "Album Info".id = '
                        "sales.orders.album_id <-> sales.orders.note")
        result = tools.run("ExecuteSQL", ["SELECT count(*) AS n FROM artist"])
        assert result.ok and result.observation == "n\n300"
        assert not is_stale(manifest, db)
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute("INSERT INTO artist VALUES (301, 'Kraftwerk', 'Germany')")
        # The fingerprint reads pg_stat_user_tables, which a backend flushes up to a second later.
        deadline = time.monotonic() + 10
        while not is_stale(manifest, db) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert is_stale(manifest, db)
    clear_cache()


@pytest.mark.postgres
def test_a_huge_cell_stays_on_the_server_during_the_index_build(pg_database: str, pg_reader, tmp_path: Path) -> None:
    from agent.tools.value_index import VALUES_FILE, ValueIndex

    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE note (id integer PRIMARY KEY, body text)")
        conn.execute("INSERT INTO note SELECT g, 'note ' || g FROM generate_series(1, 500) g")
        conn.execute("INSERT INTO note VALUES (501, repeat('x', 30000000)), (502, repeat('long ', 300) || 'tail')")
    with connect("postgresql", pg_reader(("public",))) as db:
        manifest = build_indexes(db, tmp_path / "idx", column_backend="bm25")
    assert manifest.counts["text_cells"] == 501  # the 30 MB cell is left out on the server
    index = ValueIndex(tmp_path / "idx" / manifest.version / VALUES_FILE)
    assert [c.value for c in index.search("note 250")][0] == "note 250"
    assert [len(c.value) for c in index.search("long")] == [1000]  # cut to 1,000 characters on the server
