from __future__ import annotations

from agent.tools.text import fold, ident, loose_name, split_name, sql_literal, stem, tokens


def test_fold_lowercases_strips_accents_and_spaces() -> None:
    assert fold("  Côte   d’Ivoire ") == "cote d'ivoire"


def test_identifiers_split_on_case_and_underscores() -> None:
    assert split_name("AlbumId") == "Album Id"
    assert split_name("HTTPServer_name") == "HTTP Server name"
    assert tokens("population_2020") == ["population", "2020"]


def test_light_stemming_merges_plurals_only_where_safe() -> None:
    assert stem("countries") == "country"
    assert stem("names") == "name"
    assert stem("status") == "status"
    assert stem("class") == "class"


def test_sql_literal_quotes_and_cuts() -> None:
    assert sql_literal("O'Hara") == "'O''Hara'"
    assert sql_literal(None) == "NULL"
    assert sql_literal(3) == "3"
    assert sql_literal("a\nb") == "'a b'"
    assert len(sql_literal("x" * 500)) == 102


def test_identifiers_are_quoted_only_when_needed() -> None:
    assert ident("singer") == "singer"
    assert ident("Stage Venue") == '"Stage Venue"'
    assert ident("sales.orders") == '"sales.orders"'  # SQLite: a dot is part of the name
    assert ident("sales.orders", case_sensitive=True) == "sales.orders"  # PostgreSQL: schema.table
    assert ident("sales.Orders", case_sensitive=True) == 'sales."Orders"'
    assert ident("Title", case_sensitive=True) == '"Title"' and ident("Title") == "Title"
    assert loose_name('"Stage Venue" . "CityName"') == "stage venue.cityname"
