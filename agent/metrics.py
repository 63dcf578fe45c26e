"""SQL quality measurement of HDSP (papers/hdsp-sql-quality-measurement.txt, section III.B).

- ``f_nc`` (eq. 2): 1 - Levenshtein(norm(pred), norm(gold)) / max(|norm(pred)|, |norm(gold)|).
  The normalisation removes what does not change a query's meaning for this
  purpose: case (outside string literals), whitespace, identifier quoting,
  table aliases (``T1.name`` becomes ``singer.name``) and output-column
  aliases (``AS n``).
- ``f_sc`` (eq. 3): 1 when the type of the predicted query's result equals
  the type of the model's direct answer A' (``result_type`` labels a result;
  the HDSP strategy labels A' with the same words).
- ``f_diff`` (eq. 4): 0, 1, 2 (simple, moderate, difficult) from the number
  of columns involved: <= 5, 6-9, >= 10. The paper defines it only for
  f_nc < t_nc; for f_nc >= t_nc (prediction close to the gold) it is 0 here,
  and without a gold query (f_nc is None) it is the column bucket alone.
- ``f_sf`` (eq. 5): 1 when the prompt should be extended.

The paper gives no value for the threshold t_nc; ``DEFAULT_T_NC`` is ours.
Pure Python, no Django: a core both the HDSP strategy and the runs' evaluation use.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import sqlglot
from rapidfuzz.distance import Levenshtein
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

DEFAULT_T_NC = 0.8

_STRING = re.compile(r"'(?:[^']|'')*'")
_QUOTES = re.compile(r'["`\[\]]')
_SPACE = re.compile(r"\s+")
_PUNCT_SPACE = re.compile(r"\s*([(),;=<>+\-*/])\s*")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?$")


# --- normalised comparison -----------------------------------------------------------------


def normalize_sql(sql: str, dialect: str = "sqlite") -> str:
    """Canonical text of a query for f_nc: parsed with sqlglot when possible, else by regular expressions."""
    text = (sql or "").strip().rstrip(";").strip()
    if not text:
        return ""
    try:
        tree = sqlglot.parse_one(text, read=dialect)
    except (ParseError, TokenError, ValueError):
        tree = None
    if tree is None:
        return _regex_normalize(text)
    _drop_aliases(tree)
    for node in tree.find_all(exp.Identifier):
        node.set("quoted", False)
    return _regex_normalize(tree.sql(dialect=dialect))


def _drop_aliases(tree: exp.Expression) -> None:
    aliases: dict[str, str] = {}
    for table in tree.find_all(exp.Table):
        alias = table.alias
        if alias:
            aliases[alias.lower()] = table.name
            table.set("alias", None)
    for column in tree.find_all(exp.Column):
        qualifier = column.table
        if qualifier and qualifier.lower() in aliases:
            column.set("table", exp.to_identifier(aliases[qualifier.lower()]))
    for select in tree.find_all(exp.Select):
        select.set("expressions", [e.this if isinstance(e, exp.Alias) else e for e in select.expressions])


def _regex_normalize(text: str) -> str:
    """Lower-case outside string literals, drop identifier quotes, collapse whitespace."""
    out: list[str] = []
    pos = 0
    for m in _STRING.finditer(text):
        out.append(_code_part(text[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_code_part(text[pos:]))
    return "".join(out).strip().rstrip(";").strip()


def _code_part(code: str) -> str:
    code = _QUOTES.sub("", code.lower())
    code = _SPACE.sub(" ", code)
    return _PUNCT_SPACE.sub(r"\1", code)


def f_nc(pred: str, gold: str, dialect: str = "sqlite") -> float:
    """Normalised comparison (eq. 2): 1.0 for identical normalised queries, 0.0 for nothing in common."""
    a, b = normalize_sql(pred, dialect), normalize_sql(gold, dialect)
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    return 1.0 - Levenshtein.distance(a, b) / longest


# --- semantic comparison -------------------------------------------------------------------


def result_type(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The type label of a query result: a scalar's type, a list (one column), a record (one row) or a table."""
    if not rows:
        return "empty"
    width = len(columns) if columns else len(rows[0])
    if width <= 1:
        if len(rows) == 1:
            return value_type(rows[0][0] if rows[0] else None)
        return "list"
    return "record" if len(rows) == 1 else "table"


