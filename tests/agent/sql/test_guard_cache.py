"""The guard remembers what it accepted (parsing is most of what a query costs the evaluator), never what it refused."""

import pytest

from agent.sql import QueryRejected
from agent.sql.guard import check_read_only


def test_an_accepted_statement_is_parsed_once_and_a_refused_one_every_time(monkeypatch):
    from agent.sql import guard

    parses: list[str] = []
    real = guard._parse
    monkeypatch.setattr(guard, "_parse", lambda text, dialect: parses.append(text) or real(text, dialect))
    query = "SELECT 'parsed once' AS t FROM sqlite_master"
    assert check_read_only(query + ";", "sqlite") == check_read_only(query, "sqlite") == query
    assert parses.count(query) <= 1  # at most once (0 if an earlier test checked the same text)
    for _ in range(2):
        with pytest.raises(QueryRejected):
            check_read_only("DELETE FROM parsed_twice", "sqlite")
    assert parses.count("DELETE FROM parsed_twice") == 2
    assert check_read_only(query, "postgres") == query  # the verdict is per dialect
