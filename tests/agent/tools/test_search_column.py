from __future__ import annotations

from pathlib import Path

from agent.sql import Connector
from agent.tools import ToolBox, build_indexes, clear_cache


def test_single_phrase_lists_top_columns_with_type_and_statistics(toolbox: ToolBox) -> None:
    result = toolbox.run("SearchColumn", ["singer country"])
    assert result.ok
    lines = result.observation.splitlines()
    assert lines[0] == "'singer country':"
    assert lines[1].startswith("- singer.country TEXT | text field, distinct count: 4, e.g. 'Netherlands'")
    assert len(lines) == 1 + 5


def test_several_phrases_make_one_block_each(toolbox: ToolBox) -> None:
    text = toolbox.run("SearchColumn", [["concert theme", "year"]]).observation
    assert "'concert theme':\n- concert.theme TEXT" in text
    assert "'year':\n- concert.year INTEGER | enumeration: '2015' (3), '2014' (2)" in text


def test_given_descriptions_are_shown_and_searched(toolbox: ToolBox) -> None:
    text = toolbox.run("SearchColumn", ["how old in years"]).observation
    assert "- singer.age INTEGER | age of the singer in years | numeric range: 25 .. 52" in text.splitlines()[1]


def test_identifiers_are_split_into_words(toolbox: ToolBox) -> None:
    text = toolbox.run("SearchColumn", ["city name of the venue"]).observation
    assert text.splitlines()[1].startswith('- "Stage Venue".CityName TEXT | city name |')


def test_plural_and_case_do_not_matter(toolbox: ToolBox) -> None:
    assert toolbox.run("SearchColumn", ["THEMES"]).observation.splitlines()[1].startswith("- concert.theme")


def test_empty_phrase_is_an_error_with_usage(toolbox: ToolBox) -> None:
    result = toolbox.run("SearchColumn", [""])
    assert not result.ok and 'SearchColumn("' in result.observation
    mixed = toolbox.run("SearchColumn", [["", "theme"]])
    assert mixed.ok and "(empty phrase skipped)" in mixed.observation


def test_unmatched_words_say_so_with_bm25(connector: Connector, index_dir: Path) -> None:
    build_indexes(connector, index_dir, column_backend="bm25")
    with ToolBox(connector, index_dir) as tools:
        text = tools.run("SearchColumn", ["xylophone"]).observation
    clear_cache()
    assert "no column matches" in text


def test_sql_keywords_and_quotes_in_phrases_are_plain_words(toolbox: ToolBox) -> None:
    result = toolbox.run("SearchColumn", ["name' OR '1'='1"])
    assert result.ok and result.observation.startswith("'name'' OR ''1''=''1':")


def test_identifier_written_as_one_word_is_found(toolbox: ToolBox) -> None:
    assert toolbox.run("SearchColumn", ["cityname"]).observation.splitlines()[1].startswith(
        '- "Stage Venue".CityName TEXT')
