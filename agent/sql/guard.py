"""A parse-level check that a statement is one read query.

This is an extra layer in front of the engines' own read-only enforcement
(see ``sqlite.py`` and ``postgres.py``), never the only one: a query that
slips past it still meets a read-only connection.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from .base import QueryRejected

_READ_ROOTS = (exp.Select, exp.SetOperation, exp.Values, exp.Subquery)
_FORBIDDEN = (
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Drop,
    exp.Create,
    exp.Alter,
    exp.Command,
    exp.Pragma,
    exp.Set,
    exp.Attach,
    exp.Detach,
    exp.Copy,
    exp.Merge,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    exp.TruncateTable,
    exp.Into,
    exp.LoadData,
)
_FORBIDDEN_FUNCTIONS = {"load_extension", "pg_sleep_for", "pg_read_file", "pg_read_binary_file", "lo_import", "lo_export",
                        "set_config"}
_LEADING_READ = re.compile(r"^\s*(\(\s*)*(select|with|values)\b", re.IGNORECASE)


def check_read_only(sql: str, dialect: str) -> str:
    """Return the statement without trailing semicolons, or raise QueryRejected.

    When sqlglot cannot parse a dialect quirk, the statement is let through only
    if it starts like a read query and holds a single statement; the engine
    then has the last word.
    """
    text = sql.strip().rstrip(";").strip()
    if not text:
        raise QueryRejected("Empty query.")
    try:
        statements = [s for s in sqlglot.parse(text, read=dialect) if s is not None]
    except (ParseError, TokenError):
        if not _LEADING_READ.match(text):
            raise QueryRejected("Only a single SELECT query is allowed.") from None
        return text
    if len(statements) != 1:
        raise QueryRejected(f"Only one statement per call is allowed; got {len(statements)}.")
    tree = statements[0]
    if not isinstance(tree, _READ_ROOTS):
        raise QueryRejected(f"Only read queries (SELECT) are allowed; got {tree.key.upper()}.")
    for node in tree.walk():
        if isinstance(node, _FORBIDDEN):
            raise QueryRejected(f"Only read queries are allowed; found {node.key.upper()} inside the query.")
        if isinstance(node, exp.Func):
            name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
            if name in _FORBIDDEN_FUNCTIONS:
                raise QueryRejected(f"Function {name}() is not allowed.")
    return text
