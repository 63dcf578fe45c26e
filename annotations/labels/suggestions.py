"""Rule-based label suggestions for a failed question (no Django).

Inputs are the gold and predicted results (columns and rows, as shown on the
review page: the first rows only) and both queries. Each rule returns a
``Suggestion(key, reason)`` with a category key of the seeded taxonomy. They
are hints for the annotator, never labels.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

Row = Sequence[Any]


@dataclass(frozen=True)
class Suggestion:
    key: str
    reason: str


def _norm(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    return value


def _loose(value: Any) -> Any:
    """Formatting-insensitive form of a cell: trimmed lower-case text, numbers rounded, NULL as ''."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(round(float(value), 4))
    text = str(value).strip().lower()
    try:
        return str(round(float(text), 4))
    except ValueError:
        return text


def _rows(rows: Sequence[Row], cell=_norm) -> list[tuple]:
    return [tuple(sorted((cell(v) for v in r), key=lambda v: (str(type(v)), str(v)))) for r in rows]


def same_rows_after_dedup(gold: Sequence[Row], pred: Sequence[Row]) -> bool:
    """Different as multisets, equal as sets (column order ignored)."""
    g, p = _rows(gold), _rows(pred)
    return Counter(g) != Counter(p) and set(g) == set(p)


def same_values_other_shape(gold_columns: Sequence[str], gold: Sequence[Row], pred_columns: Sequence[str],
                            pred: Sequence[Row]) -> str:
    """Why the results hold the same values in another shape, or '' when they do not."""
    if not gold:
        return ""
    if len(gold) == len(pred) and len(pred_columns) > len(gold_columns):
        pred_cols = [tuple(_norm(r[j]) for r in pred) for j in range(len(pred_columns))]
        remaining = Counter(pred_cols)
        for i in range(len(gold_columns)):
            col = tuple(_norm(r[i]) for r in gold)
            if not remaining[col]:
                break
            remaining[col] -= 1
        else:
            return (f"the gold columns are all in the prediction, which has {len(pred_columns)} columns "
                    f"instead of {len(gold_columns)}")
    if len(gold_columns) == len(pred_columns) and len(gold) == len(pred):
        g, p = Counter(_rows(gold)), Counter(_rows(pred))
        if g == p and [tuple(map(_norm, r)) for r in gold] != [tuple(map(_norm, r)) for r in pred]:
            return "same rows with the columns (or rows) in another order"
        if g != p and Counter(_rows(gold, _loose)) == Counter(_rows(pred, _loose)):
            return "same values once case, spacing, number formatting and NULLs are normalised"
    return ""


def _parse(sql: str):
    try:
        return sqlglot.parse_one(sql, read="sqlite")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
        return None


def _aliases(tree) -> dict[str, str]:
    """Alias -> table name, so 'T1.name' and 'singer.name' compare equal."""
    out = {}
    for table in tree.find_all(exp.Table):
        out[(table.alias_or_name or "").lower()] = (table.name or "").lower()
    return out


def _column_names(node, aliases: dict[str, str]) -> set[str]:
    names = set()
    for col in node.find_all(exp.Column):
        if isinstance(col.this, exp.Star):
            names.add("*")
            continue
        table = aliases.get((col.table or "").lower(), (col.table or "").lower())
        names.add(f"{table}.{col.name.lower()}" if table else col.name.lower())
    return names


def _unqualified(names: set[str]) -> set[str]:
    return {n.rsplit(".", 1)[-1] for n in names}


def select_columns(sql: str) -> set[str] | None:
    """Columns of the outermost SELECT list (unqualified, lower-case), or None when it does not parse."""
    tree = _parse(sql)
    if tree is None:
        return None
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    if select is None:
        return None
    aliases = _aliases(tree)
    names = set()
    for projection in select.expressions:
        if isinstance(projection, exp.Star):
            names.add("*")  # SELECT *; a star inside count(*) is no column
        names |= _column_names(projection, aliases)
    return _unqualified(names)


def filter_columns(sql: str) -> set[str] | None:
    """Columns used in WHERE and HAVING clauses anywhere in the query (unqualified, lower-case)."""
    tree = _parse(sql)
    if tree is None:
        return None
    aliases = _aliases(tree)
    names = set()
    for clause in list(tree.find_all(exp.Where)) + list(tree.find_all(exp.Having)):
        names |= _column_names(clause, aliases)
    return _unqualified(names)


def suggest(*, gold_sql: str, pred_sql: str, gold_columns: Sequence[str] | None, gold_rows: Sequence[Row] | None,
            pred_columns: Sequence[str] | None, pred_rows: Sequence[Row] | None) -> list[Suggestion]:
    """Suggestions for a question whose prediction was judged wrong (results as far as they are known)."""
    out: list[Suggestion] = []
    have_results = gold_rows is not None and pred_rows is not None
    if gold_rows is not None and not gold_rows:
        out.append(Suggestion("golden_empty", "the gold query returns no rows"))
    if have_results and gold_rows and same_rows_after_dedup(gold_rows, pred_rows):
        out.append(Suggestion("distinct", "the results are equal once duplicate rows are removed"))
    if have_results and gold_columns is not None and pred_columns is not None:
        why = same_values_other_shape(gold_columns, gold_rows, pred_columns, pred_rows)
        if why:
            out.append(Suggestion("format", why))
    if pred_sql.strip():
        gold_sel, pred_sel = select_columns(gold_sql), select_columns(pred_sql)
        if gold_sel is not None and pred_sel is not None and gold_sel != pred_sel:
            out.append(Suggestion("selected_column", _difference("selects", gold_sel, pred_sel)))
        gold_where, pred_where = filter_columns(gold_sql), filter_columns(pred_sql)
        if gold_where is not None and pred_where is not None and gold_where != pred_where:
            out.append(Suggestion("filtered_column", _difference("filters on", gold_where, pred_where)))
    return out


def _difference(verb: str, gold: set[str], pred: set[str]) -> str:
    parts = []
    if gold - pred:
        parts.append("gold only: " + ", ".join(sorted(gold - pred)))
    if pred - gold:
        parts.append("prediction only: " + ", ".join(sorted(pred - gold)))
    return f"{verb} different columns ({'; '.join(parts)})"
