"""Behaviours of the paper authors' released code that the paper itself does not describe.

Their ExecuteSQL refuses some SQL shapes before running it (a table alias, once per case; ``LEFT JOIN``;
``WHERE x IN (...)``; ``_id =`` in the WHERE clause) and, once per case, appends a hint asking the model to
double-check the selected columns when a non-empty result comes from a query selecting several columns or an
aggregate after another column. Their driver also re-runs a whole case (up to 3 times in all) when the last
observation is empty, 0, None or an error. Both are switches of the Interactive-T2S config, off by default;
this module holds the checks as plain functions (our own code, written from the behaviour of theirs).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ALIAS_ERROR = "Error. Do not use table alias, please write the full table name."
LEFT_JOIN_ERROR = "Error. Do not support 'left join'."
IN_ERROR = "Error. Do not support 'where ... in (...)' syntax, please use 'OR' instead."
ID_EQUALS_ERROR = "Error. Do not use '_id = ' in where clause, please write the full condition."
COLUMNS_HINT = (" (Hint: DOUBLE-CHECK the columns in the SELECT clause, do not select irrelevant columns, and the "
                "order of the columns must strictly match the requirements of the question. Re-call ExecuteSQL "
                "function if necessary.)")
MAX_CASE_ATTEMPTS = 3

_ALIAS = re.compile(r"(?:\b(?:from|join)\s+\w+\s+)(?:as\s+)?\b\w+\b")
_ALIAS_NOISE = ("from", "join", " where", " group", " on", " order", " except", " union")
_IN = re.compile(r"where\s+\w+\s+in\s*\(.*?\)", re.IGNORECASE | re.DOTALL)
_WHERE = re.compile(r"\bwhere\b(.*?)(?:\bgroup\s+by\b|\border\s+by\b|\blimit\b|\bhaving\b|$)",
                    re.IGNORECASE | re.DOTALL)
_SELECT = re.compile(r"select\s+(.*?)\s+from", re.IGNORECASE | re.DOTALL)
_AGG_AFTER_COLUMN = re.compile(r"select\s+((?:(?!from).)+)\s+(count|sum|max|min|avg)\(", re.IGNORECASE | re.DOTALL)


def _outer(sql: str) -> str:
    """The lowercased query up to its first sub-query, as the checks read it."""
    low = sql.strip().lower()
    cut = low.find("(select")
    return low[:cut] if cut >= 0 else low


def has_table_alias(sql: str) -> bool:
    for match in _ALIAS.findall(_outer(sql)):
        text = match
        for noise in _ALIAS_NOISE:
            text = text.replace(noise, "")
        if " " in text.strip():
            return True
    return False


def rejection(sql: str, *, alias_rejected_before: bool) -> str | None:
    """The authors' error message for SQL their ExecuteSQL refuses, else None (the query runs)."""
    low = _outer(sql)
    if " left join " in low:
        return LEFT_JOIN_ERROR
    if not alias_rejected_before and has_table_alias(sql):
        return ALIAS_ERROR
    if _IN.search(low):
        return IN_ERROR
    where = _WHERE.search(low)
    if where and "select " not in where.group(1) and "_id = " in where.group(1):
        return ID_EQUALS_ERROR
    return None


def wants_columns_hint(sql: str) -> bool:
    """Several selected columns, or an aggregate after another selected column: check their order."""
    low = _outer(sql)
    select = _SELECT.search(low)
    if select and ", " in select.group(0):
        return True
    match = _AGG_AFTER_COLUMN.search(low)
    return bool(match) and "from" not in match.group(1).split()


def hint_shown(observations: Iterable[str | None]) -> bool:
    return any(o and "(Hint: DOUBLE-CHECK the columns" in o for o in observations)


def alias_rejected(observations: Iterable[str | None]) -> bool:
    return any(o and o.startswith(ALIAS_ERROR) for o in observations)


_EMPTY_VALUES = (None, 0, 0.0, "")


def is_unusable_result(rows: list | tuple | None) -> bool:
    """The authors' "invalid result": no rows, or one row of nothing but None / 0 / ''."""
    if not rows:
        return True
    if len(rows) != 1:
        return False
    row = tuple(rows[0])
    if len(row) == 0 or all(v is None for v in row):
        return True
    return len(row) == 1 and not isinstance(row[0], bool) and row[0] in _EMPTY_VALUES
