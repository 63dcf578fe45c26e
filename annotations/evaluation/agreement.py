"""Inter-annotator agreement (pure Python, no Django): Krippendorff's alpha and Cohen's kappa.

Labels are multi-label (an annotator may give an item several categories), so every figure is computed on
binary decisions: for each item an annotator rated and each category, "gave it" or "did not". The overall
alpha pools these decisions over every (item, category) pair; per category, alpha uses that category's
decisions only; per pair of annotators, Cohen's kappa uses the pooled decisions on the items both rated.

Krippendorff's alpha keeps items that not every annotator rated (any item with at least two ratings counts),
following K. Krippendorff, "Computing Krippendorff's Alpha-Reliability" (2011), nominal metric:
``alpha = 1 - (n - 1) * sum_{c != k} o_ck / sum_{c != k} n_c * n_k`` over the coincidence matrix ``o``.
A figure is None where it is undefined (no variation at all, or nothing to compare).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations


def krippendorff_alpha_nominal(units: Iterable[Sequence[Hashable]]) -> tuple[float | None, int]:
    """Nominal alpha over ``units``, each the values its raters gave (missing ratings simply absent).

    Returns ``(alpha, pairable_units)``: units with fewer than two values cannot be paired and are left out,
    as in Krippendorff's computation. Alpha is None when fewer than two values are pairable or every pairable
    value is the same (no expected disagreement).
    """
    coincidences: Counter = Counter()
    pairable = 0
    for values in units:
        m = len(values)
        if m < 2:
            continue
        pairable += 1
        counts = Counter(values)
        for c, n_c in counts.items():
            for k, n_k in counts.items():
                pairs = n_c * (n_k - 1) if c == k else n_c * n_k  # ordered pairs of different raters
                if pairs:
                    coincidences[c, k] += pairs / (m - 1)
    margins: Counter = Counter()
    for (c, _k), o in coincidences.items():
        margins[c] += o
    n = sum(margins.values())
    if n < 2:
        return None, pairable
    observed = sum(o for (c, k), o in coincidences.items() if c != k)
    expected = sum(margins[c] * margins[k] for c in margins for k in margins if c != k)
    if expected == 0:
        return None, pairable
    return 1 - (n - 1) * observed / expected, pairable


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters' ratings of the same items; None when undefined."""
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


@dataclass(frozen=True)
class CategoryFigure:
    key: str
    alpha: float | None
    items: int  # items with at least two ratings, which the figure rests on
    positives: int  # ratings that gave this category, over those items


@dataclass(frozen=True)
class PairFigure:
    first: Hashable
    second: Hashable
    kappa: float | None
    items: int  # items both annotators rated
    agreed: int  # of those, items where both gave exactly the same categories


@dataclass(frozen=True)
class Agreement:
    alpha: float | None  # pooled over every (item, category) decision
    items: int  # items with at least two ratings
    ratings: int  # ratings on those items (one per annotator and item)
    annotators: int
    categories: list[CategoryFigure] = field(default_factory=list)
    pairs: list[PairFigure] = field(default_factory=list)


def label_agreement(ratings: Mapping[Hashable, Mapping[Hashable, Iterable[str]]], categories: Sequence[str],
                    annotators: Sequence[Hashable] | None = None) -> Agreement:
    """Agreement of multi-label ratings. ``ratings[item][annotator]`` is the set of category keys that
    annotator gave the item (an empty set is a rating too: "none of these"); an annotator absent from an item
    did not rate it. Only ``annotators`` count when given. Items rated by fewer than two of them are left out.
    """
    chosen = None if annotators is None else set(annotators)
    items: dict[Hashable, dict[Hashable, frozenset[str]]] = {}
    for item, by in ratings.items():
        kept = {a: frozenset(keys) for a, keys in by.items() if chosen is None or a in chosen}
        if len(kept) >= 2:
            items[item] = kept
    per_category: dict[str, list[list[bool]]] = {key: [] for key in categories}
    for by in items.values():
        for key in categories:
            per_category[key].append([key in keys for keys in by.values()])
    overall, _ = krippendorff_alpha_nominal(unit for key in categories for unit in per_category[key])
    category_figures = []
    for key in categories:
        alpha, _ = krippendorff_alpha_nominal(per_category[key])
        category_figures.append(CategoryFigure(key=key, alpha=alpha, items=len(per_category[key]),
                                               positives=sum(sum(unit) for unit in per_category[key])))
    raters = sorted({a for by in items.values() for a in by}, key=str)
    if annotators is not None:
        order = {a: i for i, a in enumerate(annotators)}
        raters.sort(key=lambda a: order.get(a, len(order)))
    pairs = []
    for first, second in combinations(raters, 2):
        both = [by for by in items.values() if first in by and second in by]
        a = [key in by[first] for by in both for key in categories]
        b = [key in by[second] for by in both for key in categories]
        pairs.append(PairFigure(first=first, second=second, kappa=cohen_kappa(a, b) if both else None,
                                items=len(both), agreed=sum(1 for by in both if by[first] == by[second])))
    return Agreement(alpha=overall, items=len(items), ratings=sum(len(by) for by in items.values()),
                     annotators=len(raters), categories=category_figures, pairs=pairs)


def disagreeing_items(ratings: Mapping[Hashable, Mapping[Hashable, Iterable[str]]]) -> list[Hashable]:
    """Items rated by at least two annotators whose category sets are not all the same."""
    out = []
    for item, by in ratings.items():
        sets = {frozenset(keys) for keys in by.values()}
        if len(by) >= 2 and len(sets) > 1:
            out.append(item)
    return out


def group_ratings(rows: Iterable[tuple[Hashable, Hashable, str | None]]) -> dict[Hashable, dict[Hashable, set[str]]]:
    """``{item: {annotator: {keys}}}`` from ``(item, annotator, key)`` rows (key None: rated, no category)."""
    out: dict[Hashable, dict[Hashable, set[str]]] = defaultdict(lambda: defaultdict(set))
    for item, annotator, key in rows:
        keys = out[item][annotator]
        if key is not None:
            keys.add(key)
    return {item: dict(by) for item, by in out.items()}
