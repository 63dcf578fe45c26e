"""Static statistics of gold queries: joins (paper, Table 9), Spider hardness, CVR/CVCR (Table 1).

Hardness re-implements the rules of Spider's ``evaluation.py`` on a sqlglot
tree instead of Spider's own parser, including its counting quirks (a NOT
condition in WHERE counts as an aggregate; so does every AND/OR inside
HAVING), because the buckets are only comparable if they are the same.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from .compare import fix_spaced_operators

HARDNESS_LEVELS = ("easy", "medium", "hard", "extra")  # Spider
BIRD_DIFFICULTIES = ("simple", "moderate", "challenging")
# The order every breakdown by difficulty is shown in (runs, labels, dashboards, the evaluate command).
DIFFICULTY_ORDER = (*HARDNESS_LEVELS, *BIRD_DIFFICULTIES, "unknown")
TABLE_BUCKETS = ("1", "2", "3", "4+")  # tables joined by the gold query (paper, Table 9); see table_bucket
_AGGS = (exp.Max, exp.Min, exp.Count, exp.Sum, exp.Avg)
_ARITH = (exp.Add, exp.Sub, exp.Mul, exp.Div)


def parse(sql: str, dialect: str = "sqlite") -> exp.Expression | None:
    try:
        # Spider's tokenizer joins "! =" and friends; sqlglot does not.
        return sqlglot.parse_one(fix_spaced_operators(sql), read=dialect)
    except (ParseError, TokenError, ValueError):
        return None


# --- joins ------------------------------------------------------------------------


def join_count(sql: str, dialect: str = "sqlite") -> int | None:
    """JOIN clauses anywhere in the query (subqueries included); None if it does not parse."""
    tree = parse(sql, dialect)
    return None if tree is None else _joins(tree)


def _joins(tree: exp.Expression) -> int:
    return sum(1 for _ in tree.find_all(exp.Join))


def table_count(sql: str, dialect: str = "sqlite") -> int | None:
    """The paper's "number of tables" (Table 9): joins + 1.

    Counted this way the Spider dev gold queries give 60.54/30.95/6.96/1.55 %
    for 1/2/3/4+, the paper's figures exactly (distinct table names do not).
    """
    joins = join_count(sql, dialect)
    return None if joins is None else joins + 1


def table_bucket(tables: int | None) -> str | None:
    if tables is None:
        return None
    return "4+" if tables >= 4 else str(max(tables, 1))


# --- Spider hardness ------------------------------------------------------------------


def _unwrap(node: exp.Expression) -> exp.Expression:
    while isinstance(node, (exp.Paren, exp.Alias, exp.Ordered)):
        node = node.this
    return node


def _leaves(cond: exp.Expression | None) -> tuple[list[exp.Expression], int]:
    """Read an AND/OR chain as Spider's parser does: (leaf conditions, number of OR connectors).

    Spider reads the chain flat, left to right. When a condition compares
    with a column (``T1.a = T2.b``), its value scan stops at AND but not at
    OR, so ``... OR <condition>`` after it is swallowed into that value and
    never counted; we drop the same parts.
    """
    if cond is None:
        return [], 0
    node = cond.this if isinstance(cond, (exp.Where, exp.Having)) else cond
    seq: list[exp.Expression | str] = []  # leaves and "and"/"or", in text order

    def walk(n: exp.Expression) -> None:
        if isinstance(n, exp.Paren) and isinstance(n.this, exp.Connector):
            n = n.this
        if isinstance(n, exp.Connector):
            walk(n.this)
            seq.append("or" if isinstance(n, exp.Or) else "and")
            walk(n.expression)
        else:
            seq.append(n)

    walk(node)
    leaves: list[exp.Expression] = []
    ors = 0
    i = 0
    while i < len(seq):
        leaf = seq[i]
        assert isinstance(leaf, exp.Expression)
        leaves.append(leaf)
        i += 1
        if _column_valued(leaf):
            while i < len(seq) and seq[i] == "or":
                i += 2
        if i < len(seq):
            ors += seq[i] == "or"
            i += 1
    return leaves, ors


def _is_plain_value(node: exp.Expression | None) -> bool:
    """A string, number or subquery: what Spider's parse_value takes without scanning on."""
    if node is None:
        return True
    node = _unwrap(node)
    if isinstance(node, exp.Neg):
        node = node.this
    if isinstance(node, (exp.Literal, exp.Subquery, exp.Select, exp.Tuple)):
        return True
    return isinstance(node, exp.Column) and not node.table and bool(node.this.args.get("quoted"))


