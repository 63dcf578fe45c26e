"""Result comparison and query rewriting, as the official evaluators decide.

Spider (test-suite ``exec_eval.py``): two results are equal when some
column permutation of the prediction gives the gold rows as a multiset (as a
list when the gold query has ORDER BY). Values compare with Python ``==``, so
``1 == 1.0`` but ``1 != '1'``; NULL equals NULL.

BIRD (mini-dev ``evaluation_ex.py``): equality of the *sets* of rows, column
order significant. Soft-F1 follows ``evaluation_f1.py`` row by row.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

Row = tuple[Any, ...]

_CUR_YEAR = re.compile(r"YEAR\s*\(\s*CURDATE\s*\(\s*\)\s*\)\s*", re.IGNORECASE)


# --- query rewriting (Spider) -------------------------------------------------


def fix_spaced_operators(sql: str) -> str:
    """'> =' to '>=' (and '<', '!'): tokenised model output often splits them."""
    return sql.replace("> =", ">=").replace("< =", "<=").replace("! =", "!=")


def replace_cur_year(sql: str) -> str:
    """MySQL's ``YEAR(CURDATE())`` does not exist in SQLite; the official script pins it to 2020."""
    return _CUR_YEAR.sub("2020", sql)


def remove_distinct(sql: str) -> str:
    """Drop every DISTINCT keyword outside quotes and comments.

    The official default (no ``--keep_distinct``) does this to gold and
    prediction alike, including ``COUNT(DISTINCT x)``, so we must too.
    """
    if "distinct" not in sql.lower():
        return sql  # the common case, without the scan
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`[":
            close = "]" if ch == "[" else ch
            j = i + 1
            while j < n:
                if sql[j] == close:
                    # a doubled quote is an escaped quote, not the end
                    if close != "]" and j + 1 < n and sql[j + 1] == close:
                        j += 2
                        continue
                    break
                j += 1
            out.append(sql[i : j + 1])
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(sql[i:j])
            i = j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(sql[i:j])
            i = j
        elif ch.isalnum() or ch in "_$":
            j = i
            while j < n and (sql[j].isalnum() or sql[j] in "_$"):
                j += 1
            word = sql[i:j]
            if word.lower() != "distinct":
                out.append(word)
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def spider_order_matters(gold_sql: str) -> bool:
    # The official test is textual, on the rewritten gold query (subqueries included).
    return "order by" in gold_sql.lower()


# --- Spider equality -----------------------------------------------------------


def _unordered_row(row: Row) -> Row:
    # Same sort key as the official quick rejection: it decides some int/float
    # cases (see DIFFERENCES in __init__), so keeping it keeps the decisions.
    return tuple(sorted(row, key=lambda v: str(v) + str(type(v))))


def spider_results_equal(gold: Sequence[Row], pred: Sequence[Row], *, order_matters: bool) -> bool:
    """True when some column permutation of ``pred`` equals ``gold`` (multiset, or list if ordered)."""
    if not gold and not pred:
        return True
    if len(gold) != len(pred):
        return False
    width = len(gold[0])
    if len(pred[0]) != width:
        return False
    gold_unordered = [_unordered_row(r) for r in gold]
    pred_unordered = [_unordered_row(r) for r in pred]
    if order_matters:
        if gold_unordered != pred_unordered:
            return False
    elif set(gold_unordered) != set(pred_unordered):
        return False
    if width == 1:
        return list(gold) == list(pred) if order_matters else Counter(gold) == Counter(pred)

    gold_cols = [tuple(r[i] for r in gold) for i in range(width)]
    pred_cols = [tuple(r[i] for r in pred) for i in range(width)]
    # Prediction columns with identical contents are interchangeable: try each
    # distinct column once, which keeps wide SELECT * results cheap.
    groups: dict[tuple[Any, ...], list[int]] = {}
    for j, col in enumerate(pred_cols):
        groups.setdefault(col, []).append(j)
    group_keys = list(groups)
    # A gold column can only come from a prediction column with the same bag
    # of values: every valid permutation passes this filter.
    gold_bags = [Counter(c) for c in gold_cols]
    group_bags = [Counter(k) for k in group_keys]
    candidates = [[g for g, bag in enumerate(group_bags) if bag == gold_bags[i]] for i in range(width)]
    if any(not c for c in candidates):
        return False
    gold_counter = None if order_matters else Counter(gold)
    gold_list = list(gold)
    remaining = [len(groups[k]) for k in group_keys]
    chosen: list[int] = [0] * width

    def matches() -> bool:
        cols = [group_keys[g] for g in chosen]
        permuted = list(zip(*cols, strict=True))
        return permuted == gold_list if order_matters else Counter(permuted) == gold_counter

    def search(i: int) -> bool:
        if i == width:
            return matches()
        for g in candidates[i]:
            if remaining[g]:
                remaining[g] -= 1
                chosen[i] = g
                found = search(i + 1)
                remaining[g] += 1
                if found:
                    return True
        return False

    return search(0)


# --- BIRD ---------------------------------------------------------------------


def bird_results_equal(gold: Sequence[Row], pred: Sequence[Row]) -> bool:
    return set(gold) == set(pred)


def soft_f1(gold: Sequence[Row], pred: Sequence[Row]) -> float:
    """BIRD mini-dev Soft-F1: deduplicate rows, pair them by position, score cell overlap."""
    if not gold and not pred:
        return 1.0
    gold_rows = list(dict.fromkeys(gold))
    pred_rows = list(dict.fromkeys(pred))
    tp = fp = fn = 0.0
    for i, g in enumerate(gold_rows):
        if i >= len(pred_rows):
            fn += 1
            continue
        p = pred_rows[i]
        width = len(g)
        tp += sum(1 for v in p if v in g) / width
        fp += sum(1 for v in p if v not in g) / width
        fn += sum(1 for v in g if v not in p) / width
    extra = len(pred_rows) - len(gold_rows)
    if extra > 0:
        fp += extra
    precision = tp / (tp + fp) if tp + fp > 0 else 0.0
    recall = tp / (tp + fn) if tp + fn > 0 else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
