"""Inter-annotator agreement (pure Python, no Django).

Per category, each annotator's decision on an item is binary (gave the label
or not). Two annotators: Cohen's kappa; three or more: Fleiss' kappa over the
items every one of them labelled.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters' categorical ratings of the same items; None when undefined."""
    if len(a) != len(b):
        raise ValueError("Both raters must rate the same items.")
    n = len(a)
    if n == 0:
        return None
    observed = sum(1 for x, y in zip(a, b, strict=True) if x == y) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    if expected == 1:
        return None  # both raters constant and equal: agreement is perfect but kappa is undefined
    return (observed - expected) / (1 - expected)


def fleiss_kappa(table: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa. ``table[i][j]``: how many raters put item i in category j (same rater count per item)."""
    if not table:
        return None
    raters = sum(table[0])
    if raters < 2 or any(sum(row) != raters for row in table):
        raise ValueError("Every item needs the same number of raters (at least two).")
    n_items = len(table)
    width = len(table[0])
    p_j = [sum(row[j] for row in table) / (n_items * raters) for j in range(width)]
    p_i = [(sum(c * c for c in row) - raters) / (raters * (raters - 1)) for row in table]
    p_bar = sum(p_i) / n_items
    p_e = sum(p * p for p in p_j)
    if p_e == 1:
        return None
    return (p_bar - p_e) / (1 - p_e)


def category_agreement(labels: Mapping[Hashable, Mapping[Hashable, set[str]]], categories: Sequence[str],
                       annotators: Sequence[Hashable]) -> dict[str, dict]:
    """Agreement per category key.

    ``labels[item][annotator]`` is the set of category keys that annotator gave the item. Only items that
    every listed annotator labelled count. Returns ``{key: {"kappa", "method", "items", "positives"}}``.
    """
    items = [i for i, by in labels.items() if all(a in by for a in annotators)]
    out = {}
    for key in categories:
        positives = sum(1 for i in items for a in annotators if key in labels[i][a])
        if len(annotators) == 2:
            first = [key in labels[i][annotators[0]] for i in items]
            second = [key in labels[i][annotators[1]] for i in items]
            kappa, method = cohen_kappa(first, second), "Cohen"
        elif len(annotators) > 2:
            table = []
            for i in items:
                yes = sum(1 for a in annotators if key in labels[i][a])
                table.append([yes, len(annotators) - yes])
            kappa, method = fleiss_kappa(table), "Fleiss"
        else:
            kappa, method = None, ""
        out[key] = {"kappa": kappa, "method": method, "items": len(items), "positives": positives}
    return out
