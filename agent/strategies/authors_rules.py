"""Behaviours of the paper authors' released code that the paper itself does not describe.

Their ExecuteSQL refuses some SQL shapes before running it (a table alias, once per case; ``LEFT JOIN``;
``WHERE x IN (...)``; ``_id =`` in the WHERE clause) and, once per case, appends a hint asking the model to
double-check the selected columns when a non-empty result comes from a query selecting several columns or an
aggregate after another column. Their driver also re-runs a whole case (up to 3 times in all) when the last
observation is empty, 0, None or an error. Both are switches of the Interactive-T2S config, off by default;
this module holds the checks as plain functions (our own code, written from the behaviour of theirs).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence

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
# Their patterns, flags included: IN and the selected columns are looked for on one line only.
_IN = re.compile(r"WHERE\s+\w+\s+IN\s*\(.*?\)", re.IGNORECASE)
_SELECT = re.compile(r"SELECT\s+(.*?)\s+FROM", re.IGNORECASE)
_AGG_AFTER_COLUMN = re.compile(r"SELECT\s+((?:(?!FROM).)+)\s+(COUNT|SUM|MAX|MIN|AVG)\(\s*[^)]+\s*\)",
                               re.IGNORECASE | re.DOTALL)
_NO_WHERE = "No WHERE clause found in the SQL query."


def _checked_text(sql: str) -> str:
    """The text their checks read: the query lowercased, or, when it holds a lowercase ``(select``, the query
    up to there in its own case (their code tests the original text for the lowercase marker and keeps the
    unlowered prefix; an uppercase ``(SELECT`` is not a cut)."""
    sql = _unquoted(sql)
    cut = sql.find("(select")
    return sql[:cut] if cut >= 0 else sql.lower()


def _unquoted(sql: str) -> str:
    sql = sql.strip()
    if sql and sql[0] == sql[-1] == '"':
        sql = sql.strip('"')
    return sql


def has_table_alias(sql: str) -> bool:
    return _has_alias(_checked_text(sql))


def _has_alias(text: str) -> bool:
    for match in _ALIAS.findall(text.lower()):
        for noise in _ALIAS_NOISE:
            match = match.replace(noise, "")
        if " " in match.strip():
            return True
    return False


def where_clause(text: str) -> str:
    """Their WHERE clause reading (sqlparse, top-level whitespace dropped), or their "not found" text."""
    import sqlparse
    from sqlparse import sql as sp
    from sqlparse import tokens

    parsed = sqlparse.parse(text)
    if not parsed:
        return _NO_WHERE
    where = next((t for t in parsed[0].tokens if isinstance(t, sp.Where)), None)
    if where is None:
        return _NO_WHERE
    joined = "".join(t.value for t in where.tokens if t.ttype is not tokens.Token.Whitespace)[5:].strip()
    return joined if "select " not in joined.lower() else _NO_WHERE


def rejection(sql: str, *, alias_rejected_before: bool) -> str | None:
    """The authors' error message for SQL their ExecuteSQL refuses, else None (the query runs)."""
    text = _checked_text(sql)
    if " left join " in text:
        return LEFT_JOIN_ERROR
    if not alias_rejected_before and _has_alias(text):
        return ALIAS_ERROR
    if _IN.search(text):
        return IN_ERROR
    if "_id = " in where_clause(text):
        return ID_EQUALS_ERROR
    return None


def wants_columns_hint(sql: str) -> bool:
    """Several selected columns (or ``SELECT * FROM``), or an aggregate after another selected column."""
    text = _checked_text(sql)
    if "SELECT * FROM" in text:
        return True
    select = _SELECT.search(text)
    if select and select.group(0).count(", ") > 0:
        return True
    match = _AGG_AFTER_COLUMN.search(text)
    return bool(match) and "FROM" not in match.group(1).upper().split()


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


# --- the loop as their driver runs it (the paper-replica's prompt_format "paper") ---------------------------

NO_ACTION_ERROR = "Error: No valid action found. Please provide an action after `Action:` ."
SEVERAL_ACTIONS_ERROR = "Error: More than one `Action:` found. Please provide only one action."
# Their text, tool names of another project included, as the model got it.
UNKNOWN_ACTION_ERROR = ("Error: Action no found, action must be one of [SearchNodes, SearchGraphPatterns, "
                        "ExecuteSPARQL, Done], one at a time.")
NO_EXECUTE_ERROR = "Error. You must call ExecuteSQL function to provide the answer at least once."
_ACTION_NAMES = ("SearchColumn", "SearchValue", "FindShortestPath", "ExecuteSQL", "Done")


def normalised_step(completion: str) -> str:
    """A completion as their driver keeps it: cut at "Observation", at most one "Action:" line, every other
    newline and run of whitespace collapsed to one space, "[END]" removed, ``Thought: `` put in front (also
    before nothing, when the completion only had text after "Observation"). An empty completion, on which
    their driver fails, stays empty."""
    text = completion.strip()
    if not text:
        return ""
    text = text.split("Observation")[0]
    if "\nAction: " in text:
        text = "\nAction: ".join(text.split("\nAction: ")[:2])
    text = " ".join(text.replace("\n", " ").split())
    text = text.replace("Action:", "\nAction:").replace("[END]", "").strip()
    return text if text.startswith("Thought: ") else "Thought: " + text


def action_error(step: str) -> str | None:
    """Their parser's refusal of a normalised step (no ``Action:``, several, or no known action), else None."""
    parts = step.split("Action:")
    if len(parts) < 2:
        return NO_ACTION_ERROR
    if len(parts) > 2:
        return SEVERAL_ACTIONS_ERROR
    if not any(name in parts[1] for name in _ACTION_NAMES):
        return UNKNOWN_ACTION_ERROR
    return None


def action_call(step: str) -> str:
    """The call their parser evaluates in a step it accepts (``action_error`` None): the text after
    ``Action:`` from the first tool name on, newlines after ExecuteSQL made spaces, cut after the last ")"
    (``Done`` alone when Done comes first)."""
    rest = step.split("Action:")[1]
    rest = rest[min(i for i in (rest.find(n) for n in _ACTION_NAMES) if i != -1):].strip()
    if rest.startswith("Done"):
        return "Done"
    if "ExecuteSQL" in rest:
        at = rest.find("ExecuteSQL")
        rest = rest[:at] + rest[at:].replace("\n", " ").strip()
    return rest[:rest.rfind(")") + 1]


def call_syntax_error(call: str) -> str | None:
    """Their error text when the call is no Python expression (their ``eval`` fails to compile it), else None.
    The text is compiled, never run, as their eval would compile it."""
    try:
        compile(call, "<string>", "eval")
    except SyntaxError as exc:
        return f"Error: Action parsing error. {exc.__class__.__name__}: {exc}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return f"Error: Action parsing error. {exc.__class__.__name__}: {exc}"
    return None


# Their "invalid result" texts (tool/utils.py INVALID_RESULTS).
INVALID_RESULTS = frozenset({"[]", "[()]", "[(None,)]", "[(None, None)]", "[(0,)]", "[('',)]", "None", "[(0.0,)]"})


def retry_wanted(observations: Sequence[str], *, after_max_rounds: bool) -> bool:
    """Their retry test (``retry_no_empty``) on a finished case, given the observations its dialog holds in
    order: it reads the last user message before the dialog's final one, which is the last observation when
    the case ended with Done or a repetition (a closing message follows it) and the one before it when the
    rounds ran out (the last observation is the final message; with none before it, the question). That text,
    with "Observation: " removed, is unusable when it is one of their empty results or mentions "Error" or
    " not supported"."""
    pool = list(observations[:-1]) if after_max_rounds else list(observations)
    if not pool:
        return False  # their test then reads the question, which is no result
    text = ("Observation: " + pool[-1]).replace("Observation: ", "").strip()
    return text in INVALID_RESULTS or "Error" in text or " not supported" in text


_CAST = re.compile(r"CAST\((.*?) AS [^\)]+\)", re.IGNORECASE)


def final_sql(steps: Iterable[str]) -> str | None:
    """Their answer from the assistant messages of a case, in order: the SQL of the last ``ExecuteSQL(...)``,
    whether it ran or failed, passing over those starting with ``SELECT * FROM`` unless nothing else is left;
    then their post-processing (``CAST(x AS t)`` becomes ``x``, ``" * 1.0)"`` becomes ``")"``). None when no
    message calls ExecuteSQL with a readable string (their text "None")."""
    fallback = None
    for step in reversed(list(steps)):
        if "ExecuteSQL(" not in step:
            continue
        sql = _string_literal(step.split("ExecuteSQL(")[1][:-1])
        if sql is None:
            continue
        if not sql.startswith("SELECT * FROM"):
            return post_processed(sql)
        fallback = fallback or sql
    return post_processed(fallback) if fallback else None


def post_processed(sql: str) -> str:
    if "cast(" in sql.lower():
        sql = _CAST.sub(lambda m: m.group(1), sql)
    return sql.replace(" * 1.0)", ")")


def _string_literal(text: str) -> str | None:
    # They eval() the text; a literal string is all that can be an answer, and literal_eval reads it the same.
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


# Keys some Spider databases use without declaring them, from the authors' preprocess/spider_missing_fk.json,
# in their direction ("table.column references ref_table(ref_column)"). Only the Spider dev one is listed.
MISSING_FOREIGN_KEYS: dict[str, tuple[tuple[str, str, str, str], ...]] = {
    "flight_2": (("airlines", "uid", "flights", "Airline"),),
}
