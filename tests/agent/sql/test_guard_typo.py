"""A statement the parser cannot read is answered with what the parser saw, so a typo is named as one."""

import pytest

from agent.sql import QueryRejected, connect


def test_a_typo_in_select_says_what_the_parser_saw(make_sqlite):
    path = make_sqlite("CREATE TABLE t (name TEXT); INSERT INTO t VALUES ('a');")
    with connect("sqlite", str(path)) as conn, pytest.raises(QueryRejected) as refused:
        conn.execute("SELEC name FROM t")
    message = str(refused.value)
    assert "it starts with 'SELEC', not SELECT or WITH (a typo of SELECT?)" in message
    assert "The parser stopped at 'FROM' (line 1, column 15)" in message


def test_a_write_that_does_not_parse_is_not_called_a_typo(make_sqlite):
    path = make_sqlite("CREATE TABLE t (name TEXT);")
    with connect("sqlite", str(path)) as conn, pytest.raises(QueryRejected) as refused:
        conn.execute("DELETE FROM t WHERE")
    assert "it starts with 'DELETE', not SELECT or WITH." in str(refused.value)
    assert "Only a single SELECT query is allowed." in str(refused.value)


@pytest.mark.parametrize("sql", ["SELEC name", "nme", "nme AS n"])
def test_a_first_word_that_is_no_keyword_is_named_not_called_a_statement_kind(make_sqlite, sql):
    """"SELEC name" parses as a column with an alias: it is refused as unchecked, naming the word, never as
    "got ALIAS" or "got COLUMN"."""
    path = make_sqlite("CREATE TABLE t (name TEXT);")
    with connect("sqlite", str(path)) as conn, pytest.raises(QueryRejected) as refused:
        conn.execute(sql)
    first = sql.split()[0]
    assert str(refused.value) == (f"The query could not be checked: it starts with {first!r}, which is not a SQL "
                                  "keyword; a read query starts with SELECT or WITH.")