def value_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, (date, datetime)):
        return "date"
    if isinstance(value, str):
        stripped = value.strip()
        if _DATE.match(stripped):
            return "date"
        try:
            float(stripped)
        except ValueError:
            return "text"
        return "number"
    return "text" if value is not None else "empty"


def f_sc(predicted_type: str | None, expected_type: str | None) -> int:
    """Semantic comparison (eq. 3): 1 when R(result) = R(A'); an unknown type on either side is a mismatch."""
    return int(predicted_type is not None and expected_type is not None and predicted_type == expected_type)


# --- difficulty and feedback ---------------------------------------------------------------


def column_bucket(n_col: int) -> int:
    """0 for at most 5 columns, 1 for 6-9, 2 for 10 or more (eq. 4)."""
    if n_col <= 5:
        return 0
    return 1 if n_col < 10 else 2


def f_diff(nc: float | None, n_col: int, t_nc: float = DEFAULT_T_NC) -> int:
    """Difficulty feedback (eq. 4); ``nc`` None (no gold query) uses the column count alone."""
    if nc is not None and nc >= t_nc:
        return 0
    return column_bucket(n_col)


def f_sf(nc: float | None, sc: int, diff: int, t_nc: float = DEFAULT_T_NC) -> int:
    """Specific feedback (eq. 5): 1 means "hard", i.e. re-answer with the extended prompt.

    With a gold query: 1 when the prediction is close to the gold but its result has the wrong type,
    or far from the gold on a moderate or difficult question. Without one (``nc`` None): 1 when
    the result has the wrong type or the question involves many columns.
    """
    if nc is None:
        return int(sc == 0 or diff in (1, 2))
    if nc >= t_nc:
        return int(sc == 0)
    return int(diff in (1, 2))


# --- columns involved -----------------------------------------------------------------------


def sql_columns(sql: str, dialect: str = "sqlite") -> set[str]:
    """Distinct column names a query refers to (lower-cased, qualifiers dropped, ``*`` excluded)."""
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except (ParseError, TokenError, ValueError):
        return set()
    if tree is None:
        return set()
    output_aliases = {a.alias.lower() for a in tree.find_all(exp.Alias) if a.alias}
    names = {c.name.lower() for c in tree.find_all(exp.Column) if c.name and c.name != "*"}
    return names - output_aliases


def mentioned_columns(text: str, column_names: Iterable[str]) -> set[str]:
    """Schema columns named in free text as whole identifiers (``table.column`` or bare): a schema-linking
    count for when no query can be parsed."""
    lowered = text.lower()
    found = set()
    for name in column_names:
        n = name.lower()
        if re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", lowered):
            found.add(n)
    return found


# --- all together ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SQLQuality:
    """One prediction's quality feedback; ``f_nc`` is None when there was no gold query."""

    f_nc: float | None
    f_sc: int
    f_diff: int
    f_sf: int
    n_col: int
    predicted_type: str | None
    expected_type: str | None
    t_nc: float

    def to_dict(self) -> dict[str, Any]:
        return {"f_nc": self.f_nc, "f_sc": self.f_sc, "f_diff": self.f_diff, "f_sf": self.f_sf,
                "n_col": self.n_col, "predicted_type": self.predicted_type, "expected_type": self.expected_type,
                "t_nc": self.t_nc}


def measure_quality(
    *,
    pred_sql: str | None,
    gold_sql: str | None,
    predicted_type: str | None,
    expected_type: str | None,
    n_col: int,
    t_nc: float = DEFAULT_T_NC,
    dialect: str = "sqlite",
) -> SQLQuality:
    """All four measures for one prediction. ``n_col`` is the number of columns involved (the gold
    query's when there is one; the caller's schema linking otherwise)."""
    nc = f_nc(pred_sql or "", gold_sql, dialect) if gold_sql else None
    sc = f_sc(predicted_type, expected_type)
    diff = f_diff(nc, n_col, t_nc)
    return SQLQuality(nc, sc, diff, f_sf(nc, sc, diff, t_nc), n_col, predicted_type, expected_type, t_nc)