def _column_valued(leaf: exp.Expression) -> bool:
    core = _core(leaf)
    if isinstance(core, exp.Between):
        return not _is_plain_value(core.args.get("high"))
    if isinstance(core, (exp.In, exp.Exists)):
        return False
    if isinstance(core, exp.Binary):
        return not _is_plain_value(core.expression)
    return False


def _is_not(leaf: exp.Expression) -> bool:
    # Spider's parser sets not_op for NOT IN / NOT LIKE / NOT BETWEEN, not for != or IS NOT NULL.
    return isinstance(leaf, exp.Not) and not isinstance(leaf.this, exp.Is)


def _core(leaf: exp.Expression) -> exp.Expression:
    return leaf.this if isinstance(leaf, exp.Not) else leaf


def _is_like(leaf: exp.Expression) -> bool:
    return isinstance(_core(leaf), (exp.Like, exp.ILike))


def _nested_values(leaf: exp.Expression) -> int:
    """Subqueries on the value side of a condition (Spider's val1/val2 being a query)."""
    core = _core(leaf)
    if isinstance(core, exp.In):
        return 1 if core.args.get("query") is not None else 0
    if isinstance(core, exp.Between):
        sides = [core.args.get("low"), core.args.get("high")]
    elif isinstance(core, exp.Exists):
        return 1
    else:
        sides = [core.args.get("expression")]
    return sum(1 for s in sides if s is not None and isinstance(_unwrap(s), (exp.Subquery, exp.Select)))


def _agg_in_col_unit(node: exp.Expression | None) -> int:
    return 1 if node is not None and isinstance(_unwrap(node), _AGGS) else 0


def _first_select(tree: exp.Expression) -> exp.Select | None:
    node = tree
    while isinstance(node, (exp.SetOperation, exp.Subquery, exp.Paren)):
        node = node.this
    return node if isinstance(node, exp.Select) else None


def spider_hardness(sql: str) -> str | None:
    """easy / medium / hard / extra as Spider's ``Evaluator.eval_hardness`` rates the query."""
    tree = parse(sql)
    return None if tree is None else _hardness(tree)


@dataclass(frozen=True)
class GoldStats:
    join_count: int | None
    table_count: int | None
    hardness: str | None


def gold_stats(sql: str, *, hardness: bool = True, dialect: str = "sqlite") -> GoldStats:
    """Joins, tables and (Spider) hardness of a gold query, from one parse."""
    tree = parse(sql, dialect)
    if tree is None:
        return GoldStats(None, None, None)
    joins = _joins(tree)
    return GoldStats(joins, joins + 1, _hardness(tree) if hardness else None)


def _hardness(tree: exp.Expression) -> str | None:
    top = _first_select(tree)
    if top is None:
        return None
    from_ = top.args.get("from") or top.args.get("from_")
    joins = top.args.get("joins") or []
    from_tables = (1 if from_ is not None else 0) + len(joins)

    join_conds: list[exp.Expression] = []
    join_ors = 0
    for j in joins:
        leaves, ors = _leaves(j.args.get("on"))
        join_conds += leaves
        join_ors += ors
    where_leaves, where_ors = _leaves(top.args.get("where"))
    having_leaves, having_ors = _leaves(top.args.get("having"))
    group = top.args.get("group")
    group_cols = list(group.expressions) if group is not None else []
    order = top.args.get("order")
    order_items = list(order.expressions) if order is not None else []
    all_conds = join_conds + where_leaves + having_leaves

    comp1 = sum([bool(where_leaves), bool(group_cols), bool(order_items), top.args.get("limit") is not None])
    comp1 += max(from_tables - 1, 0)
    comp1 += join_ors + where_ors + having_ors
    comp1 += sum(1 for c in all_conds if _is_like(c))

    comp2 = sum(_nested_values(c) for c in all_conds)
    comp2 += 1 if isinstance(tree, exp.SetOperation) or isinstance(top.parent, exp.SetOperation) else 0

    aggs = sum(_agg_in_col_unit(e) for e in top.expressions)
    aggs += sum(1 for c in where_leaves if _is_not(c))
    aggs += sum(_agg_in_col_unit(g) for g in group_cols)
    for item in order_items:
        node = _unwrap(item)
        if isinstance(node, _ARITH):
            aggs += _agg_in_col_unit(node.this) + _agg_in_col_unit(node.expression)
        else:
            aggs += _agg_in_col_unit(node)
    # Spider counts every HAVING element whose first field is truthy: NOT conditions and the connectors.
    aggs += sum(1 for c in having_leaves if _is_not(c)) + max(len(having_leaves) - 1, 0)
    others = sum([aggs > 1, len(top.expressions) > 1, len(where_leaves) > 1, len(group_cols) > 1])

    if comp1 <= 1 and others == 0 and comp2 == 0:
        return "easy"
    if (others <= 2 and comp1 <= 1 and comp2 == 0) or (comp1 <= 2 and others < 2 and comp2 == 0):
        return "medium"
    if ((others > 2 and comp1 <= 2 and comp2 == 0) or (2 < comp1 <= 3 and others <= 2 and comp2 == 0)
            or (comp1 <= 1 and others == 0 and comp2 <= 1)):
        return "hard"
    return "extra"


