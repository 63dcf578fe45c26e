"""The authors' rules as their code applies them: the SQL refusals and the final answer of a case."""

from agent.strategies import authors_rules


def test_only_a_lowercase_select_cuts_the_checked_text_as_in_their_code():
    upper = "SELECT name FROM singer WHERE singer_id IN (SELECT singer_id FROM singer_in_concert)"
    lower = "SELECT name FROM singer WHERE singer_id IN (select singer_id FROM singer_in_concert)"
    # their code looks for "(select" in the query as written: the uppercase sub-query is checked whole
    assert authors_rules.rejection(upper, alias_rejected_before=False) == authors_rules.IN_ERROR
    assert authors_rules.rejection(lower, alias_rejected_before=False) is None
    # ... and the text before a lowercase "(select" keeps its case: " left join " no longer matches it
    # (their alias check reads "t left" as an alias; once it has refused once, it is off)
    assert authors_rules.rejection("SELECT a FROM t LEFT JOIN u ON t.x = u.x WHERE a = (select 1)",
                                   alias_rejected_before=True) is None
    assert authors_rules.rejection("SELECT a FROM t LEFT JOIN u ON t.x = u.x",
                                   alias_rejected_before=True) == authors_rules.LEFT_JOIN_ERROR


def test_id_equals_is_read_from_the_where_clause_as_sqlparse_splits_it():
    assert authors_rules.rejection("SELECT name FROM people WHERE people_id = 3",
                                   alias_rejected_before=False) == authors_rules.ID_EQUALS_ERROR
    assert authors_rules.rejection("SELECT name FROM people WHERE people_id = 3 ORDER BY name",
                                   alias_rejected_before=False) == authors_rules.ID_EQUALS_ERROR
    # the IN pattern does not cross lines (their regex has no DOTALL)
    assert authors_rules.rejection("SELECT a FROM t WHERE a IN (1,\n 2)", alias_rejected_before=False) is None


def test_the_answer_is_the_last_execute_sql_even_a_failed_one():
    steps = ['Thought: a \nAction: ExecuteSQL("SELECT count(*) FROM singer")',
             'Thought: b \nAction: ExecuteSQL("SELECT nosuch FROM singer")',
             "Thought: c \nAction: Done"]
    assert authors_rules.final_sql(steps) == "SELECT nosuch FROM singer"


def test_select_star_is_passed_over_unless_nothing_else_was_written():
    assert authors_rules.final_sql(['Action: ExecuteSQL("SELECT name FROM singer")',
                                    'Action: ExecuteSQL("SELECT * FROM singer")']) == "SELECT name FROM singer"
    assert authors_rules.final_sql(['Action: ExecuteSQL("SELECT * FROM singer")',
                                    'Action: ExecuteSQL("SELECT * FROM concert")']) == "SELECT * FROM concert"
    assert authors_rules.final_sql(["Action: SearchValue('x')", "Action: Done"]) is None


def test_cast_and_times_one_are_removed_as_make_final_res_does():
    step = 'Action: ExecuteSQL("SELECT CAST(sum(a) AS REAL) / count(*), avg(b * 1.0) FROM t")'
    assert authors_rules.final_sql([step]) == "SELECT sum(a) / count(*), avg(b) FROM t"


def test_text_after_the_call_makes_the_step_unreadable_as_in_their_script():
    # they drop the last character and eval the rest: anything after ")" leaves no string to read
    steps = ['Action: ExecuteSQL("SELECT 1")', 'Action: ExecuteSQL("SELECT 2") then Done']
    assert authors_rules.final_sql(steps) == "SELECT 1"


def test_a_completion_is_flattened_as_their_driver_keeps_it():
    raw = "I look\n  for the column.\nAction: SearchColumn('name')\nAction: Done [END]"
    assert authors_rules.normalised_step(raw) == "Thought: I look for the column. \nAction: SearchColumn('name')"
    assert authors_rules.normalised_step("Thought: x\nAction: Done\nObservation: made up") == \
        "Thought: x \nAction: Done"


def test_a_case_is_run_again_as_their_retry_reads_the_saved_dialog():
    # ended by Done: the last observation is read
    assert authors_rules.retry_wanted(["[('Bob',)]", "[(0,)]"], after_max_rounds=False)
    assert not authors_rules.retry_wanted(["[(0,)]", "[('Bob',)]"], after_max_rounds=False)
    # rows of three Nones are no "invalid result" of theirs; an error anywhere in the text is
    assert not authors_rules.retry_wanted(["[(None, None, None)]"], after_max_rounds=False)
    assert authors_rules.retry_wanted(["no such column: Errors"], after_max_rounds=False)
    # the rounds ran out: the last observation is the dialog's final message, the one before is read
    assert not authors_rules.retry_wanted(["[('Bob',)]", "[]"], after_max_rounds=True)
    assert authors_rules.retry_wanted(["[]", "[('Bob',)]"], after_max_rounds=True)
    # the hint after a result makes it another text
    assert not authors_rules.retry_wanted(["[(0,)]" + authors_rules.COLUMNS_HINT], after_max_rounds=False)
