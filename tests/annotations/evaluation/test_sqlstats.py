from __future__ import annotations

import pytest

from annotations.evaluation.sqlstats import (
    cell_value_stats,
    constraint_values,
    gold_stats,
    join_count,
    spider_hardness,
    table_bucket,
    table_count,
)


@pytest.mark.parametrize(
    ("sql", "joins"),
    [
        ("SELECT count(*) FROM singer", 0),
        ("SELECT T2.name FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id", 1),
        ("SELECT a.x FROM a JOIN b ON a.id = b.id JOIN c ON b.id = c.id JOIN d ON c.id = d.id", 3),
        ("SELECT name FROM stadium EXCEPT SELECT T2.name FROM concert AS T1 JOIN stadium AS T2 "
         "ON T1.stadium_id = T2.stadium_id", 1),
        ("SELECT name FROM s WHERE id IN (SELECT s_id FROM t JOIN u ON t.id = u.id)", 1),
        ("SELECT a.x FROM a, b WHERE a.id = b.id", 1),  # a comma join is a join too
    ],
)
def test_join_count_covers_subqueries_and_set_operations(sql, joins):
    assert join_count(sql) == joins
    assert table_count(sql) == joins + 1


def test_table_buckets_follow_the_paper():
    assert [table_bucket(n) for n in (1, 2, 3, 4, 7, None)] == ["1", "2", "3", "4+", "4+", None]
    assert join_count("SELEC nonsense (") is None


@pytest.mark.parametrize(
    ("sql", "level"),
    [
        ("SELECT count(*) FROM singer", "easy"),
        ("SELECT name, country, age FROM singer ORDER BY age DESC", "medium"),
        ("SELECT song_name FROM singer WHERE age > (SELECT avg(age) FROM singer)", "hard"),
        ("SELECT T2.name, T2.capacity FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id "
         "WHERE T1.year >= 2014 GROUP BY T2.stadium_id ORDER BY count(*) DESC LIMIT 1", "extra"),
        ("SELECT country FROM singer WHERE age > 40 INTERSECT SELECT country FROM singer WHERE age < 30", "hard"),
        ("SELECT name FROM singer WHERE age > 40 OR age < 30", "medium"),
        # a NOT condition counts as an aggregate (Spider's quirk): two of them make "others" 1
        ("SELECT name FROM t WHERE a NOT IN (1, 2) AND b NOT LIKE 'x%'", "medium"),
        # every AND in HAVING counts as an aggregate too
        ("SELECT a FROM t GROUP BY a HAVING count(*) > 1 AND sum(b) > 2 AND max(c) < 3", "medium"),
    ],
)
def test_spider_hardness_matches_the_official_rules(sql, level):
    assert spider_hardness(sql) == level


def test_gold_stats_parse_once():
    stats = gold_stats("SELECT a.x FROM a JOIN b ON a.id = b.id WHERE a.y = 1")
    assert (stats.join_count, stats.table_count, stats.hardness) == (1, 2, "medium")
    assert gold_stats("SELECT 1", hardness=False).hardness is None
    assert gold_stats("not sql at all (").join_count is None


def test_constraint_values_are_string_values_compared_with_columns():
    sql = ("SELECT name FROM t WHERE country = \"France\" AND city LIKE '%Paris%' AND age > 30 "
           "AND kind IN ('a', 'b') AND d BETWEEN 'x' AND 'y'")
    assert sorted(constraint_values(sql)) == ["France", "Paris", "a", "b", "x", "y"]
    assert constraint_values("SELECT T1.name FROM t AS T1 WHERE T1.id = T2.id") == []


def test_cvr_and_cvcr():
    stats = cell_value_stats([
        ("Singers from France?", "SELECT name FROM singer WHERE country = 'France'"),
        ("Singers from the Netherlands?", "SELECT name FROM singer WHERE country = 'NL'"),
        ("How many singers?", "SELECT count(*) FROM singer"),
        ("Singers older than 30?", "SELECT name FROM singer WHERE age > 30"),
    ])
    assert (stats.queries, stats.with_values, stats.covered) == (4, 2, 1)
    assert (stats.cvr, stats.cvcr) == (50.0, 50.0)
    empty = cell_value_stats([])
    assert (empty.cvr, empty.cvcr) == (None, None)


def test_hardness_reads_spaced_operators_and_drops_or_after_a_column_comparison():
    # Spider's value scan after "= T2.col" runs over OR, so that OR and its condition are never counted.
    swallowed = ("SELECT T1.code FROM airports AS T1 JOIN flights AS T2 ON T1.code = T2.dest "
                 "OR T1.code = T2.source")
    assert spider_hardness(swallowed) == "easy"
    assert spider_hardness("SELECT a FROM t WHERE b = 'x' OR c = 'y'") == "medium"
    assert spider_hardness('SELECT Code FROM country WHERE GovernmentForm ! =  "Republic"') == "easy"


def test_paper_cell_value_definition_counts_single_quoted_equalities_and_values_case_sensitively():
    from annotations.evaluation import paper_cell_value_stats, paper_constraint_values

    assert paper_constraint_values("SELECT a FROM t WHERE b = 'x' AND c != 'y' AND d >= 'z' AND e = \"w\"") == ["x"]
    assert paper_constraint_values("SELECT a FROM t WHERE b='O''Hara'") == ["O'Hara"]
    stats = paper_cell_value_stats([
        ("Who lives in Paris or london?", "SELECT n FROM p WHERE city = 'Paris' OR city = 'London'"),
        ("How many?", "SELECT count(*) FROM p"),
        ("Name of France's cities", "SELECT n FROM c WHERE country = \"France\""),  # double quotes: not counted
    ])
    assert (stats.queries, stats.with_values, stats.values, stats.found) == (3, 1, 2, 1)
    assert stats.cvcr == 50.0 and round(stats.cvr, 2) == 33.33