# --- CVR / CVCR (paper, Table 1) ---------------------------------------------------------


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    return re.sub(r"\s+", " ", text).strip()


def _string_value(node: exp.Expression | None) -> str | None:
    if node is None:
        return None
    node = _unwrap(node)
    if isinstance(node, exp.Literal) and node.is_string:
        return node.this
    # Spider writes strings in double quotes, which SQLite accepts and sqlglot reads as an identifier.
    if isinstance(node, exp.Column) and not node.table and node.this.args.get("quoted"):
        return node.name
    return None


def constraint_values(sql: str, dialect: str = "sqlite") -> list[str]:
    """String values the query compares a column against (=, !=, <, LIKE, IN, BETWEEN).

    Numbers are left out: the paper's point is locating *cell values*. LIKE
    patterns lose their % and _ wildcards, since the question holds the bare word.
    """
    tree = parse(sql, dialect)
    if tree is None:
        return []
    values: list[str] = []
    for node in tree.walk():
        if isinstance(node, exp.In):
            sides = list(node.expressions)
        elif isinstance(node, exp.Between):
            sides = [node.args.get("low"), node.args.get("high")]
        elif isinstance(node, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike)):
            sides = [node.expression]
        else:
            continue
        for side in sides:
            value = _string_value(side)
            if value is None:
                continue
            if isinstance(node, (exp.Like, exp.ILike)):
                value = value.replace("%", " ").replace("_", " ").strip()
            if value:
                values.append(value)
    return values


@dataclass(frozen=True)
class CellValueStats:
    """Table 1: CVR = queries with value constraints / all queries; CVCR = of those, the share
    whose every constraint value appears verbatim (case-insensitive) in the question. Percent."""

    queries: int
    with_values: int
    covered: int

    @property
    def cvr(self) -> float | None:
        return 100 * self.with_values / self.queries if self.queries else None

    @property
    def cvcr(self) -> float | None:
        return 100 * self.covered / self.with_values if self.with_values else None


def cell_value_stats(pairs: Iterable[tuple[str, str]], dialect: str = "sqlite") -> CellValueStats:
    """CVR/CVCR over (question, gold SQL) pairs."""
    queries = with_values = covered = 0
    for question, sql in pairs:
        queries += 1
        values = constraint_values(sql, dialect)
        if not values:
            continue
        with_values += 1
        q = _norm(question)
        if all(_norm(v) in q for v in values):
            covered += 1
    return CellValueStats(queries, with_values, covered)


# The paper's own, narrower reading reproduces its Table 1 exactly (Spider dev: 106/1034 = 10.25 %,
# 122/140 = 87.14 %): a value constraint is an `=` comparison against a single-quoted string literal, and
# CVCR counts such values (not queries) found in the question by case-sensitive substring match.
_PAPER_VALUE = re.compile(r"(?<![!<>=])=\s*'((?:[^']|'')*)'")


def paper_constraint_values(sql: str) -> list[str]:
    """The single-quoted string literals a query compares with `=` (the paper's Table 1 definition)."""
    return [v.replace("''", "'") for v in _PAPER_VALUE.findall(sql)]


@dataclass(frozen=True)
class PaperCellValueStats:
    """Table 1 as the paper computed it: CVR = queries with an `=` against a single-quoted string / all
    queries; CVCR = such values found verbatim (case-sensitive) in the question / all such values. Percent."""

    queries: int
    with_values: int
    values: int
    found: int

    @property
    def cvr(self) -> float | None:
        return 100 * self.with_values / self.queries if self.queries else None

    @property
    def cvcr(self) -> float | None:
        return 100 * self.found / self.values if self.values else None


def paper_cell_value_stats(pairs: Iterable[tuple[str, str]]) -> PaperCellValueStats:
    """The paper's CVR/CVCR over (question, gold SQL) pairs."""
    queries = with_values = values = found = 0
    for question, sql in pairs:
        queries += 1
        found_values = paper_constraint_values(sql)
        if found_values:
            with_values += 1
        values += len(found_values)
        found += sum(1 for v in found_values if v in question)
    return PaperCellValueStats(queries, with_values, values, found)
