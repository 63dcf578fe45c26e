"""A deterministic, realistic prediction file for all of Spider dev, built from the gold queries.

Question i gets perturbation ``KINDS[i % len(KINDS)]`` (falling back to the
gold query when that perturbation does not apply), so a run holds right and
wrong answers, execution errors, and the cases the official rules forgive
(DISTINCT, column order, keyword case) next to the ones they do not.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import sqlglot
from sqlglot import exp

from annotations.evaluation.formats import load_spider_gold_sql


def _tree(sql: str) -> exp.Expression:
    return sqlglot.parse_one(sql, read="sqlite")


def _sql(tree: exp.Expression) -> str:
    return tree.sql(dialect="sqlite")


def identity(sql: str) -> str | None:
    return sql


def drop_distinct(sql: str) -> str | None:
    out = re.sub(r"\bDISTINCT\s+", "", sql, flags=re.IGNORECASE)
    return out if out != sql else None


def add_distinct(sql: str) -> str | None:
    if re.search(r"\bDISTINCT\b", sql, re.IGNORECASE):
        return None
    return re.sub(r"^\s*SELECT\s+", "SELECT DISTINCT ", sql, count=1, flags=re.IGNORECASE)


def swap_columns(sql: str) -> str | None:
    tree = _tree(sql)
    select = tree if isinstance(tree, exp.Select) else None
    if select is None or len(select.expressions) < 2:
        return None
    cols = list(select.expressions)
    select.set("expressions", cols[1:] + cols[:1])
    return _sql(select)


def drop_order_by(sql: str) -> str | None:
    tree = _tree(sql)
    if not isinstance(tree, exp.Select) or tree.args.get("order") is None:
        return None
    tree.set("order", None)
    return _sql(tree)


def flip_order(sql: str) -> str | None:
    tree = _tree(sql)
    if not isinstance(tree, exp.Select) or tree.args.get("order") is None:
        return None
    for o in tree.args["order"].expressions:
        o.set("desc", not o.args.get("desc"))
    return _sql(tree)


def change_literal(sql: str) -> str | None:
    tree = _tree(sql)
    for lit in tree.find_all(exp.Literal):
        if lit.is_string:
            lit.set("this", lit.this + "x")
        else:
            try:
                lit.set("this", str(int(float(lit.this)) + 1))
            except ValueError:
                continue
        return _sql(tree)
    for col in tree.find_all(exp.Column):
        ident = col.this
        if not col.table and ident.args.get("quoted"):  # Spider's "double-quoted" strings
            ident.set("this", ident.this + "x")
            return _sql(tree)
    return None


def wrong_column(sql: str) -> str | None:
    tree = _tree(sql)
    if not isinstance(tree, exp.Select):
        return None
    cols = [c for c in tree.find_all(exp.Column) if not c.this.args.get("quoted")]
    if len(cols) < 2:
        return None
    first = tree.expressions[0]
    target = first.find(exp.Column)
    other = next((c for c in cols if c.name.lower() != (target.name.lower() if target else "")), None)
    if target is None or other is None:
        return None
    target.replace(other.copy())
    return _sql(tree)


def add_limit(sql: str) -> str | None:
    tree = _tree(sql)
    if not isinstance(tree, exp.Select) or tree.args.get("limit") is not None:
        return None
    return _sql(tree.limit(1))


def lower_keywords(sql: str) -> str | None:
    return re.sub(r"\b(SELECT|FROM|WHERE|GROUP BY|ORDER BY|JOIN|ON|AS|AND|OR|LIMIT|HAVING|DESC|ASC)\b",
                  lambda m: m.group(0).lower(), sql)


def syntax_error(sql: str) -> str | None:
    return re.sub(r"\bFROM\b", "FORM", sql, count=1, flags=re.IGNORECASE)


def value_placeholder(sql: str) -> str | None:
    # Models trained on value-less Spider output "value"; the official script reads it as 1.
    out = re.sub(r"(?<![\w.])1(?![\w.])", "value", sql, count=1)
    return out if out != sql else None


def select_star(sql: str) -> str | None:
    tree = _tree(sql)
    if not isinstance(tree, exp.Select) or tree.args.get("group") is not None:
        return None
    if any(isinstance(e.unalias(), exp.AggFunc) for e in tree.expressions):
        return None
    tree.set("expressions", [exp.Star()])
    return _sql(tree)


def cast_real(sql: str) -> str | None:
    # Integers become floats: equal under Python's 1 == 1.0, as in the official comparison.
    tree = _tree(sql)
    if not isinstance(tree, exp.Select):
        return None
    first = tree.expressions[0]
    if not isinstance(first.unalias(), (exp.Count, exp.Sum)):
        return None
    first.replace(exp.cast(first.unalias().copy(), "REAL"))
    return _sql(tree)


def cast_text(sql: str) -> str | None:
    # Numbers become text: 1 != '1' in the official comparison.
    tree = _tree(sql)
    if not isinstance(tree, exp.Select):
        return None
    first = tree.expressions[0]
    if not isinstance(first.unalias(), (exp.Count, exp.Sum, exp.Max, exp.Min)):
        return None
    first.replace(exp.cast(first.unalias().copy(), "TEXT"))
    return _sql(tree)


def union_all(sql: str) -> str | None:
    # Duplicates now survive: wrong under bag semantics when the two sides overlap.
    out = re.sub(r"\bUNION\b(?!\s+ALL)", "UNION ALL", sql, flags=re.IGNORECASE)
    return out if out != sql else None


def tie_break(sql: str) -> str | None:
    # A second sort key reorders ties only: the official rule compares ordered rows as lists.
    tree = _tree(sql)
    if not isinstance(tree, exp.Select) or tree.args.get("order") is None:
        return None
    first = tree.expressions[0].unalias()
    if not isinstance(first, exp.Column):
        return None
    tree.args["order"].append("expressions", exp.Ordered(this=first.copy(), desc=True))
    return _sql(tree)


def spaced_operator(sql: str) -> str | None:
    out = sql.replace(">=", "> =").replace("<=", "< =").replace("!=", "! =")
    return out if out != sql else None


KINDS: tuple[Callable[[str], str | None], ...] = (
    identity, drop_distinct, swap_columns, drop_order_by, change_literal, wrong_column, add_limit,
    identity, lower_keywords, syntax_error, value_placeholder, select_star, flip_order, add_distinct,
    cast_real, spaced_operator, change_literal, identity, tie_break, cast_text, union_all,
)


def perturb(index: int, sql: str) -> tuple[str, str]:
    """(perturbation name, predicted SQL) for question ``index``.

    Starts at ``KINDS[index % len(KINDS)]`` and moves on to the next kind
    until one applies, so every kind is well represented.
    """
    for step in range(len(KINDS)):
        kind = KINDS[(index + step) % len(KINDS)]
        try:
            out = kind(sql)
        except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, AttributeError, ValueError):
            out = None
        if out is not None and "\n" not in out and "\t" not in out:
            return kind.__name__, out
    return "identity", sql


def write_perturbed(gold_sql_path: Path, out_path: Path, *, keep: Callable[[str], bool] = lambda db: True,
                    gold_out: Path | None = None) -> list[tuple[int, str, str]]:
    """Write predictions (and optionally the matching gold lines) for the questions whose db ``keep`` accepts.

    Returns (gold index, perturbation, db_id) per written line.
    """
    written: list[tuple[int, str, str]] = []
    pred_lines: list[str] = []
    gold_lines: list[str] = []
    for g in load_spider_gold_sql(gold_sql_path):
        if not keep(g.db_id):
            continue
        name, pred = perturb(g.index, g.sql)
        pred_lines.append(pred)
        gold_lines.append(f"{g.sql}\t{g.db_id}")
        written.append((g.index, name, g.db_id))
    out_path.write_text("\n".join(pred_lines) + "\n", encoding="utf-8")
    if gold_out is not None:
        gold_out.write_text("\n".join(gold_lines) + "\n", encoding="utf-8")
    return written
