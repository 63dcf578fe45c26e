"""HDSP's SQL quality measures on hand-made cases."""

from __future__ import annotations

import pytest

from agent.metrics import (
    column_bucket,
    f_diff,
    f_nc,
    f_sc,
    f_sf,
    measure_quality,
    mentioned_columns,
    normalize_sql,
    result_type,
    sql_columns,
)


def test_normalisation_ignores_case_whitespace_quotes_and_aliases() -> None:
    aliased = ('SELECT T1.Name AS n FROM "singer" AS T1 JOIN concert t2 ON T1.singer_id = t2.singer_id '
               "WHERE T1.country = 'UK';")
    plain = ("select singer.name from singer join concert on singer.singer_id=concert.singer_id "
             "where singer.country='UK'")
    assert normalize_sql(aliased) == normalize_sql(plain) == plain
    assert f_nc(aliased, plain) == 1.0


def test_normalisation_keeps_the_case_of_string_literals() -> None:
    assert normalize_sql("SELECT x FROM t WHERE y = 'UK'") != normalize_sql("SELECT x FROM t WHERE y = 'uk'")


def test_normalisation_falls_back_to_text_rules_for_unparsable_sql() -> None:
    assert normalize_sql('SELEC  "Name" ,  Age FROM `T` ;') == "selec name,age from t"


def test_f_nc_is_one_minus_edit_distance_over_the_longer_length() -> None:
    assert f_nc("SELECT a FROM t", "SELECT b FROM t") == pytest.approx(1 - 1 / len("select a from t"))
    assert f_nc("", "") == 1.0
    assert f_nc("SELECT a FROM t", "") == 0.0
    assert 0.0 < f_nc("SELECT name FROM singer", "SELECT COUNT(*) FROM concert WHERE year > 2000") < 0.5


@pytest.mark.parametrize(("columns", "rows", "expected"), [
    (("c",), [(3,)], "number"),
    (("c",), [("3.5",)], "number"),
    (("n",), [("Adele",)], "text"),
    (("d",), [("2019-05-01",)], "date"),
    (("n",), [("Adele",), ("Sting",)], "list"),
    (("n", "c"), [("Adele", "UK")], "record"),
    (("n", "c"), [("Adele", "UK"), ("Sting", "UK")], "table"),
    (("n",), [], "empty"),
])
def test_result_type(columns, rows, expected) -> None:
    assert result_type(columns, rows) == expected


def test_f_sc_is_one_when_the_two_types_are_equal() -> None:
    assert f_sc("number", "number") == 1
    assert f_sc("list", "number") == 0 and f_sc("text", "list") == 0
    assert f_sc(None, "number") == 0 and f_sc("number", None) == 0


def test_f_diff_buckets_by_column_count_below_the_threshold() -> None:
    assert [column_bucket(n) for n in (1, 5, 6, 9, 10, 30)] == [0, 0, 1, 1, 2, 2]
    assert f_diff(0.5, 3, t_nc=0.8) == 0
    assert f_diff(0.5, 7, t_nc=0.8) == 1
    assert f_diff(0.5, 12, t_nc=0.8) == 2
    assert f_diff(0.9, 12, t_nc=0.8) == 0  # close to the gold query: no difficulty feedback
    assert f_diff(None, 12) == 2  # no gold query: the column count alone


def test_f_sf_follows_equation_five() -> None:
    t = 0.8
    assert f_sf(0.9, 0, 0, t) == 1  # close to gold but the result type is wrong
    assert f_sf(0.9, 1, 0, t) == 0
    assert f_sf(0.5, 1, 1, t) == 1  # far from gold on a moderate question
    assert f_sf(0.5, 0, 2, t) == 1
    assert f_sf(0.5, 0, 0, t) == 0  # far from gold on a simple question: no extension
    assert f_sf(0.8, 0, 2, t) == 1  # the threshold itself counts as close (f_nc >= t_nc)
    # Without gold SQL: hard when the type is wrong or many columns are involved.
    assert f_sf(None, 1, 0, t) == 0 and f_sf(None, 0, 0, t) == 1 and f_sf(None, 1, 1, t) == 1


def test_columns_of_a_query_and_of_a_schema_linking_text() -> None:
    assert sql_columns("SELECT T1.name, COUNT(*) AS c FROM singer T1 WHERE T1.country = 'UK' ORDER BY c") == \
        {"name", "country"}
    assert sql_columns("not sql at all ((") == set()
    text = "Step 1: we need singer.name and concert.year; the column Country filters."
    assert mentioned_columns(text, ["name", "year", "country", "singer_id"]) == {"name", "year", "country"}


def test_measure_quality_with_and_without_gold() -> None:
    gold = "SELECT a, b, c, d, e, f, g FROM t"
    far = measure_quality(pred_sql="SELECT x FROM u WHERE z = 1", gold_sql=gold, predicted_type="number",
                          expected_type="table", n_col=len(sql_columns(gold)))
    assert far.f_nc < 0.8 and far.n_col == 7 and far.f_diff == 1 and far.f_sc == 0 and far.f_sf == 1
    live = measure_quality(pred_sql="SELECT a FROM t", gold_sql=None, predicted_type="list",
                           expected_type="list", n_col=2)
    assert live.f_nc is None and live.f_sf == 0
    assert live.to_dict()["t_nc"] == 0.8
