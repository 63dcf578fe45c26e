from __future__ import annotations

import sqlite3
from pathlib import Path

from agent.sql import connect
from agent.tools import ToolBox, build_indexes, clear_cache


def path(toolbox: ToolBox, start: object, end: object) -> str:
    result = toolbox.run("FindShortestPath", [start, end])
    assert result.ok, result.observation
    return result.observation


def test_key_labels_follow_the_direction_of_the_walk(toolbox: ToolBox) -> None:
    assert path(toolbox, "singer.name", "concert.theme") == (
        "singer.name <-> singer.singer_id = concert.singer_id <-> concert.theme")
    assert path(toolbox, "concert.theme", "singer.name") == (
        "concert.theme <-> concert.singer_id = singer.singer_id <-> singer.name")


def test_same_table_and_same_column(toolbox: ToolBox) -> None:
    assert path(toolbox, "singer.name", "singer.age") == "singer.name <-> singer.age"
    assert path(toolbox, "singer.name", "singer.name") == "singer.name"


def test_names_are_case_insensitive_and_quotes_are_accepted(toolbox: ToolBox) -> None:
    assert path(toolbox, "SINGER.Name", '"singer"."age"') == "singer.name <-> singer.age"


def test_composite_key_prints_the_whole_condition(toolbox: ToolBox) -> None:
    assert path(toolbox, "grade.score", "enrollment.term") == (
        "grade.score <-> (grade.student_id, grade.course_id) = "
        "(enrollment.student_id, enrollment.course_id) <-> enrollment.term")


def test_self_referencing_key(toolbox: ToolBox) -> None:
    assert path(toolbox, "employee.manager_id", "employee.id") in (
        "employee.manager_id = employee.id", "employee.manager_id <-> employee.id")
    assert path(toolbox, "employee.name", "employee.manager_id") == "employee.name <-> employee.manager_id"


def test_lists_give_one_line_per_pair(toolbox: ToolBox) -> None:
    lines = path(toolbox, ["singer.name", "singer.age"], "concert.year").splitlines()
    assert lines == [
        "singer.name <-> singer.singer_id = concert.singer_id <-> concert.year",
        "singer.age <-> singer.singer_id = concert.singer_id <-> concert.year",
    ]


def test_no_path_names_the_groups_of_connected_tables(toolbox: ToolBox) -> None:
    result = toolbox.run("FindShortestPath", ["singer.name", "event_log.message"])
    assert not result.ok
    assert "No join path from singer.name to event_log.message" in result.observation
    assert "[concert, singer]" in result.observation and "[event_log]" in result.observation


def test_unknown_column_suggests_the_closest_names(toolbox: ToolBox) -> None:
    result = toolbox.run("FindShortestPath", ["singer.nmae", "concert.theme"])
    assert not result.ok
    assert "Unknown column 'singer.nmae'" in result.observation and "singer.name" in result.observation


def test_a_table_instead_of_a_column_is_explained(toolbox: ToolBox) -> None:
    result = toolbox.run("FindShortestPath", ["singer", "concert.theme"])
    assert not result.ok and "is a table" in result.observation and "singer.singer_id" in result.observation


def test_table_with_spaces_and_mixed_case(toolbox: ToolBox) -> None:
    assert path(toolbox, "Stage Venue.CityName", "stage venue.venue id") == (
        '"Stage Venue".CityName <-> "Stage Venue"."Venue Id"')


def test_ties_are_broken_the_same_way_every_time(tmp_path: Path) -> None:
    db = tmp_path / "flights.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript("""
        CREATE TABLE airport (code TEXT PRIMARY KEY, city TEXT);
        CREATE TABLE flight (id INTEGER PRIMARY KEY, src TEXT REFERENCES airport(code),
                             dst TEXT REFERENCES airport(code), price REAL);
    """)
    conn.close()
    with connect("sqlite", str(db)) as target:
        build_indexes(target, tmp_path / "idx")
        answers = {ToolBox(target, tmp_path / "idx").run("FindShortestPath", ["airport.city", "flight.price"]).observation
                   for _ in range(3)}
        clear_cache()
    assert answers == {"airport.city <-> airport.code = flight.dst <-> flight.price"}


def test_database_without_foreign_keys(tmp_path: Path) -> None:
    db = tmp_path / "flat.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript("CREATE TABLE a (x TEXT, y TEXT); CREATE TABLE b (z TEXT); INSERT INTO a VALUES ('p', 'q');")
    conn.close()
    with connect("sqlite", str(db)) as target:
        manifest = build_indexes(target, tmp_path / "idx")
        tools = ToolBox(target, tmp_path / "idx")
        assert manifest.counts["foreign_keys"] == 0
        assert tools.run("FindShortestPath", ["a.x", "a.y"]).observation == "a.x <-> a.y"
        result = tools.run("FindShortestPath", ["a.x", "b.z"])
        assert not result.ok and "[a]" in result.observation and "[b]" in result.observation
        clear_cache()
