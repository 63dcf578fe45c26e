from __future__ import annotations

import ast

from agent.tools import ToolBox, build_indexes


def obs(toolbox: ToolBox, *args: object, **kwargs: object) -> str:
    result = toolbox.run("SearchValue", args, kwargs)
    assert result.ok, result.observation
    return result.observation


def test_exact_value_is_listed_first_as_table_column_literal(toolbox: ToolBox) -> None:
    text = obs(toolbox, "France")
    assert text.splitlines()[:2] == ["'France':", "singer.country = 'France'"]
    assert "no exact match" not in text


def test_each_cell_is_listed_once_per_column(toolbox: ToolBox) -> None:
    lines = obs(toolbox, "France").splitlines()
    assert lines.count("singer.country = 'France'") == 1


def test_case_and_accent_differences_are_found_and_marked_close(toolbox: ToolBox) -> None:
    text = obs(toolbox, "cote d'ivoire")
    assert text.splitlines()[1] == "no exact match; closest cells:"
    assert "singer.country = 'Côte d''Ivoire'" in text


def test_one_typo_is_tolerated(toolbox: ToolBox) -> None:
    assert "singer.name = 'Timbaland'" in obs(toolbox, "Timbalnd")
    assert "singer.country = 'Netherlands'" in obs(toolbox, "Nehterlands")


def test_partial_value_finds_the_full_cell(toolbox: ToolBox) -> None:
    assert "singer.name = 'John Nizinik'" in obs(toolbox, "Nizinik")
    assert "singer.name = 'Justin Brown'" in obs(toolbox, "Justin Bro")


def test_quotes_in_cells_are_doubled_so_cells_stay_data(toolbox: ToolBox) -> None:
    text = obs(toolbox, "Zoë O'Hara")
    assert "singer.name = 'Zoë O''Hara'" in text
    assert text.startswith("'Zoë O''Hara':")


def test_sql_keywords_are_searched_as_plain_words(toolbox: ToolBox) -> None:
    text = obs(toolbox, "DROP TABLE singer")
    assert "concert.theme = 'SELECT * FROM singer; DROP TABLE singer'" in text
    assert "no exact match" in obs(toolbox, 'select" OR 1=1 --')  # FTS syntax in a value is harmless


def test_unicode_values_match_with_and_without_accents(toolbox: ToolBox) -> None:
    assert '"Stage Venue".CityName = \'São Paulo\'' in obs(toolbox, "sao paulo")
    assert '"Stage Venue".CityName = \'São Paulo\'' in obs(toolbox, "São Paulo")


def test_table_and_column_filters_restrict_the_search(toolbox: ToolBox) -> None:
    assert "singer.country" not in obs(toolbox, "France", table="concert")
    text = obs(toolbox, "Free", column="concert.theme")
    assert "concert.theme = 'Free choice'" in text
    assert "concert.theme" in obs(toolbox, "free", table=["concert", "singer"], column="theme")


def test_unknown_table_filter_suggests_close_names(toolbox: ToolBox) -> None:
    result = toolbox.run("SearchValue", ["France"], {"table": "singers"})
    assert not result.ok
    assert "singer" in result.observation


def test_no_match_says_only_text_is_indexed(toolbox: ToolBox) -> None:
    text = obs(toolbox, "qqqqzzzz")
    assert "no matching cell" in text


def test_results_are_limited(toolbox: ToolBox) -> None:
    lines = obs(toolbox, "event number").splitlines()
    assert len([line for line in lines if " = " in line]) == 10


def test_several_values_in_one_call(toolbox: ToolBox) -> None:
    text = obs(toolbox, ["France", "Wide Awake"])
    assert "'France':" in text and "concert.theme = 'Wide Awake'" in text


def test_empty_value_is_a_helpful_error(toolbox: ToolBox) -> None:
    result = toolbox.run("SearchValue", ["   "])
    assert not result.ok and "SearchValue(" in result.observation


def _paper(connector, index_dir) -> ToolBox:
    build_indexes(connector, index_dir)
    return ToolBox(connector, index_dir, profile="paper", database_name="concerts")


def test_paper_profile_gives_one_record_per_row_and_five_at_most(connector, index_dir) -> None:
    """The authors' index held a document per row: a value in three rows comes back three times."""
    tools = _paper(connector, index_dir)
    records = ast.literal_eval(tools.run("SearchValue", ["France"]).observation)
    assert records == [{"contents": "France", "table": "singer", "column": "country"}] * 3
    several = ast.literal_eval(tools.run("SearchValue", [["France", "United States"]]).observation)
    assert list(several) == ["France", "United States"]
    assert several["United States"][:2] == [{"contents": "United States", "table": "singer", "column": "country"}] * 2
    assert all(len(v) <= 5 for v in several.values())


def test_paper_profile_filters_each_value_by_its_own_table_and_column(connector, index_dir) -> None:
    tools = _paper(connector, index_dir)
    assert tools.run("SearchValue", ["France", "concert", "theme"]).observation == "[]"
    assert tools.run("SearchValue", [["France", "Oslo"], "singer"]).observation == (
        "Error. Length of query, table, column should be the same.")
    # None in a filter list filters nothing for that value (the paper's BIRD exemplar writes column=[None, ...]).
    both = ast.literal_eval(tools.run("SearchValue", [["France", "Joe Sharp"]],
                                      {"column": [None, "theme"]}).observation)
    assert both["France"][0]["column"] == "country" and both["Joe Sharp"] == []
