"""The suggestion rules on hand-made cases."""

from annotations.labels.suggestions import filter_columns, select_columns, suggest


def keys(**kwargs):
    base = {"gold_sql": "SELECT a FROM t", "pred_sql": "SELECT a FROM t", "gold_columns": ["a"], "gold_rows": [],
            "pred_columns": ["a"], "pred_rows": []}
    return {s.key for s in suggest(**{**base, **kwargs})}


def test_golden_empty_when_the_gold_result_has_no_rows():
    assert keys(gold_rows=[], pred_rows=[(1,)]) == {"golden_empty"}


def test_distinct_when_results_match_once_duplicates_are_removed():
    assert "distinct" in keys(gold_rows=[("x",), ("x",), ("y",)], pred_rows=[("x",), ("y",)])
    assert "distinct" not in keys(gold_rows=[("x",)], pred_rows=[("y",)])


def test_format_for_extra_columns_reordered_columns_and_formatting():
    assert "format" in keys(gold_columns=["a"], gold_rows=[(1,), (2,)], pred_columns=["id", "a"],
                            pred_rows=[(9, 1), (8, 2)])
    assert "format" in keys(gold_columns=["a", "b"], gold_rows=[(1, "x")], pred_columns=["b", "a"],
                            pred_rows=[("x", 1)])
    assert "format" in keys(gold_rows=[("Paris ",), (2.0,)], pred_rows=[("paris",), ("2",)])
    assert "format" not in keys(gold_rows=[("Paris",)], pred_rows=[("Rome",)])


def test_selected_and_filtered_columns_compare_select_and_where_columns():
    assert select_columns("SELECT T1.name, count(*) FROM singer AS T1 JOIN c AS T2 ON T1.id = T2.id") == {"name"}
    assert filter_columns("SELECT name FROM s WHERE age > 3 AND id IN (SELECT x FROM u WHERE y = 1)") == {
        "age", "id", "x", "y"}  # x: the IN subquery column is part of the filter
    found = keys(gold_sql="SELECT name FROM singer WHERE age > 35", pred_sql="SELECT country FROM singer WHERE age > 35",
                 gold_rows=[("Ann",)], pred_rows=[("France",)])
    assert found == {"selected_column"}
    found = keys(gold_sql="SELECT name FROM singer WHERE age > 35", pred_sql="SELECT name FROM singer WHERE id > 1",
                 gold_rows=[("Ann",)], pred_rows=[("Ann",), ("Bo",)])
    assert found == {"filtered_column"}
    # Same columns, qualified differently: no suggestion
    assert keys(gold_sql="SELECT T1.name FROM singer AS T1 WHERE T1.age > 1",
                pred_sql="SELECT singer.name FROM singer WHERE age > 2", gold_rows=[("a",)], pred_rows=[("b",)]) == set()


def test_unparseable_sql_gives_no_column_suggestion():
    assert keys(pred_sql="SELEC nonsense ((", gold_rows=[("a",)], pred_rows=None) == set()
