from annotations.evaluation.sqldiff import sql_token_diff


def test_tokens_differing_only_in_case_are_the_same():
    lines = sql_token_diff("SELECT count(*) FROM CARS_DATA WHERE x = 1", "select count(*) from cars_data where x = 2")
    assert [line for line in lines[3:] if line[0] in "+-"] == ["-1", "+2"]
    assert " CARS_DATA" in lines  # shown as the gold query spells it
    assert sql_token_diff("SELECT a FROM T", "select A from t") == []
