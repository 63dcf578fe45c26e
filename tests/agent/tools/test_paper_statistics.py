"""SearchColumn in the paper profile: the authors' statistics wording, full value lists up to 50 values."""

from __future__ import annotations

import ast
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.sql import connect
from agent.tools import ToolBox, build_indexes, clear_cache


@pytest.fixture()
def paper_tools(tmp_path: Path) -> Iterator[ToolBox]:
    path = tmp_path / "shop.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE item (id INTEGER PRIMARY KEY, city TEXT, title VARCHAR(80), note TEXT, stock INT,
                           price REAL, added DATE, active BOOLEAN);
        CREATE TABLE archive (id INTEGER, label TEXT);
    """)
    cities = ["Paris", "Oslo", "Lima"]
    rows = [(i, cities[i % 3], f"title number {i}", "a long note with many words in it to make a sentence"
             if i == 7 else f"note {i % 4}", i % 5, 1.5 * i, f"2024-01-{1 + i % 28:02d}", i % 2)
            for i in range(1, 61)]
    conn.executemany("INSERT INTO item VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()
    connector = connect("sqlite", str(path))
    build_indexes(connector, tmp_path / "idx", column_backend="bm25")
    with ToolBox(connector, tmp_path / "idx", profile="paper") as tools:
        yield tools
    connector.close()
    clear_cache()


def _statistics(tools: ToolBox, table: str, column: str) -> str:
    records = ast.literal_eval(tools.run("SearchColumn", [f"{table} {column}"]).observation)
    record = next(r for r in records if (r["table"], r["column"]) == (table, column))
    return record.get("statistics", "")


def test_text_column_with_few_values_lists_every_value(paper_tools: ToolBox) -> None:
    # In the order the rows first hold them, as the authors read them.
    assert _statistics(paper_tools, "item", "city") == "categorical field. ['Oslo', 'Lima', 'Paris']"


def test_text_column_with_more_than_fifty_values_is_free_text(paper_tools: ToolBox) -> None:
    text = _statistics(paper_tools, "item", "title")
    assert text.startswith("text filed. e.g. title number") and text.endswith(" ...")


def test_a_sentence_makes_a_text_column_free_text(paper_tools: ToolBox) -> None:
    assert _statistics(paper_tools, "item", "note").startswith("text filed. e.g. ")


def test_numbers_dates_and_booleans_in_the_authors_words(paper_tools: ToolBox) -> None:
    assert _statistics(paper_tools, "item", "stock") == "min: 0, max: 4. distinct count: 5"
    assert _statistics(paper_tools, "item", "price") == "min: 1.5, max: 90.0"
    assert _statistics(paper_tools, "item", "added") == "min: 2024-01-01, max: 2024-01-28"
    # Their GROUP BY read the stored numbers: the keys are numbers, not text.
    assert _statistics(paper_tools, "item", "active") == "distinct count: {0: 30, 1: 30}"
    assert _statistics(paper_tools, "archive", "label") == "empty column."


def test_default_profile_keeps_its_own_text(paper_tools: ToolBox, tmp_path: Path) -> None:
    connector = connect("sqlite", str(tmp_path / "shop.sqlite"))
    with ToolBox(connector, tmp_path / "idx") as tools:
        text = tools.run("SearchColumn", ["item city"]).observation
    connector.close()
    assert "- item.city TEXT | enumeration: 'Lima' (20), 'Oslo' (20), 'Paris' (20)" in text


@pytest.mark.parametrize("profile", ["default", "paper"])
def test_values_keep_their_whitespace_in_both_profiles(tmp_path: Path, profile: str) -> None:
    path = tmp_path / "air.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE airports (code TEXT, country TEXT)")
    conn.executemany("INSERT INTO airports VALUES (?, ?)", [("A", "United States "), ("B", "United States "),
                                                            ("C", "Canada"), ("D", "Canada")])
    conn.commit()
    conn.close()
    connector = connect("sqlite", str(path))
    build_indexes(connector, tmp_path / "idx", column_backend="bm25")
    with ToolBox(connector, tmp_path / "idx", profile=profile) as tools:
        observation = tools.run("SearchColumn", ["country"]).observation
    clear_cache()
    assert "'United States '" in observation
