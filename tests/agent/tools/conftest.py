"""Small real SQLite databases for the tool tests, built in tmp_path."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.sql import Connector, connect
from agent.tools import ToolBox, build_indexes, clear_cache

SCHEMA = """
CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);
CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, singer_id INTEGER REFERENCES singer(singer_id),
                      theme TEXT, year INTEGER);
CREATE TABLE employee (id INTEGER PRIMARY KEY, name TEXT, manager_id INTEGER REFERENCES employee(id));
CREATE TABLE enrollment (student_id INTEGER, course_id INTEGER, term TEXT, PRIMARY KEY (student_id, course_id));
CREATE TABLE grade (grade_id INTEGER PRIMARY KEY, student_id INTEGER, course_id INTEGER, score REAL,
                    FOREIGN KEY (student_id, course_id) REFERENCES enrollment(student_id, course_id));
CREATE TABLE "Stage Venue" ("Venue Id" INTEGER PRIMARY KEY, "CityName" TEXT);
CREATE TABLE event_log (id INTEGER PRIMARY KEY, message TEXT);
"""

SINGERS = [
    (1, "Joe Sharp", "Netherlands", 52),
    (2, "Timbaland", "United States", 32),
    (3, "Justin Brown", "France", 29),
    (4, "Rose White", "France", 41),
    (5, "John Nizinik", "France", 43),
    (6, "Tribal King", "United States", 25),
    (7, "Zoë O'Hara", "Côte d'Ivoire", 30),
]
CONCERTS = [
    (1, 1, "Free choice", 2014), (2, 2, "Bleeding Love", 2015), (3, 3, "Wide Awake", 2014),
    (4, 7, "SELECT * FROM singer; DROP TABLE singer", 2015), (5, 4, "Happy Tonight", 2015),
]


def make_db(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA)
    conn.executemany("INSERT INTO singer VALUES (?, ?, ?, ?)", SINGERS)
    conn.executemany("INSERT INTO concert VALUES (?, ?, ?, ?)", CONCERTS)
    conn.executemany("INSERT INTO employee VALUES (?, ?, ?)", [(1, "Ada", None), (2, "Brian", 1), (3, "Chen", 2)])
    conn.executemany("INSERT INTO enrollment VALUES (?, ?, ?)", [(1, 10, "fall"), (1, 11, "spring"), (2, 10, "fall")])
    conn.executemany("INSERT INTO grade VALUES (?, ?, ?, ?)", [(1, 1, 10, 3.5), (2, 1, 11, 2.0), (3, 2, 10, None)])
    conn.executemany('INSERT INTO "Stage Venue" VALUES (?, ?)', [(1, "São Paulo"), (2, "New York City")])
    conn.executemany("INSERT INTO event_log VALUES (?, ?)", [(i, f"event number {i}") for i in range(1, 40)])
    conn.commit()
    conn.close()
    return path


@pytest.fixture()
def db_path(tmp_path: Path) -> Path:
    return make_db(tmp_path / "concerts.sqlite")


@pytest.fixture()
def connector(db_path: Path) -> Iterator[Connector]:
    db = connect("sqlite", str(db_path))
    yield db
    db.close()


@pytest.fixture()
def index_dir(tmp_path: Path) -> Path:
    return tmp_path / "indexes"


@pytest.fixture()
def toolbox(connector: Connector, index_dir: Path) -> Iterator[ToolBox]:
    build_indexes(connector, index_dir, descriptions={("singer", "age"): "age of the singer in years"})
    yield ToolBox(connector, index_dir)
    clear_cache()
